"""The Transformer (Vaswani et al. 2017): baseline, and backbone of the deep-representation and
CTC models. Its encoder and decoder are parts (tfnmt/encoders/transformer.py,
tfnmt/decoders/transformer.py)."""

from tfnmt.decoders.transformer import TransformerDecoder
from tfnmt.encoders.transformer import TransformerEncoder
from tfnmt.errors import ConfigError
from tfnmt.layers.hparams import HParam
from tfnmt.models.base import EncoderDecoder
from tfnmt.models.registry import register

SHARE_EMBEDDINGS = HParam(False, "one embedding matrix for source and target (joint vocabulary)")


def check_shared_embeddings(h, source_vocab_size, target_vocab_size):
    if h["share_embeddings"] and source_vocab_size != target_vocab_size:
        raise ConfigError("--share_embeddings needs a joint vocabulary (tfnmt vocab --joint_vocab=true)")


def check_hparams(h, source_vocab_size, target_vocab_size):
    """The settings every model built from Transformer layers must satisfy."""
    check_shared_embeddings(h, source_vocab_size, target_vocab_size)
    check_heads(h)


def check_heads(h):
    if h["d_model"] % h["num_heads"]:
        raise ConfigError(f"--d_model={h['d_model']} is not divisible by --num_heads={h['num_heads']}")


@register("transformer")
class Transformer(EncoderDecoder):
    HPARAMS = {**TransformerEncoder.HPARAMS, **TransformerDecoder.HPARAMS,
               "share_embeddings": SHARE_EMBEDDINGS}
    # Subclasses (deep_transformer) swap in richer stacks whose plain weights keep the paths.
    ENCODER, DECODER = TransformerEncoder, TransformerDecoder

    def __init__(self, source_vocab_size, target_vocab_size, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, **hparams)
        h = self.hparams
        check_hparams(h, source_vocab_size, target_vocab_size)
        self.encoder = self.ENCODER(h, source_vocab_size, name="encoder")
        self.decoder = self.DECODER(h, target_vocab_size, encoder=self.encoder, name="decoder",
                                    embedding=self.encoder.embedding if h["share_embeddings"] else None)
