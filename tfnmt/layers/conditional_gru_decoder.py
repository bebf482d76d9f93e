"""The decoder of Cho et al. 2014 (RNN encoder-decoder, appendix A.1.2): a GRU conditioned on one
fixed-length sentence encoding c at every step, with a maxout deep output.

    s_0 = tanh(V c)
    z_t = σ(W_z y_{t-1} + U_z s_{t-1} + C_z c)
    r_t = σ(W_r y_{t-1} + U_r s_{t-1} + C_r c)
    s~_t = tanh(W y_{t-1} + r_t ⊙ (U s_{t-1} + C c))      form "appendix"
    s~_t = tanh(W y_{t-1} + C c + U (r_t ⊙ s_{t-1}))      form "groundhog"
    s_t = z_t ⊙ s_{t-1} + (1 - z_t) ⊙ s~_t
    o_t = maxout_2(O [s_t; y_{t-1}; c] + b_o)   (maxout_dim units, each the max of 2 inputs)

c enters both gates and the candidate. "appendix" is the candidate as the appendix prints it:
the reset gate applies to the recurrent AND the context term after their matrices.
"groundhog" is what the GroundHog code of Cho et al. computes, which paper 004 ran: c joins
the input and the reset gate applies to the state before U, as in the encoder's GRU (eq. 8 of
the main text). Both have the same weights. The gates and the candidate carry a bias (the
paper writes none). The caller turns o_t into logits.

`call` (teacher forcing over [B, T]) and `step` (one position) run the same cell, so incremental
decoding gives the teacher-forced outputs.
"""

import keras
import tensorflow as tf

from tfnmt.layers.configured import Configured

FORMS = ("groundhog", "appendix")


@keras.saving.register_keras_serializable(package="tfnmt")
class ConditionalGRUCell(Configured, keras.layers.Layer):
    """One step of the decoder's GRU: ([y; c] [N, E + C], [s [N, units]]) -> (s', [s']).
    The input is y and c concatenated (`embed_dim` tells where c starts), so the cell runs in
    `keras.layers.RNN` over a sequence of [y_{t-1}; c]."""

    def __init__(self, units, embed_dim, form, **kwargs):
        super().__init__(**kwargs)
        if form not in FORMS:
            raise ValueError(f"unknown form {form!r}; choose one of {', '.join(FORMS)}")
        self.set_config(units=units, embed_dim=embed_dim, form=form)
        self.state_size = units
        self.output_size = units

    def build(self, input_shape):
        u, e = self.units, self.embed_dim
        self.kernel = self.add_weight(name="kernel", shape=(e, 3 * u), initializer="glorot_uniform")
        self.context_kernel = self.add_weight(name="context_kernel", shape=(input_shape[-1] - e, 3 * u),
                                              initializer="glorot_uniform")
        self.recurrent_kernel = self.add_weight(name="recurrent_kernel", shape=(u, 3 * u),
                                                initializer="orthogonal")
        self.bias = self.add_weight(name="bias", shape=(3 * u,), initializer="zeros")

    def call(self, inputs, states, training=False):
        s = states[0] if isinstance(states, (list, tuple)) else states
        u = self.units
        y, c = inputs[:, : self.embed_dim], inputs[:, self.embed_dim:]
        from_y = tf.matmul(y, self.kernel) + self.bias
        from_c = tf.matmul(c, self.context_kernel)
        from_s = tf.matmul(s, self.recurrent_kernel[:, : 2 * u])
        z, r = tf.split(tf.sigmoid(from_y[:, : 2 * u] + from_c[:, : 2 * u] + from_s), 2, axis=-1)
        U = self.recurrent_kernel[:, 2 * u:]
        if self.form == "groundhog":
            candidate = tf.tanh(from_y[:, 2 * u:] + from_c[:, 2 * u:] + tf.matmul(r * s, U))
        else:
            candidate = tf.tanh(from_y[:, 2 * u:] + r * (tf.matmul(s, U) + from_c[:, 2 * u:]))
        new_s = z * s + (1.0 - z) * candidate
        return new_s, [new_s]


@keras.saving.register_keras_serializable(package="tfnmt")
class ConditionalGRUDecoder(Configured, keras.layers.Layer):
    """(y [B, T, E] embedded previous words, c [B, C]) -> o [B, T, maxout_dim]."""

    def __init__(self, units, maxout_dim, form, **kwargs):
        super().__init__(**kwargs)
        self.set_config(units=units, maxout_dim=maxout_dim, form=form)
        self.init = keras.layers.Dense(units, activation="tanh", name="init")
        self.readout = keras.layers.Dense(2 * maxout_dim, name="readout")

    def build(self, input_shape):
        # Built here rather than on first call because beam search steps the cell inside a
        # tf.while_loop, where no variable may be created.
        (_, _, embed_dim), (_, encoding_dim) = input_shape
        self.cell = ConditionalGRUCell(self.units, embed_dim, self.form, name="gru_cell")
        self.rnn = keras.layers.RNN(self.cell, return_sequences=True, name="gru")
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
