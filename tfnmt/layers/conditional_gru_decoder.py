"""The decoder of Cho et al. 2014 (RNN encoder-decoder): a GRU conditioned on one fixed-length
sentence encoding c at every step, with a maxout deep output.

    s_0 = tanh(V c)
    s_t = GRU([y_{t-1}; c], s_{t-1})           (c enters the update gate, the reset gate and the
                                                candidate, as in Cho et al.'s equations)
    o_t = maxout_2(O [s_t; y_{t-1}; c] + b_o)   (maxout_dim units, each the max of 2 inputs)

The caller turns o_t into logits. The GRU is Cho et al.'s: the reset gate applies to the state
before the recurrent matrix (`reset_after=False`), h = z h_{t-1} + (1 - z) h~.

`call` (teacher forcing over [B, T]) and `step` (one position) run the same cell, so incremental
decoding gives the teacher-forced outputs.
"""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="tfnmt")
class ConditionalGRUDecoder(keras.layers.Layer):
    """(y [B, T, E] embedded previous words, c [B, C]) -> o [B, T, maxout_dim]."""

    def __init__(self, units, maxout_dim, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.maxout_dim = maxout_dim
        self.init = keras.layers.Dense(units, activation="tanh", name="init")
        self.cell = keras.layers.GRUCell(units, reset_after=False, name="gru_cell")
        self.rnn = keras.layers.RNN(self.cell, return_sequences=True, name="gru")
        self.readout = keras.layers.Dense(2 * maxout_dim, name="readout")

    def build(self, input_shape):
        # Built here rather than on first call because beam search steps the cell inside a
        # tf.while_loop, where no variable may be created.
        (_, _, embed_dim), (_, encoding_dim) = input_shape
        self.init.build((None, encoding_dim))
        self.cell.build((None, embed_dim + encoding_dim))
        self.readout.build((None, self.units + embed_dim + encoding_dim))

    def initial_state(self, encoding):
        return self.init(encoding)

    def _maxout(self, features):
        pieces = self.readout(features)
        shape = tf.concat([tf.shape(pieces)[:-1], [self.maxout_dim, 2]], axis=0)
        return tf.reduce_max(tf.reshape(pieces, shape), axis=-1)

    def call(self, inputs, training=False):
        y, encoding = inputs
        c = tf.broadcast_to(encoding[:, None], [tf.shape(y)[0], tf.shape(y)[1], encoding.shape[-1]])
        states = self.rnn(tf.concat([y, c], axis=-1), initial_state=[self.initial_state(encoding)],
                          training=training)
        return self._maxout(tf.concat([states, y, c], axis=-1))

    def step(self, y, encoding, state):
        """y [N, E], c [N, C], s_{t-1} [N, units] -> (o_t [N, maxout_dim], s_t)."""
        new_state, _ = self.cell(tf.concat([y, encoding], axis=-1), [state])
        return self._maxout(tf.concat([new_state, y, encoding], axis=-1)), new_state

    def get_config(self):
        return dict(super().get_config(), units=self.units, maxout_dim=self.maxout_dim)
