"""The convolutional encoders of DenseNMT (Shen et al. 2018, eq. 6) and ConvS2S (Gehring et al.
2017): learned embeddings and positions, then a dense or a residual stack of GLU convolutions.

    encode(source [B, S], training) -> EncoderOutput(
        mask [B, S],
        outputs [B, S, W]       the stack's output (a dense stack: its features since the last
                                summary, concatenated),
        extras={
        "embedded": [B, S, e]   the embedded source (ConvS2S's attention values add it),
        "base": [B, S, e]       h^0 of the layers since the last summary (the embedded source,
                                or that summary): what DenseAtt attends to besides them,
        "layers": [[B, S, w]]   the layers' outputs since the last summary})

A dense layer reads the concatenation of every earlier output since the last summary layer
(`--sumlen`), a residual one (ConvS2S) its input plus its output, scaled by sqrt(0.5).
"""

import tensorflow as tf

from tfnmt.data.vocab import PAD_ID
from tfnmt.layers.conv_blocks import (HALF, HPARAMS, STACKS, GLUConv,
                                      LearnedEmbedder, SummaryLayer, summary_after)
from tfnmt.layers.hparams import ENCODER_LAYERS, HParam
from tfnmt.layers.part import Encoder, EncoderOutput, register_encoder
from tfnmt.layers.weight_norm import WeightNormDense


def memory_layers(h):
    """How many encoder layers DenseAtt attends to: those since the last summary."""
    if h["encoder"] != "dense":
        return h["encoder_layers"]
    return h["encoder_layers"] - max(summary_after(h["encoder_layers"], h["sumlen"]), default=0)


@register_encoder("densenmt")
class ConvEncoder(Encoder):
    HPARAMS = {"encoder_layers": ENCODER_LAYERS.but(default=4),
               "encoder": HParam("dense", "encoder stack", choices=STACKS), **HPARAMS}
    EXTRAS = frozenset({"embedded", "base", "layers"})

    def __init__(self, hparams, vocab_size, **kwargs):
        super().__init__(hparams, **kwargs)
        h = self.hparams
        layers, kernel, dropout = h["encoder_layers"], h["kernel_size"], h["dropout"]
        # DenseAtt-2 attends to this many layers (a decoder reads it).
        self.memory_layers = memory_layers(h)
        self.output_width = self.summary_width = (
            h["embed_dim"] + self.memory_layers * h["growth_rate"] if h["encoder"] == "dense"
            else h["residual_dim"])
        self.embedder = LearnedEmbedder(h, "source", vocab_size, name="source_embedder")
        self.dense = h["encoder"] == "dense"
        if self.dense:
            self.convs = [GLUConv(h["growth_rate"], kernel, dropout_in=dropout,
                                  name=f"encoder_conv_{i}") for i in range(layers)]
            self.summaries = {i: SummaryLayer(h["embed_dim"], kernel, dropout_in=dropout,
                                              name=f"encoder_summary_{i}")
                              for i in sorted(summary_after(layers, h["sumlen"]))}
            self.input_projection = None
        else:
            self.input_projection = WeightNormDense(h["residual_dim"], dropout_in=dropout,
                                                    name="encoder_in")
            self.convs = [GLUConv(h["residual_dim"], kernel, dropout_in=dropout,
                                  name=f"encoder_conv_{i}") for i in range(layers)]
            self.summaries = {}
        self.dropout = self.embedder.dropout

    def encode(self, source, training=False):
        mask = tf.not_equal(source, PAD_ID)
        keep = tf.cast(mask, self.embedder.embedding.compute_dtype)[:, :, None]
        embedded = self.embedder.embed(source, training=training)

        def conv(layer, x):
            # Padding is zeroed before every convolution so it never leaks into real positions.
            return layer(self.dropout(x, training=training) * keep)

        if self.dense:
            features = [embedded]
            for i, layer in enumerate(self.convs, start=1):
                features.append(conv(layer, tf.concat(features, -1)))
                if i in self.summaries:
                    features = [conv(self.summaries[i], tf.concat(features, -1))]
            base, layers = features[0], features[1:]
            top = tf.concat(features, -1)
        else:
            x = self.input_projection(embedded)
            base, layers = embedded, []
            for layer in self.convs:
                x = (conv(layer, x) + x) * HALF
                layers.append(x)
            top = x
        return EncoderOutput(outputs=top, mask=mask,
                             extras={"embedded": embedded, "base": base, "layers": layers})
