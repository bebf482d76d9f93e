"""One beam search for every autoregressive model; greedy search is beam size 1.

The model is only touched through `initial_state` and `step` (see models/base.py). Finished
hypotheses are frozen with their length-penalised score; alive ones continue until they end in
eos, reach their per-sentence length limit (where eos is forced) or can no longer beat the worst
finished hypothesis of their sentence.
"""

import tensorflow as tf

from tfnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID

NEG_INF = -1e9


def length_penalty(length, alpha, mode="gnmt"):
    """GNMT's ((5 + |y|) / 6) ** alpha (Wu et al. 2016), or |y| ** alpha ("length")."""
    length = tf.cast(length, tf.float32)
    if mode == "gnmt":
        return tf.pow((5.0 + length) / 6.0, alpha)
    if mode == "length":
        return tf.pow(length, alpha)
    raise ValueError(f"unknown length penalty mode {mode!r}")


def max_lengths(source_lengths, ratio, offset, cap):
    """Per-sentence decoding limit: min(cap, ratio * source length + offset), at least 1."""
    limit = tf.cast(tf.math.ceil(tf.cast(source_lengths, tf.float32) * ratio), tf.int32) + offset
    return tf.clip_by_value(limit, 1, cap)


def _tile(tensor, beam_size):
    """[B, ...] -> [B * K, ...], each row repeated K times consecutively."""
    return tf.repeat(tensor, beam_size, axis=0)


def _loop_invariant(tensor):
    # Batch and time dimensions of a model's state may change inside the loop (a K/V cache
    # grows); feature (last) dimensions do not, and layers need them static.
    rank = tensor.shape.rank
    if rank <= 1:
        return tf.TensorShape([None] * rank)
    return tf.TensorShape([None] * (rank - 1) + [tensor.shape[-1]])


def beam_search(model, memory, max_length, beam_size=4, alpha=0.6, penalty_mode="gnmt",
                n_best=1):
    """Decodes a batch.

    Args:
      model: a Seq2SeqModel.
      memory: the encoder output nest for B sentences.
      max_length: int32 [B], the most tokens (eos included) to generate per sentence.
    Returns:
      ids: int32 [B, n_best, T], eos and padding as PAD_ID after the hypothesis ends;
      scores: float32 [B, n_best], length-penalised log-probabilities.
    """
    if n_best > beam_size:
        raise ValueError(f"n_best={n_best} exceeds beam_size={beam_size}")
    K = beam_size
    batch = tf.shape(max_length)[0]
    memory = tf.nest.map_structure(lambda t: _tile(t, K), memory)
    state = model.initial_state(memory)
    max_steps = tf.reduce_max(max_length)
    limit = tf.repeat(max_length, K)  # [B*K]

    # Only the first beam is alive at the start, so the K beams do not all expand the same prefix.
    alive_scores = tf.tile(tf.concat([[0.0], tf.fill([K - 1], NEG_INF)], 0)[None], [batch, 1])
    alive_ids = tf.zeros([batch, K, 0], tf.int32)
    finished_ids = tf.zeros([batch, K, 0], tf.int32)
    finished_scores = tf.fill([batch, K], NEG_INF)
    last = tf.fill([batch * K], BOS_ID)

    def cond(t, alive_scores, alive_ids, finished_scores, finished_ids, last, state):
        # Stop early when no alive hypothesis can beat the worst finished one of its sentence.
        best_possible = alive_scores[:, 0] / length_penalty(max_length, alpha, penalty_mode)
        worst_finished = tf.reduce_min(finished_scores, axis=1)
        nothing_alive = alive_scores[:, 0] <= NEG_INF / 2
        done = tf.logical_or(nothing_alive, tf.logical_and(worst_finished > NEG_INF / 2,
                                                           worst_finished >= best_possible))
        return tf.logical_and(t < max_steps, tf.logical_not(tf.reduce_all(done)))

    def body(t, alive_scores, alive_ids, finished_scores, finished_ids, last, state):
        logits, state = model.step(last, t, state, memory)
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)  # [B*K, V]
        vocab = tf.shape(log_probs)[1]
        banned = tf.one_hot(PAD_ID, vocab, NEG_INF, 0.0) + tf.one_hot(BOS_ID, vocab, NEG_INF, 0.0)
        # At its length limit a hypothesis may only end.
        at_limit = tf.greater_equal(t + 1, limit)[:, None]
        only_eos = tf.one_hot(EOS_ID, vocab, 0.0, NEG_INF)[None]
        log_probs += banned[None] + tf.where(at_limit, only_eos, tf.zeros_like(only_eos))
        candidates = tf.reshape(alive_scores, [-1, 1]) + log_probs
        candidates = tf.reshape(candidates, [batch, K * vocab])
        top_scores, top_index = tf.math.top_k(candidates, k=2 * K)
        beam_index, token = top_index // vocab, top_index % vocab
        top_ids = tf.concat([tf.gather(alive_ids, beam_index, batch_dims=1), token[:, :, None]], 2)
        is_eos = tf.equal(token, EOS_ID)

        # Alive: the best K candidates that did not end.
        alive_candidate_scores = tf.where(is_eos, NEG_INF, top_scores)
        new_alive_scores, keep = tf.math.top_k(alive_candidate_scores, k=K)
        new_alive_ids = tf.gather(top_ids, keep, batch_dims=1)
        origin = tf.gather(beam_index, keep, batch_dims=1) + tf.range(batch)[:, None] * K
        origin = tf.reshape(origin, [-1])
        state = tf.nest.map_structure(lambda s: tf.gather(s, origin), state)
        new_last = tf.reshape(new_alive_ids[:, :, -1], [-1])

        # Finished: merge the old finished set with candidates that just ended; keep the best K.
        penalised = top_scores / length_penalty(t + 1, alpha, penalty_mode)
        ended_scores = tf.where(tf.logical_and(is_eos, top_scores > NEG_INF / 2), penalised, NEG_INF)
        padded_finished = tf.pad(finished_ids, [[0, 0], [0, 0], [0, 1]], constant_values=PAD_ID)
        all_ids = tf.concat([padded_finished, top_ids], axis=1)
        all_scores = tf.concat([finished_scores, ended_scores], axis=1)
        new_finished_scores, best = tf.math.top_k(all_scores, k=K)
        new_finished_ids = tf.gather(all_ids, best, batch_dims=1)
        return (t + 1, new_alive_scores, new_alive_ids, new_finished_scores, new_finished_ids,
                new_last, state)

    loop_vars = (tf.constant(0), alive_scores, alive_ids, finished_scores, finished_ids, last, state)
    ids_shape = tf.TensorShape([None, K, None])
    invariants = (tf.TensorShape([]), tf.TensorShape([None, K]), ids_shape,
                  tf.TensorShape([None, K]), ids_shape, tf.TensorShape([None]),
                  tf.nest.map_structure(_loop_invariant, state))
    _, _, _, finished_scores, finished_ids, _, _ = tf.while_loop(
        cond, body, loop_vars, shape_invariants=invariants, maximum_iterations=max_steps)
    ids = finished_ids[:, :n_best]
    # eos and everything after it become padding, so callers can detokenize directly.
    ended = tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=-1) > 0
    ids = tf.where(ended, PAD_ID, ids)
    return ids, finished_scores[:, :n_best]
