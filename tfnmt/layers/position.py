"""Sinusoidal position encodings (Vaswani et al. 2017)."""

import math

import keras
import tensorflow as tf

from tfnmt.layers.configured import Configured


@keras.saving.register_keras_serializable(package="tfnmt")
class SinusoidalPosition(Configured, keras.layers.Layer):
    """Adds sin/cos position signals to [B, T, d] inputs, starting at position `offset`.

    `offset` lets incremental decoding add the signal of step t to a one-step input.
    """

    def __init__(self, max_wavelength=10000.0, **kwargs):
        super().__init__(**kwargs)
        self.set_config(max_wavelength=max_wavelength)

    def call(self, inputs, offset=0):
        length = tf.shape(inputs)[1]
        depth = inputs.shape[-1]
        positions = tf.cast(tf.range(length) + offset, tf.float32)
        half = depth // 2
        scales = tf.exp(tf.range(half, dtype=tf.float32) * -(math.log(self.max_wavelength) / max(half - 1, 1)))
        angles = positions[:, None] * scales[None, :]
        signal = tf.concat([tf.sin(angles), tf.cos(angles)], axis=1)
        if depth % 2:
            signal = tf.pad(signal, [[0, 0], [0, 1]])
        return inputs + tf.cast(signal, inputs.dtype)[None]
