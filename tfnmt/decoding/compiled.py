"""Beam search and greedy search compiled by XLA (--xla_decoding): the same searches as
beam_search.py and sampling.py, written so that every tensor keeps one shape for a whole batch.

XLA compiles a function for fixed shapes and fuses its hundreds of small ops per step into a
few kernels, where TensorFlow's executor pays for each op (decoding one sentence at beam 5 is
mostly that cost). So, unlike the dynamic searches:
- the source is padded to a multiple of SOURCE_BUCKET pieces, and the searches run for at most
  `steps` tokens, the length limit of the longest source that width allows; every tensor that
  grows with the output is allocated at that length once (the model's `fixed_initial_state`,
  the ids) and filled in place, position `time` at step `time`;
- sentences whose result is final stay in the batch, frozen, instead of leaving it.
XLA compiles once per (batch size, padded source width) and keeps it: the first batch of each
such shape pays the compilation (seconds: docs/decoding.md), every later one runs compiled.

The searches stop, freeze and score exactly as the dynamic ones do; the translations agree
with them up to floating-point rounding, which XLA's fused kernels order differently.
"""

import tensorflow as tf

from tfnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from tfnmt.decoding.beam_search import (NEG_INF, length_penalty, max_lengths, step_log_probs,
                                        strip_eos, wide_top_k)
from tfnmt.decoding.shared import split_shared, tile_hypotheses, with_shared

# Source widths are padded up to a multiple of this: fewer shapes to compile, at the cost of a
# few padded positions per batch.
SOURCE_BUCKET = 8


def padded_source(source):
    """int32 [B, S] -> [B, S'] with S' the next multiple of SOURCE_BUCKET, PAD_ID after."""
    width = tf.shape(source)[1]
    return tf.pad(source, [[0, 0], [0, (-width) % SOURCE_BUCKET]], constant_values=PAD_ID)


def most_steps_of(options, source_width):
    """The longest length limit (eos included) of a source of `source_width` positions (eos
    included, a scalar tensor): beam_search.max_lengths of the longest source that fits."""
    return max_lengths(tf.maximum(source_width - 1, 0)[None], options.max_length_ratio,
                       options.max_length_offset, options.max_decode_length)[0]


def _last_tokens(ids, time):
    """The token each row chose at the step before `time` (bos at the first), ids [N, T]."""
    before = tf.gather(ids, tf.maximum(time - 1, 0), axis=1)
    return tf.where(time > 0, before, BOS_ID)


def _write(ids, time, token):
    """ids [..., T] with position `time` set to `token` [...]."""
    at = tf.equal(tf.range(tf.shape(ids)[-1]), time)
    return tf.where(at, token[..., None], ids)


def greedy(model, memory, max_length, steps, alpha, penalty_mode, min_length, prefix=None):
    """sampling.search with `choose=None`: (ids int32 [B, 1, steps], scores float32 [B, 1])."""
    batch = tf.shape(max_length)[0]
    memory, shared = split_shared(model.decoding_memory(memory))
    rows = with_shared(memory, shared)

    def body(time, ids, scores, done, state):
        log_probs, state = step_log_probs(model, _last_tokens(ids, time), time, state, rows,
                                          max_length, min_length, prefix=prefix)
        token = tf.where(done, PAD_ID, tf.argmax(log_probs, axis=-1, output_type=tf.int32))
        chosen = tf.where(done, 0.0, tf.gather(log_probs, token, batch_dims=1))
        return (time + 1, _write(ids, time, token), scores + chosen,
                done | tf.equal(token, EOS_ID), state)

    def cond(time, ids, scores, done, state):
        return tf.logical_and(time < tf.reduce_max(max_length),
                              tf.logical_not(tf.reduce_all(done)))

    start = (tf.constant(0), tf.fill([batch, steps], PAD_ID), tf.zeros([batch]),
             tf.zeros([batch], tf.bool), model.fixed_initial_state(rows, steps))
    _, ids, scores, _, _ = tf.while_loop(cond, body, start)
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(ids, PAD_ID), tf.int32), axis=1)
    scores = scores / length_penalty(lengths, alpha, penalty_mode)
    return strip_eos(ids)[:, None], scores[:, None]


