"""Translator.search: a batch of at least SPLIT_SENTENCES sentences is searched as two halves
side by side, and comes back as if searched whole, in order."""


import numpy as np
import pytest
import tensorflow as tf

from tfnmt.data.vocab import EOS_ID, PAD_ID
from tfnmt.decoding.options import DecodingOptions
from tfnmt.serving.backends import from_checkpoint

# Eleven sentences: the halves (6 and 5) have different lengths, the longest sources last.
LENGTHS = [1, 2, 2, 3, 1, 2, 9, 4, 12, 5, 11]


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(0)
    width = max(LENGTHS) + 1
    source = np.full([len(LENGTHS), width], PAD_ID, np.int32)
    for row, length in enumerate(LENGTHS):
        source[row, :length] = rng.integers(4, 40, length)
        source[row, length] = EOS_ID
    return tf.constant(source), tf.constant(LENGTHS, tf.int32)


def _padded(ids, width):
    return np.pad(ids, [(0, 0), (0, 0), (0, width - ids.shape[2])], constant_values=PAD_ID)


@pytest.mark.slow
@pytest.mark.parametrize("beam_size, n_best", [(1, 1), (3, 2)])
def test_a_batch_searched_in_halves_is_each_half_searched_alone_in_order(trained_model, batch,
                                                                         beam_size, n_best):
    _, translator = from_checkpoint(trained_model, "", DecodingOptions(
        beam_size=beam_size, n_best=n_best, max_length_offset=3))
    source, lengths = batch
    ids, scores = (t.numpy() for t in translator.search(source, lengths, n_best=n_best))
    half = (len(LENGTHS) + 1) // 2
    (run,) = translator._searches.values()  # the function each half is searched by
    parts = [run(source[rows], lengths[rows]) for rows in (slice(0, half), slice(half, None))]
    width = max(int(p[0].shape[2]) for p in parts)
    assert [int(p[0].shape[2]) for p in parts][0] < width  # the first half's ids are padded
    np.testing.assert_array_equal(ids, np.concatenate([_padded(p[0].numpy(), width)
                                                       for p in parts]))
    np.testing.assert_array_equal(scores, np.concatenate([p[1].numpy() for p in parts]))
    # And as if searched whole: padding the sources further changes no translation.
    whole_ids, whole_scores = run(source, lengths)
    np.testing.assert_array_equal(ids, _padded(whole_ids.numpy(), ids.shape[2]))
    np.testing.assert_allclose(scores, whole_scores.numpy(), rtol=1e-5)


def _calls(graph):
    return [op for op in graph.get_operations()
            if op.type in ("PartitionedCall", "StatefulPartitionedCall")]


@pytest.mark.slow
def test_the_halves_are_two_calls_of_one_function_and_tflites_search_inline(trained_model):
    _, translator = from_checkpoint(trained_model, "", DecodingOptions(beam_size=2))
    spec = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)]
    graph = tf.function(translator.search).get_concrete_function(*spec).graph
    branches = {op.type: op for op in graph.get_operations() if op.type in ("If", "StatelessIf")}
    (cond,) = branches.values()
    then, otherwise = (graph._functions[cond.get_attr(name).name].graph
                       for name in ("then_branch", "else_branch"))
    assert [op.get_attr("f").name for op in _calls(then)] == \
        [_calls(otherwise)[0].get_attr("f").name] * 2
    # TFLite's search (halves=False) is inline: no cond, and no function call, which TFLite
    # would not convert (tests/models/test_contract.py converts every model).
    graph = tf.function(lambda source, lengths: translator.search(
        source, lengths, halves=False)).get_concrete_function(*spec).graph
    assert not _calls(graph)
    assert not [op for op in graph.get_operations() if op.type in ("If", "StatelessIf")]
