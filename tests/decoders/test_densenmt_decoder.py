"""The DenseNMT decoder (decoders/densenmt.py), dense or residual, behind either encoder, under
each attention (multi-step, DenseAtt-1, DenseAtt-2, none): incremental decoding is teacher
forcing, no position reads the targets after it, and the source counts only through attention."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from contract import assert_incremental_equals_teacher_forcing
from helpers.families import SOURCE, TARGET_IN, densenmt as make

GRID = list(itertools.product(["dense", "residual"], ["dense", "residual"],
                              ["multistep", "dense1", "dense2", "none"]))


@pytest.mark.slow
@pytest.mark.parametrize("encoder,decoder,attention", GRID)
def test_every_combination_decodes_incrementally_like_teacher_forcing(encoder, decoder, attention):
    model = make(encoder=encoder, decoder=decoder, attention=attention, sumlen=3, table_dim=6)
    assert_incremental_equals_teacher_forcing(model, SOURCE, TARGET_IN, atol=1e-5)
    # Checkpoints key variables by path: every variable needs its own.
    paths = [v.path for v in model.weights]
    assert len(set(paths)) == len(paths), sorted(p for p in paths if paths.count(p) > 1)


@pytest.mark.slow
@pytest.mark.parametrize("attention", ["multistep", "dense1", "dense2"])
def test_decoder_is_causal_and_source_padding_is_masked(attention):
    model = make(attention=attention, sumlen=3)
    inputs = {"source": SOURCE, "target_in": TARGET_IN}
    a = model(inputs).numpy()
    for t in range(1, 6):  # changing target position t changes nothing before t
        changed = tf.tensor_scatter_nd_update(TARGET_IN, [[0, t]], [40])
        b = model({"source": SOURCE, "target_in": changed}).numpy()
        np.testing.assert_allclose(a[0, :t], b[0, :t], atol=1e-6)
        assert not np.allclose(a[0, t], b[0, t])
    longer = tf.pad(SOURCE, [[0, 0], [0, 4]])
    np.testing.assert_allclose(a, model({"source": longer, "target_in": TARGET_IN}).numpy(), atol=1e-5)
    # The source matters whenever there is attention.
    other = tf.constant([[9, 8, 7, 3, 0], [8, 9, 3, 0, 0]])
    assert not np.allclose(a[0], model({"source": other, "target_in": TARGET_IN}).numpy()[0])


def test_without_attention_the_decoder_ignores_the_source():
    model = make(attention="none")
    a = model({"source": SOURCE, "target_in": TARGET_IN}).numpy()
    b = model({"source": SOURCE[:, ::-1], "target_in": TARGET_IN}).numpy()
    np.testing.assert_allclose(a, b, atol=1e-6)
