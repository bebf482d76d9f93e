"""The Transformer (Vaswani et al. 2017): baseline, and backbone of the deep-representation and
CTC models. Its encoder and decoder are parts (tfnmt/encoders/transformer.py,
tfnmt/decoders/transformer.py)."""

from tfnmt.decoders.transformer import TransformerDecoder
from tfnmt.encoders.transformer import TransformerEncoder
from tfnmt.errors import ConfigError
from tfnmt.models.base import EncoderDecoder
from tfnmt.models.registry import register


def check_hparams(h, source_vocab_size, target_vocab_size):
    """The settings every model built from Transformer layers must satisfy."""
    if h["share_embeddings"] and source_vocab_size != target_vocab_size:
        raise ConfigError("--share_embeddings needs a joint vocabulary (tfnmt vocab --joint_vocab=true)")
    if h["d_model"] % h["num_heads"]:
        raise ConfigError(f"--d_model={h['d_model']} is not divisible by --num_heads={h['num_heads']}")


@register("transformer")
class Transformer(EncoderDecoder):
    HPARAMS = {
        "encoder_layers": (6, "number of encoder layers", ">= 1"),
        "decoder_layers": (6, "number of decoder layers", ">= 1"),
        "d_model": (512, "model width (embeddings and hidden states)", ">= 1"),
        "ffn_dim": (2048, "inner width of the feed-forward blocks", ">= 1"),
        "num_heads": (8, "attention heads", ">= 1"),
        "dropout": (0.1, "dropout on embeddings and sub-layer outputs", "[0, 1)"),
        "attention_dropout": (0.0, "dropout on attention weights", "[0, 1)"),
        "ffn_dropout": (0.0, "dropout inside the feed-forward blocks", "[0, 1)"),
        "pre_norm": (False, "layer norm before each sub-layer (pre-norm) instead of after"),
        "share_embeddings": (False, "one embedding matrix for source and target (joint vocabulary)"),
        "tie_output": (True, "the output projection reuses the target embedding matrix"),
    }
    # Subclasses (deep_transformer) swap in richer stacks whose plain weights keep the paths.
    ENCODER, DECODER = TransformerEncoder, TransformerDecoder

    def __init__(self, source_vocab_size, target_vocab_size, label_smoothing=0.1, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, label_smoothing, **hparams)
        h = self.hparams
        check_hparams(h, source_vocab_size, target_vocab_size)
        self.encoder = self.ENCODER(h, source_vocab_size, name="encoder")
        self.decoder = self.DECODER(h, target_vocab_size, name="decoder",
                                    embedding=self.encoder.embedding if h["share_embeddings"] else None)
