"""Beam search against a toy model whose next-token distribution is a fixed table."""

import math

import numpy as np
import pytest
import tensorflow as tf

from tfnmt.data.vocab import EOS_ID
from tfnmt.decoding.beam_search import beam_search, length_penalty, max_lengths

V = 8


class TableModel:
    """log p(next | last token) from a [V, V] table; the state counts steps per hypothesis."""

    def __init__(self, table):
        self.table = tf.constant(np.log(np.asarray(table, np.float32) + 1e-12))

    def initial_state(self, memory):
        return {"steps": tf.zeros_like(memory["x"][:, 0], tf.int32)}

    def step(self, ids, time, state, memory):
        return tf.gather(self.table, ids), {"steps": state["steps"] + 1}


def _table(rows):
    table = np.full([V, V], 1e-6)
    for last, probs in rows.items():
        for token, p in probs.items():
            table[last, token] = p
    return table / table.sum(1, keepdims=True)


def _decode(model, limits, beam, alpha=0.0, n_best=1, mode="gnmt"):
    memory = {"x": tf.zeros([len(limits), 1])}
    return beam_search(model, memory, tf.constant(limits), beam, alpha, mode, n_best)


def test_beam_finds_what_greedy_misses():
    # Greedy takes 4 (0.6) then must pay 0.3; the path through 5 is better: 0.4 * 1.0.
    model = TableModel(_table({2: {4: 0.6, 5: 0.4}, 4: {EOS_ID: 0.3, 6: 0.7}, 5: {EOS_ID: 1.0},
                               6: {EOS_ID: 0.5, 7: 0.5}, 7: {EOS_ID: 1.0}}))
    greedy_ids, greedy_scores = _decode(model, [2], beam=1)
    beam_ids, beam_scores = _decode(model, [2], beam=3, n_best=2)
    assert greedy_ids.numpy()[0, 0].tolist() == [4, 0]  # 4 then forced eos at the limit
    np.testing.assert_allclose(greedy_scores.numpy()[0, 0], math.log(0.6 * 0.3), rtol=1e-4)
    assert beam_ids.numpy()[0, 0].tolist()[:1] == [5]
    np.testing.assert_allclose(beam_scores.numpy()[0, 0], math.log(0.4), rtol=1e-4)
    assert beam_ids.numpy()[0, 1].tolist()[:1] == [4]  # n-best keeps the runner-up


def test_length_penalty_prefers_longer_hypotheses():
    # Ending now: 0.5; continuing: 0.5 * 0.9 * 1.0 (three tokens, eos included).
    model = TableModel(_table({2: {EOS_ID: 0.5, 4: 0.5}, 4: {5: 0.9, EOS_ID: 0.1}, 5: {EOS_ID: 1.0}}))
    short, _ = _decode(model, [5], beam=2, alpha=0.0)
    long, score = _decode(model, [5], beam=2, alpha=2.0)
    assert short.numpy()[0, 0].tolist()[0] == 0  # empty hypothesis: eos first
    assert long.numpy()[0, 0].tolist()[:2] == [4, 5]
    expected = math.log(0.5 * 0.9) / length_penalty(3, 2.0).numpy()
    np.testing.assert_allclose(score.numpy()[0, 0], expected, rtol=1e-4)


def test_per_sentence_length_limits_and_eos_padding():
    # The model never wants to stop: every sentence ends at its own limit (where eos is forced;
    # the length penalty breaks the tie between equally unlikely endings in favour of length).
    model = TableModel(_table({2: {4: 1.0}, 4: {4: 1.0}}))
    ids, _ = _decode(model, [1, 3, 5], beam=2, alpha=1.0)
    ids = ids.numpy()[:, 0]
    assert ids.shape == (3, 5)
    for row, limit in zip(ids, [1, 3, 5]):
        assert row.tolist() == [4] * (limit - 1) + [0] * (5 - limit + 1)


def test_finished_hypotheses_are_frozen():
    # One beam ends at step 1 with p=0.45; alive ones decay and can never beat it.
    model = TableModel(_table({2: {EOS_ID: 0.45, 4: 0.55}, 4: {4: 0.5, 5: 0.5}, 5: {5: 0.5, 4: 0.5}}))
    ids, scores = _decode(model, [30], beam=2)
    assert ids.numpy()[0, 0].tolist()[0] == 0
    np.testing.assert_allclose(scores.numpy()[0, 0], math.log(0.45), rtol=1e-4)


def test_max_lengths_are_relative_to_the_source_and_capped():
    limits = max_lengths(tf.constant([0, 4, 100]), ratio=1.5, offset=2, cap=50).numpy()
    assert limits.tolist() == [2, 8, 50]


def test_n_best_larger_than_beam_is_refused():
    model = TableModel(_table({2: {4: 1.0}}))
    with pytest.raises(ValueError, match="n_best"):
        _decode(model, [3], beam=2, n_best=3)
