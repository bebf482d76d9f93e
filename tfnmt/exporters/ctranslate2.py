"""CTranslate2 export of the plain Transformer: DIR/NAME/VERSION/ holds a CTranslate2 model
(model.bin, config.json, the vocabularies as token lists) and the SentencePiece model(s) to
tokenize with, written through CTranslate2's own specification API (ctranslate2.specs), as its
converters do.

What maps how (README: Exporting, CTranslate2; docs/export.md says how it was checked):
- vocabulary: the SentencePiece pieces in id order (pad 0, unk 1, bos 2, eos 3 as
  data/vocab.py reserves them); CTranslate2's unk, bos (= decoder start) and eos tokens are the
  pieces at those ids, and the source gets eos appended (`add_source_eos`), as `tokenize` does;
- embeddings scaled by sqrt(d_model); the sinusoidal position table written out, because
  CTranslate2's built-in one starts at position 1 (OpenNMT-tf's) where ours starts at 0;
- pre- or post-norm, layer-norm epsilon 1e-6, the final encoder/decoder norms of a pre-norm
  stack, ReLU feed-forward;
- attention: q, k, v each a [d, d] Dense whose outputs split into contiguous heads, queries
  scaled by head_dim^-0.5 (CTranslate2's layout and scaling); self-attention's q/k/v and
  cross-attention's k/v fused as CTranslate2 expects;
- output projection: the target embedding (tie_output) or its own Dense; shared source/target
  embeddings stay one matrix. tfnmt never emits pad or bos (decoding/beam_search.py bans them);
  the projection gets a bias of NEG_INF at those two ids, so CTranslate2 cannot either.
"""

import os

import numpy as np

from tfnmt.data.vocab import (BOS_ID, EOS_ID, JOINT_FILE, PAD_ID, SOURCE_FILE, TARGET_FILE,
                              UNK_ID)
from tfnmt.decoding.beam_search import NEG_INF
from tfnmt.errors import ConfigError
from tfnmt.exporters.versions import write_version

# What CTranslate2 has no layer for, by model: the refusal names it.
_CANNOT_EXPRESS = {
    "deep_transformer": "layer aggregation and multi-layer attention",
    "densenmt": "convolutional encoder and decoder, and multi-step or dense attention",
    "convs2s": "convolutional encoder and decoder with multi-step attention",
    "conv_encoder": "convolutional sentence encoder and recurrent (GRU) decoder",
    "gru_encdec": "recurrent (GRU) encoder and decoder",
    "deeplau": "recurrent (LAU) encoder and decoder with additive attention",
    "deepgru": "recurrent (GRU) encoder and decoder with additive attention",
    "ctc_nat": "non-autoregressive CTC decoding",
    "hybrid": "encoder/decoder combination (its own weight layout; DenseNMT parts are "
              "convolutional)",
}


def check_model(name):
    """Refuses every model but the plain Transformer, naming what CTranslate2 cannot express."""
    if name != "transformer":
        what = _CANNOT_EXPRESS.get(name, "architecture")
        raise ConfigError(f"--format=ctranslate2 converts the plain transformer only: "
                          f"CTranslate2 cannot express {name}'s {what}")


def sinusoids(positions, depth):
    """The position signal layers/position.py adds at positions 0..positions-1 [P, depth]."""
    import tensorflow as tf

    from tfnmt.layers.position import SinusoidalPosition
    return SinusoidalPosition()(tf.zeros([1, positions, depth]))[0].numpy()


def _linear(spec, dense):
    spec.weight = np.ascontiguousarray(dense.kernel.numpy().T)  # Keras [in, out] -> [out, in]
    spec.bias = dense.bias.numpy()


def _fused(spec, denses):
    spec.weight = np.concatenate([d.kernel.numpy().T for d in denses], axis=0)
    spec.bias = np.concatenate([d.bias.numpy() for d in denses], axis=0)


def _norm(spec, norm):
    spec.gamma = norm.gamma.numpy()
    spec.beta = norm.beta.numpy()


def _attention(spec, attention, norm, self_attention):
    q, k, v = attention.query_dense, attention.key_dense, attention.value_dense
    if self_attention:
        _fused(spec.linear[0], [q, k, v])
    else:
        _linear(spec.linear[0], q)
        _fused(spec.linear[1], [k, v])
    _linear(spec.linear[-1], attention.output_dense)
    _norm(spec.layer_norm, norm)


def _ffn(spec, ffn, norm):
    _linear(spec.linear_0, ffn.inner)
    _linear(spec.linear_1, ffn.outer)
    _norm(spec.layer_norm, norm)


