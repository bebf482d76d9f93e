"""The GRU sentence encoder of the gru_encdec baseline (encoders/gru.py): the report's sizes
and its encoding against Cho et al.'s equations in numpy."""

import numpy as np
import tensorflow as tf

from helpers.sentence_models import SOURCE, gru_model, random_weights, sigmoid
from tfnmt.models import catalog


def test_gru_baseline_has_the_reports_sizes():
    model = catalog.get("gru_encdec")(40, 40)
    model.build_with_dummy_batch()
    assert model.source_window is None
    assert model.encode(SOURCE)["encoding"].shape == (2, 1000)
    assert model.encoder.gru.cell.kernel.shape == (100, 3000)


def numpy_gru(x, h, kernel, recurrent_kernel, bias):
    """Cho et al.'s GRU (main text eq. 5-8) on Keras GRU(reset_after=False) weights."""
    Wz, Wr, Wh = np.split(kernel, 3, axis=1)
    Uz, Ur, Uh = np.split(recurrent_kernel, 3, axis=1)
    bz, br, bh = np.split(bias, 3)
    z = sigmoid(x @ Wz + h @ Uz + bz)
    r = sigmoid(x @ Wr + h @ Ur + br)
    return z * h + (1 - z) * np.tanh(x @ Wh + (r * h) @ Uh + bh)


def test_gru_baseline_encoding_is_tanh_v_of_the_last_encoder_state():
    model = gru_model()
    random_weights(model, seed=3)
    source = tf.constant([[5, 6, 7, 3, 0]])
    x = model.encoder.embedding(source).numpy()[0]
    cell = model.encoder.gru.cell
    h = np.zeros((1, 12), np.float32)
    for t in range(4):  # up to eos; padding leaves the state alone
        h = numpy_gru(x[t][None], h, cell.kernel.numpy(), cell.recurrent_kernel.numpy(), cell.bias.numpy())
    c = np.tanh(h @ model.encoder.summary.kernel.numpy() + model.encoder.summary.bias.numpy())
    np.testing.assert_allclose(model.encode(source)["encoding"].numpy(), c, atol=1e-5)
