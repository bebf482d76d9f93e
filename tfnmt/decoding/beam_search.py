"""One beam search for every autoregressive model; greedy search is beam size 1.

The model is only touched through `decoding_memory`, `initial_state` and `step` (see
models/base.py). Finished
hypotheses are frozen with their length-penalised score; alive ones continue until they end in
eos, reach their per-sentence length limit (where eos is forced) or can no longer beat the worst
finished hypothesis of their sentence. With a width of 1 this is greedy search, except that with
a length penalty a hypothesis may go on past the most likely eos when a longer ending could still
score higher.

`next_log_probs` (the step and the tokens no hypothesis may choose) is shared with sampling.py.
"""

from typing import Any, NamedTuple

import tensorflow as tf

from tfnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from tfnmt.decoding.shared import map_rows, split_shared, tile_hypotheses, with_shared
from tfnmt.errors import ConfigError

NEG_INF = -1e9


def length_penalty(length, alpha, mode):
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


def repeated_ngram_tokens(ids, n, vocab):
    """bool [N, V]: the tokens that would complete an n-gram already in `ids` [N, t] (fairseq's
    --no-repeat-ngram-size: a hypothesis never repeats an n-gram)."""
    t = tf.shape(ids)[1]
    starts = tf.range(tf.maximum(t - n + 1, 0))  # every earlier n-gram, by its first position
    # Each earlier n-gram's first n-1 tokens, [N, J, n-1].
    prefixes = tf.gather(ids, starts[:, None] + tf.range(n - 1)[None], axis=1)
    # The last n-1 tokens; padded on the left so that a short prefix still has n-1 columns.
    tail = tf.pad(ids, [[0, 0], [n - 1, 0]], constant_values=-1)[:, t:]
    match = tf.reduce_all(tf.equal(prefixes, tail[:, None]), axis=-1)  # [N, J]
    following = tf.gather(ids, starts + n - 1, axis=1)  # [N, J]
    rows = tf.broadcast_to(tf.range(tf.shape(ids)[0])[:, None], tf.shape(following))
    hits = tf.scatter_nd(tf.stack([rows, following], axis=-1), tf.cast(match, tf.int32),
                         tf.stack([tf.shape(ids)[0], vocab]))
    return hits > 0


