"""Decoding of CTC outputs (non-autoregressive models): greedy and beam search.

Both take log-probabilities [B, L, C] over the target vocabulary plus a blank, and the number of
frames of each sentence, and return ids padded with PAD_ID and scores (greedy: [B, T] and [B];
beam: the n best, [B, n, T] and [B, n]):

- greedy: the best label of every frame, repeats merged, blanks dropped. Plain tensor ops with no
  loop, so every frame is decoded in parallel (and TFLite converts it). The score is the
  log-probability of that best alignment.
- beam: `tf.nn.ctc_beam_search_decoder`, a left-to-right prefix beam search that sums the
  alignments of each prefix. Its score is the log-probability of the labelling (summed over
  the alignments the beam kept). It runs on CPU only and has no TFLite kernel.
"""

import tensorflow as tf

from tfnmt.data.vocab import PAD_ID


def greedy(log_probs, lengths, blank_id):
    best = tf.argmax(log_probs, axis=-1, output_type=tf.int32)  # [B, L]
    frames = tf.sequence_mask(lengths, tf.shape(best)[1])
    best = tf.where(frames, best, blank_id)
    previous = tf.pad(best[:, :-1], [[0, 0], [1, 0]], constant_values=-1)
    keep = tf.logical_and(tf.not_equal(best, blank_id), tf.not_equal(best, previous))
    # Compaction without ragged ops: kept label i of a row goes to column (number kept before
    # it); dropped frames all land in one spare column that is cut off.
    width = tf.shape(best)[1]
    column = tf.where(keep, tf.cumsum(tf.cast(keep, tf.int32), axis=1) - 1, width)
    rows = tf.broadcast_to(tf.range(tf.shape(best)[0])[:, None], tf.shape(best))
    ids = tf.scatter_nd(tf.stack([rows, column], axis=-1), tf.where(keep, best, PAD_ID),
                        tf.stack([tf.shape(best)[0], width + 1]))
    ids = ids[:, : tf.reduce_max(tf.reduce_sum(tf.cast(keep, tf.int32), axis=1))]
    scores = tf.reduce_sum(tf.where(frames, tf.reduce_max(log_probs, axis=-1), 0.0), axis=1)
    return ids, scores


def beam(log_probs, lengths, beam_size, blank_id, n_best):
    """(ids int32 [B, n_best, T] padded with PAD_ID, scores float32 [B, n_best], best first)."""
    num_classes = log_probs.shape[-1]
    if blank_id != num_classes - 1:
        # TensorFlow's decoder takes the last class as the blank.
        raise ValueError(f"CTC beam search needs the blank last (id {num_classes - 1}), not {blank_id}")
    decoded, scores = tf.nn.ctc_beam_search_decoder(
        tf.transpose(log_probs, [1, 0, 2]), tf.cast(lengths, tf.int32), beam_width=beam_size,
        top_paths=n_best)
    paths = [tf.cast(tf.sparse.to_dense(path, default_value=PAD_ID), tf.int32) for path in decoded]
    width = tf.reduce_max([tf.shape(path)[1] for path in paths])
    ids = tf.stack([tf.pad(path, [[0, 0], [0, width - tf.shape(path)[1]]], constant_values=PAD_ID)
                    for path in paths], 1)
    return ids, scores