def _specs():
    try:
        from ctranslate2.specs import common_spec, transformer_spec
    except ImportError:
        raise ConfigError("--format=ctranslate2 needs the ctranslate2 package: "
                          "pip install -e \".[ctranslate2]\"") from None
    return common_spec, transformer_spec


def model_spec(model, source_vocab, target_vocab, positions):
    """The ctranslate2.specs.TransformerSpec of a built `transformer` model, validated;
    `positions`: how many positions the encoder and decoder may read."""
    common_spec, transformer_spec = _specs()
    check_model(model.registry_name)
    h = model.hparams
    encoder, decoder = model.encoder, model.decoder
    spec = transformer_spec.TransformerSpec.from_config(
        (h["encoder_layers"], h["decoder_layers"]), h["num_heads"], pre_norm=h["pre_norm"],
        activation=common_spec.Activation.RELU)
    table = sinusoids(positions, h["d_model"])  # one array: CTranslate2 stores it once

    spec.encoder.embeddings[0].weight = encoder.embedding.embeddings.numpy()
    spec.encoder.scale_embeddings = True
    spec.encoder.position_encodings.encodings = table
    for layer_spec, layer in zip(spec.encoder.layer, encoder.layers):
        _attention(layer_spec.self_attention, layer.self_attention, layer.attention_norm, True)
        _ffn(layer_spec.ffn, layer.ffn, layer.ffn_norm)
    if encoder.norm is not None:
        _norm(spec.encoder.layer_norm, encoder.norm)

    embedding = decoder.embedding.embeddings.numpy()
    if decoder.embedding is encoder.embedding:
        embedding = spec.encoder.embeddings[0].weight
    spec.decoder.embeddings.weight = embedding
    spec.decoder.scale_embeddings = True
    spec.decoder.position_encodings.encodings = table
    for layer_spec, layer in zip(spec.decoder.layer, decoder.layers):
        _attention(layer_spec.self_attention, layer.self_attention, layer.norms[0], True)
        _attention(layer_spec.attention, layer.cross_attention, layer.norms[1], False)
        _ffn(layer_spec.ffn, layer.ffn, layer.norms[2])
    if decoder.norm is not None:
        _norm(spec.decoder.layer_norm, decoder.norm)
    if decoder.output_projection is None:
        spec.decoder.projection.weight = embedding
        bias = np.zeros([embedding.shape[0]], np.float32)
    else:
        _linear(spec.decoder.projection, decoder.output_projection)
        bias = spec.decoder.projection.bias.copy()
    bias[[PAD_ID, BOS_ID]] = NEG_INF
    spec.decoder.projection.bias = bias

    for register, vocab in ((spec.register_source_vocabulary, source_vocab),
                            (spec.register_target_vocabulary, target_vocab)):
        register(vocab.pieces())
    target = target_vocab.pieces()
    spec.config.unk_token = target[UNK_ID]
    spec.config.bos_token = spec.config.decoder_start_token = target[BOS_ID]
    spec.config.eos_token = target[EOS_ID]
    spec.config.add_source_bos = False
    spec.config.add_source_eos = True
    spec.config.layer_norm_epsilon = 1e-6
    spec.validate()
    spec.optimize(quantization=None)  # aliases the weights stored twice (tied, shared, table)
    return spec


def vocab_files(source_vocab, target_vocab):
    """{file name: SentencePiece model} as a model directory names them (data/vocab.py)."""
    if source_vocab.proto == target_vocab.proto:
        return {JOINT_FILE: source_vocab.proto}
    return {SOURCE_FILE: source_vocab.proto, TARGET_FILE: target_vocab.proto}


def save(model, source_vocab, target_vocab, options, directory):
    """Writes the CTranslate2 model and the SentencePiece model(s) into `directory` (new).
    Positions up to what `options` (DecodingOptions) let tfnmt read and write."""
    spec = model_spec(model, source_vocab, target_vocab,
                      max(options.max_input_length + 1, options.max_decode_length))
    os.makedirs(directory)
    spec.save(directory)
    for name, proto in vocab_files(source_vocab, target_vocab).items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(proto)


def export(model, source_vocab, target_vocab, options, export_dir, name, version=0):
    """Writes export_dir/name/version/{model.bin, config.json, *_vocabulary.json, the
    SentencePiece model(s)}; returns that path."""
    check_model(model.registry_name)
    return write_version(export_dir, name, version, lambda staging: save(
        model, source_vocab, target_vocab, options, staging))
