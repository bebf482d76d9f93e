"""The recurrent encoder of DeepLAU and DeepGRU (encoders/recurrent.py, paper 001): layers of
alternating direction joined as the paper's stack connections, and padding that changes nothing."""

import numpy as np
import pytest
import tensorflow as tf

from helpers.families import RECURRENT_GRID as GRID, recurrent
from helpers.recurrent import numpy_gru, numpy_lau, random_weights
from tfnmt.layers.lau import LAUCell


def numpy_cell(cell, x, h):
    return numpy_lau(cell, x, h) if isinstance(cell, LAUCell) else numpy_gru(cell, x, h)


@pytest.mark.parametrize("name,connection", GRID)
def test_encoder_stack_connections_are_the_papers(name, connection):
    """The whole encoder in numpy: alternating directions, then none (x_{l+1} = h_l), residual
    (x_{l+1} = h_l + x_l above the first layer) or fast-forward (x_{l+1} = [h_l; W_f x_l])."""
    model = recurrent(name, stack_connection=connection)
    for i, cell in enumerate(model.encoder.cells):
        random_weights(cell, seed=i)
    source = tf.constant([[5, 6, 7, 8, 3]])
    x = model.encoder.embedding(source).numpy()[0]
    for i, cell in enumerate(model.encoder.cells):
        order = range(len(x)) if i % 2 == 0 else reversed(range(len(x)))
        h, outputs = np.zeros((1, 12), np.float32), np.zeros((len(x), 12), np.float32)
        for t in order:
            h = numpy_cell(cell, x[t][None], h)
            outputs[t] = h[0]
        if connection == "fast_forward":
            x = np.concatenate([outputs, x @ model.encoder.fast[i].kernel.numpy()], axis=-1)
        elif connection == "residual" and i > 0:
            x = outputs + x
        else:
            x = outputs
    np.testing.assert_allclose(model.encode(source)["outputs"][0].numpy(), x, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,connection", GRID)
def test_alternating_encoder_gives_a_padded_sentence_its_unpadded_output(name, connection):
    model = recurrent(name, stack_connection=connection)
    batch = model.encode(tf.constant([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]]))
    alone = model.encode(tf.constant([[9, 10, 3]]))
    np.testing.assert_allclose(batch["outputs"][1, :3].numpy(), alone["outputs"][0].numpy(), atol=1e-5)
    np.testing.assert_allclose(batch["outputs"][1, 3:].numpy(), 0.0)
    np.testing.assert_allclose(batch["summary"][1].numpy(), alone["summary"][0].numpy(), atol=1e-5)


def test_layers_alternate_direction():
    # With one layer the first output sees only the first token; with two, the second
    # (right-to-left) layer lets it see the last one too.
    for layers, sees_future in ((1, False), (2, True)):
        model = recurrent("deeplau", encoder_layers=layers)
        a = model.encode(tf.constant([[5, 6, 7, 3]]))["outputs"][0, 0].numpy()
        b = model.encode(tf.constant([[5, 6, 9, 3]]))["outputs"][0, 0].numpy()
        assert (not np.allclose(a, b)) == sees_future
