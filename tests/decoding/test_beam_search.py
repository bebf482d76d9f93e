"""Beam search against a toy model whose next-token distribution is a fixed table."""

import math

import numpy as np
import pytest
import tensorflow as tf

from tfnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from tfnmt.decoding.beam_search import beam_search, length_penalty, max_lengths, wide_top_k
from tfnmt.decoding import compiled, searches
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.shared import BY_SENTENCE, tile_hypotheses
from tfnmt.decoding.sampling import sampler, search
from tfnmt.errors import ConfigError

V = 8


class TableModel:
    """log p(next | last token) from a [V, V] table; the state counts steps per hypothesis."""

    def __init__(self, table):
        self.table = tf.constant(np.log(np.asarray(table, np.float32) + 1e-12))

    def decoding_memory(self, memory):
        return memory

    def initial_state(self, memory):
        return {"steps": tf.zeros_like(memory["x"][:, 0], tf.int32)}

    def fixed_initial_state(self, memory, steps):  # the compiled searches' (nothing grows)
        return self.initial_state(memory)

    def step(self, ids, time, state, memory):
        return tf.gather(self.table, ids), {"steps": state["steps"] + 1}


def _table(rows):
    table = np.full([V, V], 1e-6)
    for last, probs in rows.items():
        for token, p in probs.items():
            table[last, token] = p
    return table / table.sum(1, keepdims=True)


# The tables' expectations hold without a minimum length (its own tests are at the end).
NO_MIN = 0


def _decode(model, limits, beam, alpha=0.0, n_best=1, mode="gnmt"):
    memory = {"x": tf.zeros([len(limits), 1])}
    return beam_search(model, memory, tf.constant(limits), beam, alpha, mode, n_best, 0, NO_MIN)


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
    expected = math.log(0.5 * 0.9) / length_penalty(3, 2.0, "gnmt").numpy()
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


