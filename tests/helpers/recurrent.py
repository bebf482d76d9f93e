"""Recurrent cells in numpy, on the cells' own weights: the LAU (DeepLAU, paper 001, eq. 6-8)
and the paper's GRU (eq. 2-5) on a Keras GRUCell; used by tests/layers/test_lau.py,
tests/models/test_deeplau.py and tests/encoders/test_recurrent_encoder.py."""

import numpy as np


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def random_weights(cell, seed=0):
    rng = np.random.default_rng(seed)
    for w in cell.weights:
        w.assign(rng.normal(0, 0.5, w.shape).astype(np.float32))


def numpy_lau(cell, x, h):
    """Eq. 6-8 on the cell's weights."""
    Wx, Wh, b = (w.numpy() for w in (cell.input_kernel, cell.recurrent_kernel, cell.bias))
    Wxr, Wxz, Wxg, Wxh, Wlin = np.split(Wx, 5, axis=1)
    Whr, Whz, Whg, Whh = np.split(Wh, 4, axis=1)
    br, bz, bg, bh = np.split(b, 4)
    r = sigmoid(x @ Wxr + h @ Whr + br)
    z = sigmoid(x @ Wxz + h @ Whz + bz)
    g = sigmoid(x @ Wxg + h @ Whg + bg)
    candidate = np.tanh((1 - r) * (x @ Wxh) + r * (h @ Whh) + bh)
    return ((1 - z) * h + z * candidate) * (1 - g) + g * (x @ Wlin)


def numpy_gru(cell, x, h):
    """The paper's GRU, eq. 2-5, on a Keras GRUCell's weights (columns z, r, h). Keras's update
    gate is the paper's 1 - z: z_paper = sigmoid(-(W_xz x + W_hz h + b_z))."""
    (Wxz, Wxr, Wxh), (Whz, Whr, Whh) = (np.split(w.numpy(), 3, axis=1)
                                        for w in (cell.kernel, cell.recurrent_kernel))
    bz, br, bh = np.split(cell.bias.numpy(), 3)
    z = sigmoid(-(x @ Wxz + h @ Whz + bz))
    r = sigmoid(x @ Wxr + h @ Whr + br)
    candidate = np.tanh(x @ Wxh + (r * h) @ Whh + bh)      # eq. 3: W_hh (r * h)
    return (1 - z) * h + z * candidate                       # eq. 2
