"""Gated pooling (the convolutional-encoder report's proposed extension, after Meng et al. 2015):
instead of taking the max (or the mean) of the elements of a pooling window, the window's
elements are mixed with learned weights.

For a window of elements x_1..x_p (feature vectors of C channels), per channel c:

    w_{i,c} = softmax_i(a_c * x_{i,c} + b_{i,c})        out_c = sum_i w_{i,c} x_{i,c}

a (one scale per channel) and b (one bias per window position and channel) are learned. The
report says only "learn gating weights for the pooling operation, so that instead of a max
operation, the model selects the weighting of the contributions of the elements being pooled"
and "decide which features to keep or discard"; this per-channel reading contains both pooling
operations it replaces: a = 0, b = 0 (the initial values) is average pooling, a -> +inf is max
pooling, and b lets a channel prefer a position of the window. It costs (p + 1) * C parameters.
"""

import keras
import tensorflow as tf

from tfnmt.layers.configured import Configured


@keras.saving.register_keras_serializable(package="tfnmt")
class GatedPooling(Configured, keras.layers.Layer):
    """Non-overlapping windows (stride = size, trailing elements that fill no window dropped, as
    in "valid" max pooling) over [B, T, C] (pool_size (p,)) or [B, H, W, C] (pool_size (p, q))."""

    def __init__(self, pool_size=(2,), **kwargs):
        super().__init__(**kwargs)
        self.set_config(pool_size=tuple(int(p) for p in pool_size))
        if len(self.pool_size) not in (1, 2) or min(self.pool_size) < 1:
            raise ValueError(f"pool_size must be 1 or 2 positive ints, got {pool_size}")

    def build(self, input_shape):
        channels = input_shape[-1]
        window = 1
        for p in self.pool_size:
            window *= p
        self.scale = self.add_weight(name="scale", shape=(channels,), initializer="zeros")
        self.position_bias = self.add_weight(name="position_bias", shape=(window, channels),
                                             initializer="zeros")

    def _windows(self, x):
        """[B, T, C] -> [B, T/p, p, C]; [B, H, W, C] -> [B, H/p, W/q, p*q, C]."""
        channels = x.shape[-1]
        if len(self.pool_size) == 1:
            (p,) = self.pool_size
            t = tf.shape(x)[1] // p
            return tf.reshape(x[:, : t * p], [tf.shape(x)[0], t, p, channels])
        p, q = self.pool_size
        h, w = tf.shape(x)[1] // p, tf.shape(x)[2] // q
        x = tf.reshape(x[:, : h * p, : w * q], [tf.shape(x)[0], h, p, w, q, channels])
        x = tf.transpose(x, [0, 1, 3, 2, 4, 5])
        return tf.reshape(x, [tf.shape(x)[0], h, w, p * q, channels])

    def call(self, x):
        windows = self._windows(x)
        scores = windows * tf.cast(self.scale, x.dtype) + tf.cast(self.position_bias, x.dtype)
        weights = tf.nn.softmax(scores, axis=-2)
        return tf.reduce_sum(weights * windows, axis=-2)

    def compute_output_shape(self, input_shape):
        spatial = [None if d is None else d // p for d, p in zip(input_shape[1:-1], self.pool_size)]
        return (input_shape[0], *spatial, input_shape[-1])
