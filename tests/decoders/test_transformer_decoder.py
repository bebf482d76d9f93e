"""The Transformer decoder (decoders/transformer.py): its incremental steps, with and without a
tied output layer, give teacher forcing's logits, and no position reads the targets after it."""

import numpy as np
import pytest
import tensorflow as tf

from contract import assert_incremental_equals_teacher_forcing
from helpers.families import SOURCE, TARGET_IN, transformer
from tfnmt.layers.attention import MultiHeadAttention, key_mask


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


def test_hypotheses_attend_to_their_sentences_memory_row_as_to_a_tiled_copy():
    # A beam's cross-attention reads one memory row a sentence, k hypotheses to each
    # (decoding/shared.py BY_SENTENCE): the same outputs and attention weights as the same
    # memory tiled to one row a hypothesis, padding masked alike.
    k = 3
    attention = MultiHeadAttention(4, name="cross_attention")
    attention.build((None, 1, 16), (None, 5, 16))
    memory = tf.random.stateless_normal([2, 5, 16], seed=[1, 2])
    mask = tf.constant([[True] * 5, [True, True, False, False, False]])
    queries = tf.random.stateless_normal([2 * k, 16], seed=[3, 4])
    keys, values = attention.step_key_value(memory)
    grouped = attention.attend_step(queries, keys, values, key_mask(mask))
    grouped_weights = attention.last_weights
    tiled = attention.attend_step(queries, tf.repeat(keys, k, axis=0),
                                  tf.repeat(values, k, axis=0), key_mask(tf.repeat(mask, k, 0)))
    np.testing.assert_allclose(grouped.numpy(), tiled.numpy(), atol=1e-6)
    np.testing.assert_allclose(grouped_weights.numpy(), attention.last_weights.numpy(), atol=1e-7)
    assert grouped_weights.shape == (2 * k, 1, 5)
    assert not np.allclose(grouped.numpy()[0], grouped.numpy()[1])  # each query its own
    np.testing.assert_array_equal(grouped_weights.numpy()[k:, 0, 2:], 0.0)
