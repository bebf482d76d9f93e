"""Building blocks shared by the convolutional models (ConvS2S and DenseNMT, paper 000)."""

import math

import keras
import tensorflow as tf

from tfnmt.layers.dense_attention import attend
from tfnmt.layers.weight_norm import WeightNormConv1D, WeightNormDense

HALF = math.sqrt(0.5)


def glu(x):
    a, b = tf.split(x, 2, axis=-1)
    return a * tf.sigmoid(b)


@keras.saving.register_keras_serializable(package="tfnmt")
class GLUConv(keras.layers.Layer):
    """GLU(Conv_k(x) -> 2 * width): [B, T, in] -> [B, T, width]; causal convolutions can `step`."""

    def __init__(self, width, kernel_size, causal=False, dropout_in=0.0, **kwargs):
        super().__init__(**kwargs)
        self.width = width
        self.kernel_size = kernel_size
        self.causal = causal
        self.dropout_in = dropout_in
        self.conv = WeightNormConv1D(2 * width, kernel_size, causal=causal, dropout_in=dropout_in,
                                     name="conv")

    def call(self, x):
        return glu(self.conv(x))

    def step(self, window):
        """window [N, k, in] -> [N, width] for the window's last position."""
        return glu(self.conv.step(window))

    def get_config(self):
        return dict(super().get_config(), width=self.width, kernel_size=self.kernel_size,
                    causal=self.causal, dropout_in=self.dropout_in)


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

    def step(self, window):
        return (super().step(window) + self.linear(window[:, -1])) * HALF


@keras.saving.register_keras_serializable(package="tfnmt")
class MultiStepAttention(keras.layers.Layer):
    """ConvS2S's per-layer attention (Gehring et al. 2017; fig. 3a of paper 000).

    q = (W x + g) * sqrt(0.5) with g the target embedding, a = softmax(q z^T), c = a (z + e).
    Following the spec sheet the context is not rescaled by sqrt(source length) as fairseq does.
    """

    def __init__(self, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim = embed_dim
        self.query = WeightNormDense(embed_dim, name="query")

    def call(self, x, g, memory):
        return attend((self.query(x) + g) * HALF, memory["keys"], memory["values"], memory["mask"])

    def get_config(self):
        return dict(super().get_config(), embed_dim=self.embed_dim)
