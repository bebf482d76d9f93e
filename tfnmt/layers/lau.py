"""The Linear Associative Unit (DeepLAU, paper 001, eq. 6-8), a recurrent cell whose state has a
linear path from its input:

    r = σ(W_xr x + W_hr h + b_r)      z = σ(W_xz x + W_hz h + b_z)      g = σ(W_xg x + W_hg h + b_g)
    h~ = tanh((1 - r) ⊙ (W_xh x) + r ⊙ (W_hh h) + b_h)
    h' = ((1 - z) ⊙ h + z ⊙ h~) ⊙ (1 - g) + g ⊙ (W_x x)

The paper's equations carry no biases; the gates and the candidate get one each (zero at start),
as is usual for GRU-like cells. The linear path W_x x has none, so with g = 1 the state is
exactly W_x x.
"""

import keras
import tensorflow as tf

from tfnmt.layers.configured import Configured
from tfnmt.layers.hparams import DROPOUT, EMBED_DIM, HIDDEN_DIM, HParam


@keras.saving.register_keras_serializable(package="tfnmt")
class LAUCell(Configured, keras.layers.Layer):
    """One step: (x [N, in], [h [N, units]]) -> (h', [h']). Works in `keras.layers.RNN` and alone."""

    def __init__(self, units, kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 **kwargs):
        super().__init__(**kwargs)
        self.set_config(units=units, kernel_initializer=keras.initializers.get(kernel_initializer),
                        recurrent_initializer=keras.initializers.get(recurrent_initializer))
        self.state_size = units
        self.output_size = units

    def build(self, input_shape):
        n, u = input_shape[-1], self.units
        # Input projections for r, z, g, the candidate (W_xh) and the linear path (W_x).
        self.input_kernel = self.add_weight(name="input_kernel", shape=(n, 5 * u),
                                            initializer=self.kernel_initializer)
        # Recurrent projections for r, z, g and the candidate (W_hh).
        self.recurrent_kernel = self.add_weight(name="recurrent_kernel", shape=(u, 4 * u),
                                                initializer=self.recurrent_initializer)
        self.bias = self.add_weight(name="bias", shape=(4 * u,), initializer="zeros")

    def call(self, inputs, states, training=False):
        h = states[0] if isinstance(states, (list, tuple)) else states
        u = self.units
        x_proj = tf.matmul(inputs, self.input_kernel)
        h_proj = tf.matmul(h, self.recurrent_kernel)
        gates = tf.sigmoid(x_proj[:, : 3 * u] + h_proj[:, : 3 * u] + self.bias[: 3 * u])
        r, z, g = tf.split(gates, 3, axis=-1)
        x_h, x_linear = x_proj[:, 3 * u: 4 * u], x_proj[:, 4 * u:]
        candidate = tf.tanh((1.0 - r) * x_h + r * h_proj[:, 3 * u:] + self.bias[3 * u:])
        new_h = ((1.0 - z) * h + z * candidate) * (1.0 - g) + g * x_linear
        return new_h, [new_h]

    def get_config(self):
        # Initializers are objects: configs hold them serialised.
        config = super().get_config()
        for name in ("kernel_initializer", "recurrent_initializer"):
            config[name] = keras.initializers.serialize(config[name])
        return config


CELLS = ("lau", "gru")
CONNECTIONS = ("none", "residual", "fast_forward")
# What the DeepLAU/DeepGRU encoder and decoder both read.
HPARAMS = {
    "cell": HParam("lau", "recurrent cell", choices=CELLS),
    "stack_connection": HParam("none", "between stacked layers", choices=CONNECTIONS),
    "embed_dim": EMBED_DIM.but(default=512),
    "hidden_dim": HIDDEN_DIM.but(default=512),
    "dropout": DROPOUT.but(default=0.2, help="dropout on the word embeddings"),
    "init_stddev": HParam(0.0, "draw every weight matrix from N(0, init_stddev^2), as the paper "
                               "does with 0.04 (0 = Keras's Glorot / orthogonal defaults)",
                          bounds=">= 0"),
}


def initializers(stddev):
    """Keyword arguments for (dense kernels, embeddings, recurrent cells): the paper's
    N(0, stddev^2) for every weight matrix, or Keras's defaults (Glorot uniform, orthogonal
    recurrent kernels) with stddev 0. Biases start at zero either way. A fresh initializer per
    weight: a reused unseeded Keras initializer repeats its values."""
    if not stddev:
        return (lambda: {}), (lambda: {}), (lambda: {})
    normal = lambda: keras.initializers.RandomNormal(stddev=stddev)  # noqa: E731
    return (lambda: {"kernel_initializer": normal()}, lambda: {"embeddings_initializer": normal()},
            lambda: {"kernel_initializer": normal(), "recurrent_initializer": normal()})


def recurrent_cell(kind, units, name, init):
    if kind == "lau":
        return LAUCell(units, name=name, **init())
    # The paper's eq. 3 resets the state before the recurrent matrix, W_hh (r * h): Keras's
    # reset_after=False. (Keras's update gate z is the paper's 1 - z: the same function.)
    return keras.layers.GRUCell(units, reset_after=False, name=name, **init())


def connect(connection, i, x, h, fast):
    """The input of the layer above layer i of a stack, from layer i's input x and output h:
    `none`, `residual` (h + x; not around the first layer, whose input has another width) or
    `fast_forward` ([h; W_f x], Zhou et al. 2016; `fast` holds the W_f of each layer)."""
    if connection == "fast_forward":
        return tf.concat([h, fast[i](x)], axis=-1)
    if connection == "residual" and i > 0:
        return h + x
    return h


def stacked_width(h):
    """The width between stacked layers (fast-forward concatenates two)."""
    return 2 * h["hidden_dim"] if h["stack_connection"] == "fast_forward" else h["hidden_dim"]
