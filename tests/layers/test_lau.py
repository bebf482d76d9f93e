"""The Linear Associative Unit (tfnmt/layers/lau.py; DeepLAU, paper 001, eq. 6-8)."""

import keras
import numpy as np
import tensorflow as tf

from helpers.recurrent import numpy_lau, random_weights
from tfnmt.layers.lau import LAUCell


def test_lau_cell_is_equation_6_to_8():
    cell = LAUCell(4)
    cell.build((None, 3))
    random_weights(cell)
    x = np.random.default_rng(1).normal(size=(2, 3)).astype(np.float32)
    h = np.random.default_rng(2).normal(size=(2, 4)).astype(np.float32)
    expected = numpy_lau(cell, x, h)
    out, (state,) = cell(tf.constant(x), [tf.constant(h)])
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_with_the_linear_gate_open_the_state_is_the_linear_input_path():
    cell = LAUCell(4)
    cell.build((None, 3))
    random_weights(cell)
    bias = cell.bias.numpy()
    bias[8:12] = 60.0  # g = sigmoid(... + 60) = 1 in float32
    cell.bias.assign(bias)
    x = np.random.default_rng(3).normal(size=(2, 3)).astype(np.float32)
    h = np.random.default_rng(4).normal(size=(2, 4)).astype(np.float32)
    out, _ = cell(tf.constant(x), [tf.constant(h)])
    np.testing.assert_allclose(out.numpy(), x @ cell.input_kernel.numpy()[:, 16:], rtol=1e-6)


def test_lau_cell_runs_in_keras_rnn_and_round_trips_its_config():
    cell = LAUCell(5, name="lau")
    rnn = keras.layers.RNN(cell, return_sequences=True)
    x = tf.random.stateless_normal([2, 7, 3], seed=[0, 1])
    out = rnn(x)
    assert out.shape == (2, 7, 5)
    # The RNN's last output equals stepping the cell by hand.
    h = tf.zeros([2, 5])
    for t in range(7):
        h, _ = cell(x[:, t], [h])
    np.testing.assert_allclose(out[:, -1].numpy(), h.numpy(), atol=1e-6)
    clone = LAUCell.from_config(cell.get_config())
    assert clone.units == 5 and clone.name == "lau"
