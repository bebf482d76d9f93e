"""Training objectives shared by the autoregressive models."""

import tensorflow as tf

from tfnmt.data.vocab import PAD_ID


def label_smoothed_cross_entropy(labels, logits, smoothing=0.1):
    """Mean over non-pad target tokens of the label-smoothed cross-entropy.

    labels: int [B, T] with PAD_ID where there is no token; logits: [B, T, V].
    Returns (loss, number of tokens). The smoothing mass is spread over the whole vocabulary, as
    in Szegedy et al. (2016) and fairseq.
    """
    logits = tf.cast(logits, tf.float32)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    nll = -tf.gather(log_probs, labels, batch_dims=2)
    smooth = -tf.reduce_mean(log_probs, axis=-1)
    per_token = (1.0 - smoothing) * nll + smoothing * smooth
    weights = tf.cast(tf.not_equal(labels, PAD_ID), tf.float32)
    num_tokens = tf.reduce_sum(weights)
    return tf.reduce_sum(per_token * weights) / tf.maximum(num_tokens, 1.0), num_tokens
