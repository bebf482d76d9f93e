"""A decoding step's largest products in parts (tfnmt/parts.py): the blocks give what
the whole product gives, unequal blocks included."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnmt.layers.transformer_layers import FeedForward, tied_logits
from tfnmt.parts import PARTS, in_parts


def _random(shape, seed):
    return tf.constant(np.random.default_rng(seed).normal(size=shape), tf.float32)


@pytest.mark.parametrize("width", [1, PARTS, 2 * PARTS + 1])
def test_parts_cover_the_tensor_in_order_with_sizes_at_most_one_apart(width):
    tensor = tf.reshape(tf.range(3 * width), [3, width])
    columns = in_parts(tensor)
    assert len(columns) == PARTS
    np.testing.assert_array_equal(tf.concat(columns, axis=-1), tensor)
    sizes = [part.shape[-1] for part in columns]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] - sizes[-1] <= 1
    rows = in_parts(tf.transpose(tensor), axis=0)
    np.testing.assert_array_equal(tf.concat(rows, axis=0), tf.transpose(tensor))


@pytest.mark.parametrize("policy, tolerance", [("float32", 1e-5), ("mixed_bfloat16", 2e-2)])
def test_a_feed_forward_step_in_parts_is_the_block(policy, tolerance):
    # An odd inner width: blocks of 4 and 3 columns, whose rows of the outer map must match.
    # Built under the global policy, as a model decoding in bfloat16 is (its sublayers too).
    keras.config.set_dtype_policy(policy)
    try:
        ffn = FeedForward(7)
        ffn.build((None, 5))
    finally:
        keras.config.set_dtype_policy("float32")
    for seed, weight in enumerate(ffn.weights):
        weight.assign(_random(weight.shape, seed))  # biases too, which start at zero
    blocks, bias = ffn.parts()
    assert len(blocks) == PARTS
    assert {t.dtype for t in tf.nest.flatten((blocks, bias))} == {tf.as_dtype(ffn.compute_dtype)}
    x = tf.cast(_random([4, 5], 9), ffn.compute_dtype)
    whole = ffn(x)
    assert np.abs(whole.numpy().astype(np.float32)).max() > 1.0
    np.testing.assert_allclose(tf.cast(ffn.step(x, (blocks, bias)), tf.float32),
                               tf.cast(whole, tf.float32), rtol=tolerance, atol=tolerance)


def test_logits_from_the_transposed_matrix_in_parts_are_the_tied_logits():
    matrix, x = _random([9, 5], 0), _random([4, 5], 1)  # 9 pieces: blocks of 5 and 4
    expected = tf.matmul(x, matrix, transpose_b=True)
    np.testing.assert_allclose(tied_logits(x, matrix, in_parts(tf.transpose(matrix))), expected,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tied_logits(x, matrix), expected, rtol=1e-5, atol=1e-6)
