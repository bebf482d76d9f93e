"""What older model directories, flagfiles and exports wrote, and how tfnmt reads them today:
every compatibility rule in one place.

A model directory's config.json names its format (`"format"`; format 1 has no such field).
`model_dir.read_config` reads any format up to CONFIG_FORMAT as today's, and `tfnmt upgrade`
rewrites a directory's config.json in it once. A flagfile has no format: a renamed
hyper-parameter's old flag is read under its new name wherever it is given. An export's
export_info.json is read as written (an export is served as it is, never rewritten).
"""

# config.json's format. 1: written before 2026-11-28 (no "format" field); 2: every declared
# hyper-parameter under the names below.
CONFIG_FORMAT = 2

# Hyper-parameters renamed since format 1, old name -> new. Read under the new name for a
# model that declares it; a model that declares both (a hybrid of a recurrent part, whose state
# width is --hidden_dim, and a convolutional one) gives the old value to both, as it did when
# they were one name.
RENAMED_HPARAMS = {
    "embedding_dim": "table_dim",  # DenseNMT's small embedding tables
    "hidden_dim": "residual_dim",  # ConvS2S/DenseNMT's residual width, apart from a GRU's state
}

# Hyper-parameters added since format-1 directories could be written, at the value such a
# directory was trained with: the form before the flag existed, which may not be today's
# default. Applied where the model declares the name and the config lacks it (a format-2
# config lacks none: `train` refuses to resume one that does). One table serves every model:
# each name was added to the families noted, and the Transformer family, which also declares
# share_embeddings and tie_output, has declared both since its first release.
ADDED_HPARAMS = {
    # ConvS2S, DenseNMT and their hybrid parts: embed_dim-wide position tables, multi-step
    # attention without the three scalings, a softmax table of its own, separate embeddings.
    "narrow_positions": False,
    "scale_context": False,
    "scale_encoder_gradients": False,
    "scale_values": False,
    "tie_output": False,
    "share_embeddings": False,
    # conv_encoder, gru_encdec and the conditional GRU decoder: the appendix's GRU candidate.
    "decoder_gru_form": "appendix",
    # deep_transformer: the layer-normalised sums, and eq. 7's node before Table 4's variants.
    "dense_aggregation_norm": "layer",
    "aggregation_residual": "all",
    "aggregation_activation": "sigmoid",
}

# export_info.json's "decoding" record: fields renamed since the first exports (old -> new),
# and fields added since, at what an export made before decoded with where that differs from
# today's default (such a graph has no minimum length and no shortlist).
RENAMED_DECODING = {"max_source_length": "max_input_length", "penalty_mode": "length_penalty_mode"}
ADDED_DECODING = {"min_decode_length": 0, "shortlist": 0}
