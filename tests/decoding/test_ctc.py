"""CTC decoding (tfnmt/decoding/ctc.py): greedy (best path) and beam search (summed alignments)."""

import numpy as np
import pytest
import tensorflow as tf

from tfnmt.decoding import ctc


def test_greedy_decoding_merges_repeats_and_drops_blanks_on_hand_made_logits():
    blank = 6
    frames = [[4, 4, blank, 4, 5, 5, blank, 1], [5, blank, blank, 5, 4, 4, 4, 4]]
    lengths = tf.constant([8, 3])  # row 2: its frames after the third are padding
    log_probs = tf.nn.log_softmax(tf.one_hot(frames, 7) * 5.0 + tf.random.stateless_uniform(
        [2, 8, 7], seed=[1, 1]))
    ids, scores = ctc.greedy(log_probs, lengths, blank)
    np.testing.assert_array_equal(ids.numpy(), [[4, 4, 5, 1], [5, 0, 0, 0]])
    best = np.max(log_probs.numpy(), axis=-1)
    np.testing.assert_allclose(scores.numpy(), [best[0].sum(), best[1, :3].sum()], rtol=1e-6)


def test_greedy_decoding_equals_tensorflows_greedy_decoder_on_random_logits():
    log_probs = tf.nn.log_softmax(3.0 * tf.random.stateless_normal([16, 30, 5], seed=[2, 3]))
    lengths = tf.random.stateless_uniform([16], seed=[4, 5], minval=1, maxval=31, dtype=tf.int32)
    ids, scores = ctc.greedy(log_probs, lengths, blank_id=4)
    (reference,), negative = tf.nn.ctc_greedy_decoder(tf.transpose(log_probs, [1, 0, 2]), lengths,
                                                      blank_index=4)
    np.testing.assert_array_equal(ids.numpy(), tf.sparse.to_dense(reference).numpy())
    np.testing.assert_allclose(scores.numpy(), -negative[:, 0].numpy(), rtol=1e-5)


def test_beam_search_sums_alignments_where_greedy_takes_the_best_path():
    # Two frames, p(a) = 0.4 and p(blank) = 0.6 each: the best path is blank blank (0.36), but
    # "a" has the alignments aa, a-, -a (0.16 + 0.24 + 0.24 = 0.64).
    probs = np.full([1, 2, 6], 1e-9, np.float32)
    probs[..., 4], probs[..., 5] = 0.4, 0.6
    log_probs = tf.constant(np.log(probs))
    ids, score = ctc.greedy(log_probs, tf.constant([2]), blank_id=5)
    assert ids.shape == (1, 0) and score.numpy()[0] == pytest.approx(np.log(0.36), rel=1e-4)
    ids, score = ctc.beam(log_probs, tf.constant([2]), beam_size=3, blank_id=5, n_best=2)
    np.testing.assert_array_equal(ids.numpy(), [[[4], [0]]])  # then the empty labelling
    np.testing.assert_allclose(score.numpy()[0], np.log([0.64, 0.36]), rtol=1e-3)