def beam(model, memory, max_length, steps, beam_size, alpha, penalty_mode, n_best,
         min_length, prefix=None):
    """beam_search.beam_search without alignments or n-gram bans: (ids int32 [B, n_best,
    steps], scores float32 [B, n_best])."""
    K, batch = beam_size, tf.shape(max_length)[0]
    memory, shared = split_shared(model.decoding_memory(memory))
    rows = with_shared(tile_hypotheses(memory, K), shared)
    limits = tf.repeat(max_length, K)
    prefix = None if prefix is None else tf.repeat(prefix, K, axis=0)

    def body(time, alive_scores, alive_ids, finished_scores, finished_ids, done, state):
        ids = tf.reshape(alive_ids, [batch * K, steps])
        log_probs, state = step_log_probs(model, _last_tokens(ids, time), time, state, rows,
                                          limits, min_length, prefix=prefix)
        vocab = log_probs.shape[1] or tf.shape(log_probs)[1]
        candidates = tf.reshape(tf.reshape(alive_scores, [-1, 1]) + log_probs, [batch, K * vocab])
        top_scores, top_index = wide_top_k(candidates, 2 * K)
        beam_index, token = top_index // vocab, top_index % vocab
        top_ids = _write(tf.gather(alive_ids, beam_index, batch_dims=1), time, token)
        is_eos = tf.equal(token, EOS_ID)
        new_alive, keep = tf.math.top_k(tf.where(is_eos, NEG_INF, top_scores), k=K)
        origin = tf.gather(beam_index, keep, batch_dims=1)  # [B, K], the beam each came from
        new_alive_ids = tf.gather(top_ids, keep, batch_dims=1)
        penalised = top_scores / length_penalty(time + 1, alpha, penalty_mode)
        ended = tf.where(tf.logical_and(is_eos, top_scores > NEG_INF / 2), penalised, NEG_INF)
        new_finished, best = tf.math.top_k(tf.concat([finished_scores, ended], axis=1), k=K)
        new_finished_ids = tf.gather(tf.concat([finished_ids, top_ids], axis=1), best,
                                     batch_dims=1)
        # A sentence whose result was final before this step keeps everything as it was.
        frozen = done[:, None]
        alive_scores = tf.where(frozen, alive_scores, new_alive)
        finished_scores = tf.where(frozen, finished_scores, new_finished)
        alive_ids = tf.where(frozen[..., None], alive_ids, new_alive_ids)
        finished_ids = tf.where(frozen[..., None], finished_ids, new_finished_ids)
        best_possible = alive_scores[:, 0] / length_penalty(max_length, alpha, penalty_mode)
        kept = finished_scores[:, n_best - 1]
        done = done | (alive_scores[:, 0] <= NEG_INF / 2) | (
            (kept > NEG_INF / 2) & (kept >= best_possible))
        state_rows = tf.reshape(origin + tf.range(batch)[:, None] * K, [-1])
        state = tf.nest.map_structure(
            lambda x: tf.ensure_shape(tf.gather(x, state_rows), x.shape), state)
        return time + 1, alive_scores, alive_ids, finished_scores, finished_ids, done, state

    def cond(time, *rest):
        return tf.logical_and(time < tf.reduce_max(max_length),
                              tf.logical_not(tf.reduce_all(rest[-2])))

    first = tf.concat([[0.0], tf.fill([K - 1], NEG_INF)], 0)
    empty = tf.fill([batch, K, steps], PAD_ID)
    start = (tf.constant(0), tf.tile(first[None], [batch, 1]), empty,
             tf.fill([batch, K], NEG_INF), empty, tf.zeros([batch], tf.bool),
             model.fixed_initial_state(rows, steps))
    end = tf.while_loop(cond, body, start)
    return strip_eos(end[4][:, :n_best]), end[3][:, :n_best]