def _whole_chunks(width, k, chunk):
    """A chunk size near `chunk` that divides `width` (known when traced) into at least k
    chunks, so that the candidates are not copied to pad them; else `chunk`."""
    if width is not None:
        for size in range(chunk, chunk // 2, -1):
            if width % size == 0 and width >= k * size:
                return size
    return chunk


def wide_top_k(x, k, chunk=64):
    """`tf.math.top_k(x, k)` over the last axis of x [N, W], the same values and indices (ties:
    the lower index first), for a wide W and a small k: TF's CPU TopK took 2.7 ms a step on the
    beam's [32, 5 x 8,000] candidates (k 10), 7% of all decoding time; this takes under 1%.

    Each of the k largest lies in a chunk of `chunk` columns whose maximum is among the k
    largest chunk maxima (ties: the lower chunk first), else k chunk maxima would come before it;
    so only those k chunks, kept in column order for the ties, are searched."""
    static = x.shape[1] is not None
    chunk = _whole_chunks(x.shape[1], k, chunk)
    width = x.shape[1] if static else tf.shape(x)[1]
    pad = (max if static else tf.maximum)(k * chunk - width, (-width) % chunk)
    if not static or pad > 0:
        x = tf.pad(x, [[0, 0], [0, pad]], constant_values=-float("inf"))
    n = tf.shape(x)[0]
    chunks = tf.reshape(x, [n, -1, chunk])
    best = tf.sort(tf.math.top_k(tf.reduce_max(chunks, axis=-1), k).indices, axis=-1)  # [N, k]
    values, position = tf.math.top_k(
        tf.reshape(tf.gather(chunks, best, batch_dims=1), [n, k * chunk]), k)
    return values, tf.gather(best, position // chunk, batch_dims=1) * chunk + position % chunk


def prefix_lengths(prefix):
    """int32 [N]: the tokens of each row of a target prefix int32 [N, P] (PAD_ID after them)."""
    return tf.reduce_sum(tf.cast(tf.not_equal(prefix, PAD_ID), tf.int32), axis=1)


def forced_tokens(prefix, time):
    """int32 [N]: the token each row's prefix int32 [N, P] forces at step `time`; PAD_ID once
    its prefix is over."""
    padded = tf.pad(prefix, [[0, 0], [0, 1]], constant_values=PAD_ID)
    return tf.gather(padded, tf.minimum(time, tf.shape(prefix)[1]), axis=1)


def next_log_probs(model, ids, time, state, memory, limit, no_repeat_ngram_size, min_length,
                   prefix=None):
    """One step of N hypotheses: (log p(next token) float32 [N, V], the model's new state).

    `ids` int32 [N, t] are the tokens so far (bos not included). What no hypothesis may choose
    is at NEG_INF (`step_log_probs`); with `no_repeat_ngram_size` n > 0, also a token that would
    repeat an n-gram of its own; within a `prefix`, every token but the one it forces."""
    last = tf.concat([tf.fill([tf.shape(ids)[0], 1], BOS_ID), ids], axis=1)[:, -1]
    ban = None
    if no_repeat_ngram_size:
        def ban(vocab):
            return repeated_ngram_tokens(ids, no_repeat_ngram_size, vocab)
    return step_log_probs(model, last, time, state, memory, limit, min_length, ban, prefix)


def log_probs_of(model, logits):
    """float32 log-probabilities of what a model's `step` or `decode` gives: the log_softmax of
    its logits, or them as they are from a model that gives log-probabilities itself
    (`gives_log_probs`: an ensemble's mean, ensemble.py, which a softmax would renormalise)."""
    logits = tf.cast(logits, tf.float32)
    return logits if getattr(model, "gives_log_probs", False) else tf.nn.log_softmax(logits, -1)


def step_log_probs(model, last, time, state, memory, limit, min_length, ban=None, prefix=None):
    """(log p(next token) float32 [N, V], the model's new state) after the tokens `last` [N].
    At NEG_INF: pad and bos; what `ban(V)` (bool [N, V]) marks; at its length limit `limit`
    [N], every token but eos; before `min_length` tokens (--min_decode_length), eos, unless
    the limit leaves no room for them. While a row's target `prefix` (int32 [N, P], PAD_ID
    after it) lasts, every token but the one it forces, which keeps its log-probability: a
    hypothesis's score counts its prefix."""
    logits, state = model.step(last, time, state, memory)
    raw = log_probs_of(model, logits)  # [N, V]
    vocab = tf.shape(raw)[1]
    # What a row may not choose, as one of four rows of NEG_INF and 0 added to it: what no
    # step may choose, and with it every token but eos (at the length limit), eos (before
    # `min_length` tokens), or both. One [N, V] gather and add instead of a where and an add
    # for each condition: at 160 rows of 8,000 tokens each such pass is a 5 MB tensor.
    banned = tf.one_hot(PAD_ID, vocab, NEG_INF, 0.0) + tf.one_hot(BOS_ID, vocab, NEG_INF, 0.0)
    only_eos = tf.one_hot(EOS_ID, vocab, 0.0, NEG_INF)
    no_eos = tf.one_hot(EOS_ID, vocab, NEG_INF, 0.0)
    table = tf.stack([banned, banned + only_eos, banned + no_eos, banned + only_eos + no_eos])
    at_limit = tf.greater_equal(time + 1, limit)
    too_short = (tf.less(time, tf.minimum(min_length, limit - 1)) if min_length
                 else tf.zeros_like(at_limit))
    kind = tf.cast(at_limit, tf.int32) + 2 * tf.cast(too_short, tf.int32)
    # Most steps no row is at its limit or too short: then the one row, broadcast, not N.
    log_probs = tf.cond(tf.reduce_any(kind > 0), lambda: raw + tf.gather(table, kind),
                        lambda: raw + banned)
    if ban is not None:
        log_probs = tf.where(ban(vocab), NEG_INF, log_probs)
    if prefix is not None:
        # The raw log-probability, not the banned one: a prefix may repeat an n-gram.
        token = forced_tokens(prefix, time)
        forced = tf.where(tf.equal(tf.range(vocab)[None], token[:, None]), raw, NEG_INF)
        log_probs = tf.where(tf.not_equal(token, PAD_ID)[:, None], forced, log_probs)
    return log_probs, state


def strip_eos(ids):
    """eos and everything after it become padding, so callers can detokenize directly."""
    ended = tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=-1) > 0
    return tf.where(ended, PAD_ID, ids)


def loop_invariant(tensor):
    """The shape a loop variable keeps: batch and time dimensions may change inside the loop (a
    K/V cache grows); feature (last) dimensions do not, and layers need them static."""
    rank = tensor.shape.rank
    if rank <= 1:
        return tf.TensorShape([None] * rank)
    return tf.TensorShape([None] * (rank - 1) + [tensor.shape[-1]])


class BeamState(NamedTuple):
    """What the loop carries: B sentences, of which A are still searched (`active`), K beams,
    t tokens so far. A sentence leaves the active set as soon as its result is final, so the
    model only runs on the sentences still being decoded. A new loop variable is a new field
    here and its start value in `_Beam.start`."""
    time: Any             # int32 []
    active: Any           # int32 [A], the sentences still searched, ascending
    alive_scores: Any     # float32 [A, K], log-probabilities
    alive_ids: Any        # int32 [A, K, t]
    finished_scores: Any  # float32 [B, K], length-penalised
    finished_ids: Any     # int32 [B, K, t], eos last, PAD_ID after
    model_state: Any      # the model's nest, A * K rows
    memory: Any           # the decoding memory, A * K rows
    # With alignments, each hypothesis's attention rows, float32 [A or B, K, t, S]; else ().
    alive_attention: Any = ()
    finished_attention: Any = ()


class _Beam:
    """One `beam_search` call: its settings, and the pieces of its loop's step."""

    def __init__(self, model, max_length, shared, beam_size, alpha, penalty_mode, n_best,
                 no_repeat_ngram_size, alignments, min_length, prefix):
        self.model, self.max_length, self.shared = model, max_length, shared
        self.prefix = prefix
        self.min_length = min_length
        self.K, self.alpha, self.penalty_mode, self.n_best = beam_size, alpha, penalty_mode, n_best
        self.no_repeat_ngram_size, self.alignments = no_repeat_ngram_size, alignments
        self.max_steps = tf.reduce_max(max_length)

    def penalty(self, length):
        return length_penalty(length, self.alpha, self.penalty_mode)

    def start(self, memory):
        """(the loop's first BeamState, its shape invariants) for `memory` (K rows a sentence)."""
        K, batch = self.K, tf.shape(self.max_length)[0]
        start = BeamState(
            time=tf.constant(0),
            active=tf.range(batch),
            # Only the first beam is alive at the start, so the K beams do not all expand the
            # same prefix.
            alive_scores=tf.tile(tf.concat([[0.0], tf.fill([K - 1], NEG_INF)], 0)[None], [batch, 1]),
            alive_ids=tf.zeros([batch, K, 0], tf.int32),
            finished_scores=tf.fill([batch, K], NEG_INF),
            finished_ids=tf.zeros([batch, K, 0], tf.int32),
            model_state=self.model.initial_state(with_shared(memory, self.shared)),
            memory=memory)
        ids_shape = tf.TensorShape([None, K, None])
        invariants = tf.nest.map_structure(loop_invariant, start)._replace(
            alive_ids=ids_shape, finished_ids=ids_shape)
        if self.alignments:
            if not self.model.attends:
                raise ConfigError(self.model.cannot_align())
            source_length = tf.shape(memory["mask"])[1]
            empty = tf.zeros([batch, K, 0, source_length])
            start = start._replace(alive_attention=empty, finished_attention=empty)
            attention_shape = tf.TensorShape([None, K, None, None])
            invariants = invariants._replace(alive_attention=attention_shape,
                                             finished_attention=attention_shape)
        return start, invariants

    def cond(self, s):
        return tf.logical_and(s.time < self.max_steps, tf.size(s.active) > 0)

    def body(self, s):
        limits = tf.gather(self.max_length, s.active)  # [A]
        top_scores, top_ids, token, beam_index, state, attention = self.candidates(s, limits)
        is_eos = tf.equal(token, EOS_ID)
        alive_scores, origin, alive_ids, alive_attention = self.alive(
            top_scores, top_ids, is_eos, beam_index, attention)
        finished_scores, finished = self.finished(s, top_scores, top_ids, is_eos, attention)
        is_done = self.done(alive_scores, finished_scores, limits)
        (active_after, alive_scores, alive_ids, alive_attention, state,
         memory_after) = self.survivors(s, is_done, origin, alive_scores, alive_ids,
                                        alive_attention, state)
        return (BeamState(
            time=s.time + 1, active=active_after, alive_scores=alive_scores, alive_ids=alive_ids,
            model_state=state, memory=memory_after, alive_attention=alive_attention,
            **finished),)

    def candidates(self, s, limits):
        """The 2K best one-token extensions of each active sentence's K hypotheses: their
        scores [A, 2K], ids [A, 2K, t+1], new token and the beam each extends [A, 2K], the
        model's new state (A * K rows) and, with alignments, their attention [A, 2K, t+1, S]."""
        K, active = self.K, tf.shape(s.active)[0]
        log_probs, state = next_log_probs(self.model, tf.reshape(s.alive_ids, [active * K, -1]),
                                          s.time, s.model_state, with_shared(s.memory, self.shared),
                                          tf.repeat(limits, K), self.no_repeat_ngram_size,
                                          self.min_length, self.hypotheses_prefix(s.active))
        vocab = log_probs.shape[1] or tf.shape(log_probs)[1]  # known: wide_top_k pads less
        candidates = tf.reshape(s.alive_scores, [-1, 1]) + log_probs
        candidates = tf.reshape(candidates, [active, K * vocab])
        top_scores, top_index = wide_top_k(candidates, 2 * K)
        beam_index, token = top_index // vocab, top_index % vocab
        top_ids = tf.concat([tf.gather(s.alive_ids, beam_index, batch_dims=1), token[:, :, None]], 2)
        attention = ()
        if self.alignments:
            rows = tf.reshape(tf.cast(self.model.latest_attention()[:, -1], tf.float32),
                              [active, K, 1, -1])  # [A, K, 1, S]
            attention = tf.gather(tf.concat([s.alive_attention, rows], axis=2), beam_index,
                                  batch_dims=1)  # [A, 2K, t+1, S], as top_ids
        return top_scores, top_ids, token, beam_index, state, attention

    def hypotheses_prefix(self, active):
        """The prefix of each of the active sentences' K hypotheses, or None."""
        if self.prefix is None:
            return None
        return tf.repeat(tf.gather(self.prefix, active), self.K, axis=0)

    def alive(self, top_scores, top_ids, is_eos, beam_index, attention):
        """The best K candidates that did not end: their scores, the beam each came from,
        their ids and attention."""
        alive_candidate_scores = tf.where(is_eos, NEG_INF, top_scores)
        alive_scores, keep = tf.math.top_k(alive_candidate_scores, k=self.K)
        origin = tf.gather(beam_index, keep, batch_dims=1)  # [A, K], the beam each came from
        alive_ids = tf.gather(top_ids, keep, batch_dims=1)
        alive_attention = tf.gather(attention, keep, batch_dims=1) if self.alignments else ()
        return alive_scores, origin, alive_ids, alive_attention

    def finished(self, s, top_scores, top_ids, is_eos, attention):
        """The old finished set merged with the candidates that just ended, the best K kept:
        (the active sentences' finished scores [A, K], the BeamState fields of every
        sentence's). Only the active sentences' rows change."""
        penalised = top_scores / self.penalty(s.time + 1)
        ended_scores = tf.where(tf.logical_and(is_eos, top_scores > NEG_INF / 2), penalised, NEG_INF)
        padded_finished = tf.pad(s.finished_ids, [[0, 0], [0, 0], [0, 1]], constant_values=PAD_ID)
        all_ids = tf.concat([tf.gather(padded_finished, s.active), top_ids], axis=1)
        all_scores = tf.concat([tf.gather(s.finished_scores, s.active), ended_scores], axis=1)
        finished_scores, best = tf.math.top_k(all_scores, k=self.K)
        where = s.active[:, None]
        finished = dict(
            finished_scores=tf.tensor_scatter_nd_update(s.finished_scores, where, finished_scores),
            finished_ids=tf.tensor_scatter_nd_update(
                padded_finished, where, tf.gather(all_ids, best, batch_dims=1)))
        if self.alignments:
            frozen = tf.pad(s.finished_attention, [[0, 0], [0, 0], [0, 1], [0, 0]])
            finished["finished_attention"] = tf.tensor_scatter_nd_update(
                frozen, where, tf.gather(tf.concat([tf.gather(frozen, s.active), attention],
                                                   axis=1), best, batch_dims=1))
        return finished_scores, finished

    def done(self, alive_scores, finished_scores, limits):
        """bool [A]: no alive hypothesis can beat the sentence's n_best-th finished one. Only
        the n_best best finished are returned, and extending a hypothesis never raises its
        log-probability, so its score is at most that over the largest length penalty."""
        best_possible = alive_scores[:, 0] / self.penalty(limits)
        kept_finished = finished_scores[:, self.n_best - 1]
        nothing_alive = alive_scores[:, 0] <= NEG_INF / 2
        return tf.logical_or(nothing_alive, tf.logical_and(kept_finished > NEG_INF / 2,
                                                           kept_finished >= best_possible))

    def survivors(self, s, is_done, origin, alive_scores, alive_ids, alive_attention, state):
        """What the next step searches: (active, alive scores, ids and attention, the model's
        state, the memory), every hypothesis with the state of the beam it extends; the
        sentences whose result is final leave the batch."""
        K, active = self.K, tf.shape(s.active)[0]

        def state_rows(sentences):
            # Every hypothesis of `sentences` takes the state of the beam it extends.
            return tf.reshape(tf.gather(origin, sentences) + sentences[:, None] * K, [-1])

        def carry_on():
            return (s.active, alive_scores, alive_ids, alive_attention,
                    tf.nest.map_structure(lambda x: tf.gather(x, state_rows(tf.range(active))),
                                          state), s.memory)

        def drop_done():
            # The same, for the sentences whose result is not final; the others leave the batch.
            remaining = tf.cast(tf.where(tf.logical_not(is_done))[:, 0], tf.int32)
            memory_rows = tf.reshape(remaining[:, None] * K + tf.range(K)[None], [-1])
            return (tf.gather(s.active, remaining), tf.gather(alive_scores, remaining),
                    tf.gather(alive_ids, remaining),
                    tf.gather(alive_attention, remaining) if self.alignments else (),
                    tf.nest.map_structure(lambda x: tf.gather(x, state_rows(remaining)), state),
                    map_rows(s.memory, lambda x: tf.gather(x, memory_rows),
                             lambda x: tf.gather(x, remaining)))

        return tf.cond(tf.reduce_any(is_done), drop_done, carry_on)


def beam_search(model, memory, max_length, beam_size, alpha, penalty_mode, n_best,
                no_repeat_ngram_size, min_length, alignments=False, prefix=None):
    """Decodes a batch.

    Args:
      model: a Seq2SeqModel.
      memory: the encoder output nest for B sentences.
      max_length: int32 [B], the most tokens (eos included) to generate per sentence.
      min_length: the fewest tokens (eos not included) before eos may end a hypothesis.
      prefix: None, or int32 [B, P], each sentence's target prefix (PAD_ID after it), which
        every hypothesis starts with (`step_log_probs`).
    Returns:
      ids: int32 [B, n_best, T], eos and padding as PAD_ID after the hypothesis ends;
      scores: float32 [B, n_best], length-penalised log-probabilities, best first;
      with `alignments`, also attention: float32 [B, n_best, T, S], row t the model's attention
      (`latest_attention`) when it chose token t, 0 from its eos on; a separate trace, so decoding without them carries nothing.
    """
    if n_best > beam_size:
        raise ValueError(f"n_best={n_best} exceeds beam_size={beam_size}")
    memory, shared = split_shared(model.decoding_memory(memory))
    memory = tile_hypotheses(memory, beam_size)
    beam = _Beam(model, max_length, shared, beam_size, alpha, penalty_mode, n_best,
                 no_repeat_ngram_size, alignments, min_length, prefix)
    start, invariants = beam.start(memory)
    end = tf.while_loop(beam.cond, beam.body, (start,), shape_invariants=(invariants,),
                        maximum_iterations=beam.max_steps)[0]
    ids = strip_eos(end.finished_ids[:, :n_best])
    if not alignments:
        return ids, end.finished_scores[:, :n_best]
    real = tf.cast(tf.not_equal(ids, PAD_ID), tf.float32)[..., None]
    return ids, end.finished_scores[:, :n_best], end.finished_attention[:, :n_best] * real
