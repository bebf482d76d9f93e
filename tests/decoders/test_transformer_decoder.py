"""The Transformer decoder (decoders/transformer.py): its incremental steps, with and without a
tied output layer, give teacher forcing's logits, and no position reads the targets after it."""

import numpy as np
import pytest
import tensorflow as tf

from contract import assert_incremental_equals_teacher_forcing
from helpers.families import SOURCE, TARGET_IN, transformer


@pytest.mark.parametrize("pre_norm", [False, True])
@pytest.mark.parametrize("tie_output", [False, True])
def test_incremental_steps_equal_teacher_forcing(pre_norm, tie_output):
    model = transformer(pre_norm=pre_norm, tie_output=tie_output)
    assert_incremental_equals_teacher_forcing(model, SOURCE, TARGET_IN)


def test_decoder_is_causal():
    model = transformer()
    changed = tf.tensor_scatter_nd_update(TARGET_IN, [[0, 3]], [40])
    a = model({"source": SOURCE, "target_in": TARGET_IN}).numpy()
    b = model({"source": SOURCE, "target_in": changed}).numpy()
    np.testing.assert_allclose(a[0, :3], b[0, :3], atol=1e-5)
    assert not np.allclose(a[0, 3], b[0, 3])
