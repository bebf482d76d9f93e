"""State splitting of Libovický and Helcl (2018), eq. 1: each state becomes k states.

    s_{c·k + b} = (W_spl h_c + b_spl)[b·d : (b+1)·d]        c < S, b < k

A [B, S, d] sequence becomes [B, k·S, d]; the k states of source position c are consecutive, so
its padding mask is that of the source with every entry repeated k times.
"""

import keras
import tensorflow as tf

from tfnmt.layers.configured import Configured


@keras.saving.register_keras_serializable(package="tfnmt")
class StateSplitter(Configured, keras.layers.Layer):
    """[B, S, d] states and [B, S] mask -> [B, k·S, d] states and [B, k·S] mask.

    `width` is the output state width (default: the input's).
    """

    def __init__(self, split_factor, width=None, **kwargs):
        super().__init__(**kwargs)
        if split_factor < 1:
            raise ValueError(f"split factor must be at least 1, not {split_factor}")
        self.set_config(split_factor=split_factor, width=width)

    def build(self, input_shape):
        self.output_width = self.width or input_shape[-1]
        self.projection = keras.layers.Dense(self.split_factor * self.output_width, name="projection")
        self.projection.build(input_shape)

    def call(self, states, mask):
        projected = self.projection(states)
        batch, length = tf.shape(projected)[0], tf.shape(projected)[1]
        split = tf.reshape(projected, [batch, length * self.split_factor, self.output_width])
        return split, tf.repeat(mask, self.split_factor, axis=1)
