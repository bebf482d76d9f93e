"""Greedy search and sampling for autoregressive models: one hypothesis per sentence, one token
per step, until eos or the sentence's length limit (`next_log_probs` bans the same tokens as in
beam search).

- greedy: the most likely token (`choose=None`).
- sampling: a token drawn from the model's distribution, limited to the k most likely (top-k)
  and sharpened or flattened by a temperature, as fairseq's and OpenNMT-tf's sampling for
  back-translation (Edunov et al. 2018). With k = 1 it is greedy search. Draws are stateless
  (`tf.random.stateless_categorical` seeded with (seed, step)), so the same seed, input and
  batch give the same output, in-process and in an export.
"""

from typing import Any, NamedTuple

import tensorflow as tf

from tfnmt.data.vocab import EOS_ID, PAD_ID
from tfnmt.decoding.shared import split_shared, with_shared
from tfnmt.decoding.beam_search import (NEG_INF, length_penalty, loop_invariant, next_log_probs,
                                        strip_eos)


class SampleState(NamedTuple):
    """What the loop carries for B sentences with t tokens so far, of which A are still being
    decoded (`active`): a sentence leaves the batch once it has drawn eos, so the model only
    runs on the others."""
    time: Any         # int32 []
    active: Any       # int32 [A], the sentences still decoded, ascending
    ids: Any          # int32 [B, t], PAD_ID after eos
    scores: Any       # float32 [B], log-probability of the tokens so far (eos included)
    model_state: Any  # the model's nest, A rows
    memory: Any       # the decoding memory, A rows


def sampler(topk, temperature, seed):
    """choose(log_probs [A, V], step, active [A], B) -> tokens [A]: for each active sentence, a
    draw among the `topk` most likely tokens (0 = all) of the distribution at `temperature`.
    The draws are made for all B rows, so a sentence's draw does not depend on which others
    are still being decoded."""
    def choose(log_probs, time, active, batch):
        logits = log_probs / temperature
        if topk:
            kth = tf.math.top_k(logits, k=tf.minimum(topk, tf.shape(logits)[1]))[0][:, -1:]
            logits = tf.where(logits < kth, NEG_INF, logits)
        every_row = tf.scatter_nd(active[:, None], logits, [batch, tf.shape(logits)[1]])
        drawn = tf.random.stateless_categorical(every_row, 1, seed=tf.stack([seed, time]),
                                                dtype=tf.int32)[:, 0]
        return tf.gather(drawn, active)
    return choose


def search(model, memory, max_length, choose, alpha, penalty_mode, no_repeat_ngram_size,
           min_length, prefix=None):
    """One translation per sentence, token by token.

    Args:
      memory: the encoder output nest for B sentences.
      max_length: int32 [B], the most tokens (eos included) per sentence.
      choose: `sampler(...)`, or None for the most likely token.
      min_length: the fewest tokens (eos not included) before eos may be chosen.
      prefix: None, or int32 [B, P]: each sentence's target prefix (PAD_ID after it), forced.
    Returns:
      ids int32 [B, 1, T] padded with PAD_ID (eos removed), scores float32 [B, 1]: the
      length-penalised log-probability of the translation, as beam search scores one.
    """
    batch = tf.shape(max_length)[0]
    memory, shared = split_shared(model.decoding_memory(memory))

    def cond(s):
        return tf.logical_and(s.time < tf.reduce_max(max_length), tf.size(s.active) > 0)

    def body(s):
        log_probs, state = next_log_probs(model, tf.gather(s.ids, s.active), s.time,
                                          s.model_state, with_shared(s.memory, shared),
                                          tf.gather(max_length, s.active), no_repeat_ngram_size,
                                          min_length,
                                          None if prefix is None else tf.gather(prefix, s.active))
        if choose is None:
            token = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
        else:
            token = choose(log_probs, s.time, s.active, batch)
        chosen = tf.gather(log_probs, token, batch_dims=1)
        where = s.active[:, None]
        column = tf.tensor_scatter_nd_update(tf.fill([batch], PAD_ID), where, token)
        ended = tf.equal(token, EOS_ID)  # at its length limit, eos is the only choice

        def drop_ended():
            remaining = tf.cast(tf.where(tf.logical_not(ended))[:, 0], tf.int32)
            return (tf.gather(s.active, remaining),
                    tf.nest.map_structure(lambda x: tf.gather(x, remaining), (state, s.memory)))

        active, (state, memory_after) = tf.cond(tf.reduce_any(ended), drop_ended,
                                                lambda: (s.active, (state, s.memory)))
        return (SampleState(
            time=s.time + 1, active=active, ids=tf.concat([s.ids, column[:, None]], axis=1),
            scores=tf.tensor_scatter_nd_add(s.scores, where, chosen), model_state=state,
            memory=memory_after),)

    start = SampleState(time=tf.constant(0), active=tf.range(batch),
                        ids=tf.zeros([batch, 0], tf.int32), scores=tf.zeros([batch]),
                        model_state=model.initial_state(with_shared(memory, shared)),
                        memory=memory)
    invariants = tf.nest.map_structure(loop_invariant, start)._replace(
        ids=tf.TensorShape([None, None]))
    end = tf.while_loop(cond, body, (start,), shape_invariants=(invariants,))[0]
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(end.ids, PAD_ID), tf.int32), axis=1)
    scores = end.scores / length_penalty(lengths, alpha, penalty_mode)
    return strip_eos(end.ids)[:, None], scores[:, None]