class LengthModel:
    """Says word 4 until the sentence's own length (memory["length"], one row a hypothesis, or
    with `by_sentence`, memory[BY_SENTENCE]["length"], one row a sentence, which a step's
    consecutive hypotheses share), then eos; records how many rows each step decodes and how
    many sentence rows it reads. Runs eagerly, so the loop body is plain Python."""

    def __init__(self, by_sentence=False):
        self.by_sentence = by_sentence
        self.rows, self.sentence_rows = [], []

    def decoding_memory(self, memory):
        if not self.by_sentence:
            return memory
        return {"rows": tf.zeros_like(memory["length"]), BY_SENTENCE: memory}

    def initial_state(self, memory):
        return {"steps": tf.zeros_like(memory["rows" if self.by_sentence else "length"])}

    def step(self, ids, time, state, memory):
        self.rows.append(int(ids.shape[0]))
        length = memory.get("length")
        if self.by_sentence:
            length = memory[BY_SENTENCE]["length"]
            self.sentence_rows.append(int(length.shape[0]))
            length = tf.repeat(length, ids.shape[0] // length.shape[0])
        ending = tf.greater_equal(time + 1, length)[:, None]
        want = tf.where(ending, tf.one_hot(EOS_ID, V), tf.one_hot(4, V))
        return tf.math.log(want * 0.999 + 0.001 / V), {"steps": state["steps"] + 1}


@pytest.mark.parametrize("by_sentence", [False, True], ids=["by hypothesis", "by sentence"])
@pytest.mark.parametrize("beam", [1, 3])
def test_a_sentence_leaves_the_batch_when_its_result_is_final(beam, by_sentence):
    # Sentences of 2, 6 and 4 tokens (eos included) under a limit of 10: the first is final
    # after step 2, the third after step 4, so later steps run the model on fewer rows, and
    # each remaining row still reads its own sentence's memory, whether the memory has a row
    # per hypothesis or (BY_SENTENCE) one per sentence, never tiled.
    model = LengthModel(by_sentence)
    memory = {"length": tf.constant([2, 6, 4])}
    limits = tf.constant([10, 10, 10])
    if beam == 1:
        ids, _ = greedy(model, memory, limits)
    else:
        ids, _ = beam_search(model, memory, limits, beam, 0.6, "gnmt", 1, 0, NO_MIN)
    assert [len(_tokens(row)) for row in ids.numpy()[:, 0]] == [1, 5, 3]
    assert model.rows == [3 * beam] * 2 + [2 * beam] * 2 + [beam] * 2
    assert model.sentence_rows == ([3] * 2 + [2] * 2 + [1] * 2 if by_sentence else [])


def test_a_beam_tiles_the_memory_but_not_its_by_sentence_entries_at_any_depth():
    memory = {"x": tf.constant([[1], [2]]), BY_SENTENCE: {"y": tf.constant([[3], [4]])},
              "members": ({"z": tf.constant([5, 6]), BY_SENTENCE: (tf.constant([7, 8]),)},)}
    tiled = tile_hypotheses(memory, 3)
    assert tiled["x"].numpy()[:, 0].tolist() == [1, 1, 1, 2, 2, 2]
    assert tiled[BY_SENTENCE]["y"].numpy()[:, 0].tolist() == [3, 4]
    assert tiled["members"][0]["z"].numpy().tolist() == [5, 5, 5, 6, 6, 6]
    assert tiled["members"][0][BY_SENTENCE][0].numpy().tolist() == [7, 8]


@pytest.mark.parametrize("width,k", [(40000, 10), (8003, 6), (100, 10), (7, 2)])
@pytest.mark.parametrize("traced", [False, True], ids=["width known", "width unknown"])
def test_wide_top_k_equals_top_k_ties_included(width, k, traced):
    # Few distinct values, so most of the k largest tie with others; -1e9 as the banned tokens.
    values = np.random.default_rng(width).integers(0, 6, size=[5, width]).astype(np.float32)
    values[1] = -1e9
    values[2, : width // 2] = -1e9
    # The last column's chunk has the largest maximum and ties of the rest with earlier chunks.
    values[3] = np.minimum(values[3], 2)
    values[3, -1] = 9
    x = tf.constant(values)
    expected = tf.math.top_k(x, k)
    top_k = lambda x: wide_top_k(x, k, chunk=16)  # noqa: E731
    if traced:  # the width a tensor, as where the vocabulary's size is not known when traced
        top_k = tf.function(top_k, input_signature=[tf.TensorSpec([None, None])])
    got = top_k(x)
    np.testing.assert_array_equal(got[0].numpy(), expected.values.numpy())
    np.testing.assert_array_equal(got[1].numpy(), expected.indices.numpy())


def test_max_lengths_are_relative_to_the_source_and_capped():
    limits = max_lengths(tf.constant([0, 4, 100]), ratio=1.5, offset=2, cap=50).numpy()
    assert limits.tolist() == [2, 8, 50]


def test_n_best_larger_than_beam_is_refused():
    model = TableModel(_table({2: {4: 1.0}}))
    with pytest.raises(ValueError, match="n_best"):
        _decode(model, [3], beam=2, n_best=3)


# --- no_repeat_ngram_size, sampling ---------------------------------------------------------

# After bos: 4, then 4 -> 5 -> 4 -> 5 ... (the loop a model stuck on "oder oder" falls into);
# eos is never likely, so only the length limit ends a hypothesis.
LOOPING = _table({2: {4: 0.9, 6: 0.1}, 4: {5: 0.8, 6: 0.1, 7: 0.1}, 5: {4: 0.8, 6: 0.1, 7: 0.1},
                  6: {4: 0.5, 7: 0.5}, 7: {5: 0.5, 6: 0.5}})


# The search functions take every setting; the tests use the declared defaults where they do
# not choose one.
D = DecodingOptions()


def greedy(model, memory, limits, choose=None, alpha=D.length_penalty,
           no_repeat_ngram_size=D.no_repeat_ngram_size):
    return search(model, memory, limits, choose, alpha, D.length_penalty_mode, no_repeat_ngram_size,
                  NO_MIN)


def sample(model, memory, limits, topk=D.sampling_topk, temperature=D.sampling_temperature,
           seed=D.sampling_seed, **kwargs):
    return greedy(model, memory, limits, sampler(topk, temperature, seed), **kwargs)


def _repeats(tokens, n):
    grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


def _tokens(row):
    return [int(t) for t in row if t != 0]


@pytest.mark.parametrize("n", [1, 2, 3])
def test_no_repeat_ngram_size_stops_a_loop_in_beam_and_greedy_search(n):
    model = TableModel(LOOPING)
    for beam in (1, 3):
        # The length penalty makes the loop beat the (unlikely) empty hypothesis.
        loops, _ = _decode(model, [12], beam=beam, alpha=1.0)
        assert _repeats(_tokens(loops.numpy()[0, 0]), n)
        ids, _ = beam_search(model, {"x": tf.zeros([1, 1])}, tf.constant([12]), beam, 1.0,
                             "gnmt", beam, n, NO_MIN)
        for hypothesis in ids.numpy()[0]:
            assert not _repeats(_tokens(hypothesis), n), (beam, hypothesis)
    loops, _ = greedy(model, {"x": tf.zeros([1, 1])}, tf.constant([12]))
    assert _repeats(_tokens(loops.numpy()[0, 0]), n)
    ids, _ = greedy(model, {"x": tf.zeros([1, 1])}, tf.constant([12]), no_repeat_ngram_size=n)
    assert not _repeats(_tokens(ids.numpy()[0, 0]), n)
    # With 5 ordinary tokens (unk, 4-7) and no 1-gram repeated, eos comes after at most 5.
    if n == 1:
        assert len(_tokens(ids.numpy()[0, 0])) <= 5


def test_no_repeat_ngram_size_applies_to_sampling():
    ids, _ = sample(TableModel(LOOPING), {"x": tf.zeros([6, 1])}, tf.constant([12] * 6),
                    topk=0, seed=3, no_repeat_ngram_size=2)
    for row in ids.numpy()[:, 0]:
        assert not _repeats(_tokens(row), 2), row


def _random_model(seed):
    rng = np.random.default_rng(seed)
    table = rng.dirichlet(np.full(V, 0.7), size=V)
    table[:, PAD_ID] = table[:, BOS_ID] = 1e-6  # banned anyway
    return TableModel(table / table.sum(1, keepdims=True))


def test_greedy_search_takes_the_most_likely_token_and_sampling_top1_is_greedy():
    model = _random_model(0)
    memory = {"x": tf.zeros([5, 1])}
    limits = tf.constant([3, 6, 9, 12, 20])
    best, best_scores = greedy(model, memory, limits, alpha=0.0)
    table = model.table.numpy()
    for row, limit, score in zip(best.numpy()[:, 0], limits.numpy(), best_scores.numpy()[:, 0]):
        tokens, last, total = _tokens(row), 2, 0.0
        for i, token in enumerate(tokens + [EOS_ID]):
            allowed = table[last].copy()
            allowed[[PAD_ID, BOS_ID]] = -np.inf
            if i + 1 == limit:
                allowed[np.arange(V) != EOS_ID] = -np.inf
            assert token == allowed.argmax()
            total, last = total + table[last, token], token
            if token == EOS_ID:
                break
        np.testing.assert_allclose(score, total, rtol=1e-5)
    for seed in (0, 1):
        sampled, scores = sample(model, memory, limits, topk=1, seed=seed, alpha=0.0)
        np.testing.assert_array_equal(sampled.numpy(), best.numpy())
        np.testing.assert_allclose(scores.numpy(), best_scores.numpy(), rtol=1e-5)


def test_sampling_is_reproducible_by_seed_and_varies_across_seeds():
    model = _random_model(1)
    memory = {"x": tf.zeros([8, 1])}
    limits = tf.constant([10] * 8)

    def draw(seed, **kw):
        return [_tokens(row) for row in sample(model, memory, limits, seed=seed, **kw)[0][:, 0]]
    assert draw(7) == draw(7)
    assert draw(7) != draw(8)
    assert draw(7, temperature=0.5) != draw(7)
    # Translations end with eos (stripped) or at the limit, never hold pad or bos.
    for tokens in draw(7):
        assert len(tokens) < 10 and BOS_ID not in tokens


def test_the_models_family_and_the_options_pick_the_search():
    class Autoregressive:
        search_family = "autoregressive"

    class CTC:
        search_family = "ctc"
    pick = lambda model, **kw: type(searches.for_model(model, DecodingOptions(**kw)))
    assert pick(Autoregressive()) is searches.BeamSearch
    assert pick(Autoregressive(), beam_size=1) is searches.Greedy
    assert pick(Autoregressive(), sampling=True) is searches.Sampling
    assert pick(CTC(), beam_size=1) is pick(CTC()) is searches.CTCSearch
    for refused in (dict(sampling=True), dict(no_repeat_ngram_size=2)):
        with pytest.raises(ConfigError, match="not for a CTC model"):
            pick(CTC(), **refused)


# --- min_decode_length ----------------------------------------------------------------------

# eos is the most likely token after bos and after every other token: unconstrained, every
# search ends at once with an empty translation.
EAGER_EOS = _table({2: {EOS_ID: 0.6, 4: 0.3, 5: 0.1}, 4: {EOS_ID: 0.7, 5: 0.3},
                    5: {EOS_ID: 0.8, 4: 0.2}})


def _eager_paths(min_length):
    """The most likely token at each step with eos banned before `min_length` tokens, and its
    log-probability: what greedy search must return (from bos: 4, then 5, 4, 5, ...)."""
    table, tokens, last, total = EAGER_EOS, [], 2, 0.0
    while True:
        row = table[last].copy()
        row[[PAD_ID, BOS_ID]] = 0
        if len(tokens) < min_length:
            row[EOS_ID] = 0
        token = int(row.argmax())
        total += math.log(table[last, token])
        if token == EOS_ID:
            return tokens, total
        tokens.append(token)
        last = token


@pytest.mark.parametrize("min_length", [0, 1, 3])
def test_min_decode_length_holds_eos_back_in_every_search(min_length):
    model = TableModel(EAGER_EOS)
    memory = {"x": tf.zeros([1, 1])}
    expected, log_prob = _eager_paths(min_length)
    assert len(expected) == min_length
    ids, scores = search(model, memory, tf.constant([12]), None, 0.0, "gnmt", 0, min_length)
    assert _tokens(ids.numpy()[0, 0]) == expected
    np.testing.assert_allclose(scores.numpy()[0, 0], log_prob, rtol=1e-5)
    for beam in (1, 3):
        ids, scores = beam_search(model, memory, tf.constant([12]), beam, 0.0, "gnmt", beam, 0,
                                  min_length)
        # The best is the greedy path here; every hypothesis has min_length tokens or more.
        assert _tokens(ids.numpy()[0, 0]) == expected
        np.testing.assert_allclose(scores.numpy()[0, 0], log_prob, rtol=1e-5)
        assert all(len(_tokens(row)) >= min_length for row in ids.numpy()[0])
    drawn, _ = search(model, {"x": tf.zeros([6, 1])}, tf.constant([12] * 6),
                      sampler(0, 1.0, 5), 0.0, "gnmt", 0, min_length)
    assert all(len(_tokens(row)) >= min_length for row in drawn.numpy()[:, 0])
    # The searches --xla_decoding compiles (run here without XLA: the rule is theirs).
    ids, scores = compiled.greedy(model, memory, tf.constant([12]), 12, 0.0, "gnmt", min_length)
    assert _tokens(ids.numpy()[0, 0]) == expected
    np.testing.assert_allclose(scores.numpy()[0, 0], log_prob, rtol=1e-5)
    ids, scores = compiled.beam(model, memory, tf.constant([12]), 12, 3, 0.0, "gnmt", 3,
                                min_length)
    assert _tokens(ids.numpy()[0, 0]) == expected
    np.testing.assert_allclose(scores.numpy()[0, 0], log_prob, rtol=1e-5)
    assert all(len(_tokens(row)) >= min_length for row in ids.numpy()[0])


def test_the_length_limit_wins_over_min_decode_length():
    # A limit of 3 tokens (eos included) leaves room for 2 before the forced eos.
    ids, _ = beam_search(TableModel(EAGER_EOS), {"x": tf.zeros([2, 1])}, tf.constant([3, 12]),
                         2, 0.0, "gnmt", 1, 0, 5)
    assert [len(_tokens(row)) for row in ids.numpy()[:, 0]] == [2, 5]


def test_a_ctc_model_takes_no_min_decode_length_above_1():
    class CTC:
        search_family, attends = "ctc", False
    assert isinstance(searches.for_model(CTC(), DecodingOptions(min_decode_length=1)),
                      searches.CTCSearch)
    with pytest.raises(ConfigError, match="--min_decode_length=2: not for a CTC model"):
        searches.for_model(CTC(), DecodingOptions(min_decode_length=2))
