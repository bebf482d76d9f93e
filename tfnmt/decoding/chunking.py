"""Translating sources longer than a model's source window (models/base.py: `source_window`) in
chunks: each long source becomes several rows of the decoding batch, and the rows' outputs are
joined back per sentence in order.

A source of L tokens (eos excluded) is cut into n = ceil(L / (W - 1)) chunks of nearly equal
length (ceil(L / n) tokens, the last one shorter), each followed by eos, so no chunk is a stub
of a few tokens. Everything is dense tensor arithmetic, with no Python-side loop and no ragged
ops, so it runs inside the exported SavedModel and converts to TFLite.
"""

import tensorflow as tf

from tfnmt.data.vocab import EOS_ID, PAD_ID

# Marks the error that --long_input=error raises in-graph, so callers can recognise it.
TOO_LONG = "longer than the source window of the model"


def _ceil_div(a, b):
    return (a + b - 1) // b


def split(source, lengths, window):
    """Cuts sources into chunks that fit the window.

    Args:
      source: int32 [B, S], eos-terminated ids padded with PAD_ID.
      lengths: int32 [B], tokens per source without eos.
      window: the most tokens (eos included) one chunk may have.
    Returns:
      (chunks int32 [N, window] eos-terminated and padded, chunk lengths int32 [N] without eos,
       sentence int32 [N]: the source row each chunk comes from, in order).
    """
    per_chunk = window - 1
    count = tf.maximum(1, _ceil_div(lengths, per_chunk))  # an empty source is one (empty) chunk
    size = _ceil_div(lengths, count)
    sentence = tf.repeat(tf.range(tf.shape(lengths)[0]), count)
    first = tf.cumsum(count, exclusive=True)
    index = tf.range(tf.shape(sentence)[0]) - tf.gather(first, sentence)  # chunk j of its sentence
    size = tf.gather(size, sentence)
    start = index * size
    chunk_lengths = tf.minimum(size, tf.gather(lengths, sentence) - start)
    position = tf.range(window)[None]
    columns = tf.minimum(start[:, None] + position, tf.shape(source)[1] - 1)
    tokens = tf.gather(tf.gather(source, sentence), columns, batch_dims=1)
    tokens = tf.where(position < chunk_lengths[:, None], tokens,
                      tf.where(position == chunk_lengths[:, None], EOS_ID, PAD_ID))
    return tokens, chunk_lengths, sentence


def join(ids, scores, sentence, batch_size):
    """Concatenates the chunks' outputs per sentence.

    Args:
      ids: int32 [N, T] per chunk, padded with PAD_ID after its end (no eos).
      scores: float32 [N].
      sentence: int32 [N] from `split`.
    Returns:
      (ids int32 [B, T'] padded with PAD_ID, scores float32 [B]: the sum of the chunks' scores).
    """
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(ids, PAD_ID), tf.int32), axis=1)
    before = tf.cumsum(lengths, exclusive=True)
    chunks = tf.math.unsorted_segment_sum(tf.ones_like(sentence), sentence, batch_size)
    first_chunk = tf.gather(tf.cumsum(chunks, exclusive=True), sentence)
    offset = before - tf.gather(before, first_chunk)  # output tokens of earlier chunks
    total = tf.math.unsorted_segment_sum(lengths, sentence, batch_size)
    # At least one column, so that all-empty outputs are still a readable tensor (LiteRT cannot
    # read a zero-sized output).
    width = tf.reduce_max(tf.concat([total, [1]], axis=0))
    position = tf.range(tf.shape(ids)[1])[None]
    valid = position < lengths[:, None]
    # Padding goes to an extra last column that is cut off, so every real token has its own cell.
    columns = tf.where(valid, offset[:, None] + position, width)
    rows = tf.broadcast_to(sentence[:, None], tf.shape(columns))
    joined = tf.scatter_nd(tf.stack([rows, columns], axis=-1), tf.where(valid, ids, PAD_ID),
                           tf.stack([batch_size, width + 1]))
    return joined[:, :width], tf.math.unsorted_segment_sum(scores, sentence, batch_size)
