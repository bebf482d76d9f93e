"""Convolutional sequence to sequence learning (Gehring et al. 2017): the residual baseline of
the DenseNMT paper (000, "BASE-4L/8L"), after fairseq's `fconv`.

Encoder: embeddings + learned positions -> linear to the hidden width -> residual GLU
convolutions scaled by sqrt(0.5) -> linear back to the embedding width (z); attention values are
z + e. Decoder: the same with causal convolutions, each layer followed by attention whose query
is the layer's output projected to the embedding width plus the target embedding g.

It is DenseNMT with every switch on "residual" and "multistep", so the baseline and the dense
models of the paper's tables share one implementation; `--table_dim` gives Table 1's
small-embedding BASE rows.
"""

from tfnmt.models.densenmt import DenseNMT
from tfnmt.models.registry import register

_SHARED = ("encoder_layers", "decoder_layers", "embed_dim", "table_dim", "residual_dim",
           "kernel_size", "dropout", "max_positions", "narrow_positions", "scale_context",
           "scale_encoder_gradients", "scale_values", "share_embeddings", "tie_output")


@register("convs2s")
class ConvS2S(DenseNMT):
    HPARAMS = {name: DenseNMT.HPARAMS[name] for name in _SHARED}
    FIXED = {"encoder": "residual", "decoder": "residual", "attention": "multistep",
             "growth_rate": 0, "attention_dim": 0, "sumlen": 0}
