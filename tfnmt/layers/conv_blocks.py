"""Building blocks shared by the convolutional models (ConvS2S and DenseNMT, paper 000)."""

import math

import keras
import tensorflow as tf

from tfnmt.layers.configured import Configured
from tfnmt.layers.dense_attention import attend
from tfnmt.layers.hparams import DROPOUT, EMBED_DIM, HParam
from tfnmt.layers.part import Part
from tfnmt.layers.weight_norm import WeightNormConv1D, WeightNormDense

HALF = math.sqrt(0.5)


def glu(x):
    a, b = tf.split(x, 2, axis=-1)
    return a * tf.sigmoid(b)


@keras.saving.register_keras_serializable(package="tfnmt")
class GLUConv(Configured, keras.layers.Layer):
    """GLU(Conv_k(x) -> 2 * width): [B, T, in] -> [B, T, width]; causal convolutions can `step`."""

    def __init__(self, width, kernel_size, causal=False, dropout_in=0.0, **kwargs):
        super().__init__(**kwargs)
        self.set_config(width=width, kernel_size=kernel_size, causal=causal, dropout_in=dropout_in)
        self.conv = WeightNormConv1D(2 * width, kernel_size, causal=causal, dropout_in=dropout_in,
                                     name="conv")

    def call(self, x):
        return glu(self.conv(x))

    def step(self, recent):
        """recent [N, k, in], the last k inputs -> [N, width] for the newest position."""
        return glu(self.conv.step(recent))


@keras.saving.register_keras_serializable(package="tfnmt")
class SummaryLayer(GLUConv):
    """DenseNMT's summary layer (sec. 3.3, as in the authors' released code):
    sqrt(0.5) * (GLU(Conv(x) -> 2w) + Linear(x -> w)). It folds the features a dense block has
    accumulated back to width w, and later layers look back only as far as it."""

    def __init__(self, width, kernel_size, causal=False, dropout_in=0.0, **kwargs):
        super().__init__(width, kernel_size, causal=causal, dropout_in=dropout_in, **kwargs)
        self.linear = WeightNormDense(width, name="linear")

    def call(self, x):
        return (super().call(x) + self.linear(x)) * HALF

    def step(self, recent):
        return (super().step(recent) + self.linear(recent[:, -1])) * HALF


@keras.saving.register_keras_serializable(package="tfnmt")
class MultiStepAttention(Configured, keras.layers.Layer):
    """ConvS2S's per-layer attention (Gehring et al. 2017; fig. 3a of paper 000).

    q = (W x + g) * sqrt(0.5) with g the target embedding, a = softmax(q z^T), c = a (z + e).
    With `scale_context`, c is multiplied by sqrt(S), S the sentence's source length without
    padding (Gehring et al. sec. 3.4, fairseq's s * sqrt(1/s)): a weighted average of S vectors
    has about 1/S of their variance when the weights are uniform.
    """

    def __init__(self, embed_dim, scale_context, **kwargs):
        super().__init__(**kwargs)
        self.set_config(embed_dim=embed_dim, scale_context=bool(scale_context))
        self.query = WeightNormDense(embed_dim, name="query")

    def call(self, x, g, memory):
        scale = None
        if self.scale_context:
            scale = tf.sqrt(tf.reduce_sum(tf.cast(memory["mask"], memory["values"].dtype), -1))
        return attend((self.query(x) + g) * HALF, memory["keys"], memory["values"],
                      memory["mask"], self, scale)


# What the DenseNMT and ConvS2S encoders and decoders both read.
HPARAMS = {
    "embed_dim": EMBED_DIM.but(default=256, help="model embedding width (h^0, z^0; the "
                               "multi-step attention width)"),
    "table_dim": HParam(0, "width of the source/target/softmax embedding tables, projected to "
                           "embed_dim (0 = embed_dim)", bounds=">= 0"),
    "residual_dim": HParam(256, "width of residual layers", bounds=">= 1"),
    "growth_rate": HParam(128, "output width of each dense layer", bounds=">= 1"),
    "sumlen": HParam(0, "a summary layer after every sumlen-1 layers (0 = none)", bounds=">= 0"),
    "kernel_size": HParam(3, "convolution kernel width", bounds=">= 1"),
    "dropout": DROPOUT.but(default=0.2, help="dropout on embeddings and layer inputs"),
    "max_positions": HParam(1024, "learned positions; later positions reuse the last one",
                            bounds=">= 1"),
    "narrow_positions": HParam(True, "position tables --table_dim wide, each with its own linear "
                                     "map to embed_dim, as the DenseNMT authors' released code; "
                                     "false = embed_dim wide"),
}
STACKS = ("dense", "residual")


def scale_gradient(x, factor):
    """x in the forward pass (exactly: x + 0), its gradient times `factor` in the backward one
    (fairseq's GradMultiply); plain ops, so exports and XLA see an identity."""
    held = tf.stop_gradient(x)
    return held + tf.cast(factor, x.dtype) * (x - held)


def summary_after(layers, sumlen):
    """1-based indices of the layers of a dense stack followed by a summary layer (every
    sumlen-1 layers, never after the last one)."""
    if sumlen < 2:
        return set()
    return {i for i in range(sumlen - 1, layers, sumlen - 1)}


class LearnedEmbedder(Part):
    """Token embeddings (a `table_dim`-wide table projected to `embed_dim` when narrower) plus
    learned positions (positions past `max_positions` reuse the last one), then dropout. With
    `narrow_positions` the position table is `table_dim` wide too, with its own projection.
    `side` names its layers: {side}_embedding, {side}_embedding_projection,
    {side}_position_embedding, {side}_position_projection. `embedding`: another side's table
    layer, to share it (--share_embeddings)."""

    def __init__(self, hparams, side, vocab_size, embedding=None, **kwargs):
        super().__init__(hparams, **kwargs)
        h = self.hparams
        embed_dim = h["embed_dim"]
        self.table_dim = h["table_dim"] or embed_dim
        self.max_positions = h["max_positions"]
        init = keras.initializers.RandomNormal(stddev=0.1)
        self.embedding = embedding or keras.layers.Embedding(
            vocab_size, self.table_dim, name=f"{side}_embedding", embeddings_initializer=init)
        narrow = h["narrow_positions"] and self.table_dim != embed_dim
        self.position_embedding = keras.layers.Embedding(
            self.max_positions, self.table_dim if narrow else embed_dim,
            name=f"{side}_position_embedding", embeddings_initializer=init)
        self.projection = (None if self.table_dim == embed_dim else keras.layers.Dense(
            embed_dim, use_bias=False, name=f"{side}_embedding_projection"))
        self.position_projection = (keras.layers.Dense(
            embed_dim, use_bias=False, name=f"{side}_position_projection") if narrow else None)
        self.dropout = keras.layers.Dropout(h["dropout"])

    def embed(self, ids, offset=0, training=False):
        x = self.embedding(ids)
        if self.projection is not None:
            x = self.projection(x)
        index = tf.minimum(tf.range(tf.shape(ids)[1]) + offset, self.max_positions - 1)
        positions = self.position_embedding(index)
        if self.position_projection is not None:
            positions = self.position_projection(positions)
        return self.dropout(x + positions[None], training=training)
