"""Training objectives: label-smoothed cross-entropy (autoregressive models) and CTC
(non-autoregressive models)."""

import tensorflow as tf

from tfnmt.data.vocab import PAD_ID, UNK_ID


def label_smoothed_cross_entropy(labels, logits, smoothing=0.1):
    """Mean over non-pad target tokens of the label-smoothed cross-entropy.

    labels: int [B, T] with PAD_ID where there is no token; logits: [B, T, V].
    Returns (loss, number of tokens). The smoothing mass is spread over the whole vocabulary, as
    in Szegedy et al. (2016) and fairseq.
    """
    per_token = _smoothed_token_losses(labels, tf.cast(logits, tf.float32), smoothing)
    weights = tf.cast(tf.not_equal(labels, PAD_ID), tf.float32)
    num_tokens = tf.reduce_sum(weights)
    return tf.reduce_sum(per_token * weights) / tf.maximum(num_tokens, 1.0), num_tokens


def _smoothed_token_losses(labels, logits, smoothing):
    """[B, T]: (1 - s) (lse - z_y) + s (lse - mean z), with lse = log sum exp z.

    The gradient is written out, softmax(z) - (1 - s) onehot(y) - s / V, because the one that
    TensorFlow derives through log_softmax, the gather and the mean holds several [B, T, V]
    tensors at once, and at 4,096 tokens x 8k pieces each is 131 MB: the largest tensors of
    training. The forward's softmax is kept for the gradient rather than computed again, and lse
    is taken from it as max z - log max softmax(z), which cannot underflow (the largest
    probability is at least 1 / V): each pass over such a tensor costs as much as a good part of
    the output layer's products (docs/benchmarks.md, "The loss in fewer passes")."""

    @tf.custom_gradient
    def losses(logits):
        probs = tf.nn.softmax(logits)
        lse = tf.reduce_max(logits, axis=-1) - tf.math.log(tf.reduce_max(probs, axis=-1))
        nll = lse - tf.gather(logits, labels, batch_dims=2)
        smooth = lse - tf.reduce_mean(logits, axis=-1)

        def grad(upstream):  # from probs alone: holding logits too would keep both alive
            vocab = tf.shape(probs)[-1]
            upstream = tf.reshape(upstream, [-1, 1])
            flat = (tf.reshape(probs, [-1, vocab]) * upstream
                    - upstream * (smoothing / tf.cast(vocab, tf.float32)))
            rows = tf.range(tf.shape(flat)[0])
            flat = tf.tensor_scatter_nd_sub(
                flat, tf.stack([rows, tf.reshape(tf.cast(labels, tf.int32), [-1])], axis=1),
                (1.0 - smoothing) * upstream[:, 0])
            return tf.reshape(flat, tf.shape(probs))

        return (1.0 - smoothing) * nll + smoothing * smooth, grad

    return losses(logits)


def ctc_min_frames(labels):
    """Frames a CTC alignment of each label sequence needs: its length plus one blank between
    every two equal neighbours. labels: int [B, T], PAD_ID after the end."""
    real = tf.not_equal(labels, PAD_ID)
    repeats = tf.logical_and(real[:, 1:], tf.equal(labels[:, 1:], labels[:, :-1]))
    return (tf.reduce_sum(tf.cast(real, tf.int32), axis=1)
            + tf.reduce_sum(tf.cast(repeats, tf.int32), axis=1))


def ctc_loss(labels, logits, logit_lengths):
    """Mean over target tokens of the CTC negative log-likelihood (Graves et al. 2006).

    labels: int [B, T], PAD_ID after the end; logits: [B, L, C] whose last class, C - 1, is the
    blank (TensorFlow's CTCLoss kernel's convention); logit_lengths: int [B], the frames of each
    sentence.
    Returns (loss, number of target tokens, number of dropped pairs). A pair whose labels need
    more frames than it has (`ctc_min_frames`) has no alignment: its loss would be infinite. It
    is left out of the loss and of the token count, and counted as dropped; its labels are
    replaced by the one-label sequence <unk> (which one frame can hold) before the loss is
    computed, so neither the loss nor its gradient ever sees an infinity. Empty label sequences
    (which TensorFlow's CTC kernel refuses) are dropped the same way.
    """
    labels = tf.cast(labels, tf.int32)
    logit_lengths = tf.cast(logit_lengths, tf.int32)
    needed = ctc_min_frames(labels)
    feasible = tf.logical_and(needed <= logit_lengths, needed > 0)
    real = tf.not_equal(labels, PAD_ID)
    kept = tf.logical_and(real, feasible[:, None])
    placeholder = tf.logical_and(tf.logical_not(feasible)[:, None],
                                 tf.equal(tf.range(tf.shape(labels)[1]), 0)[None])
    labels = tf.where(placeholder, UNK_ID, labels)
    indices = tf.where(tf.logical_or(kept, placeholder))
    # Sparse labels select TensorFlow's CTCLoss kernel, about 7x faster on CPU than the dense
    # (pure-op) implementation at Multi30k sizes.
    sparse = tf.SparseTensor(indices, tf.gather_nd(labels, indices),
                             tf.cast(tf.shape(labels), tf.int64))
    # The v1 function calls the kernel directly: `tf.nn.ctc_loss` slices the [B, L, C] logits
    # into three and concatenates them to move its `blank_index` last, and the gradients of those
    # slices are three more tensors of that size (8% of a CTC model's training step).
    per_sentence = tf.compat.v1.nn.ctc_loss(sparse, tf.cast(logits, tf.float32), logit_lengths,
                                            time_major=False)
    per_sentence = tf.where(feasible, per_sentence, 0.0)
    num_tokens = tf.reduce_sum(tf.cast(kept, tf.float32))
    dropped = tf.reduce_sum(tf.cast(tf.logical_not(feasible), tf.float32))
    return tf.reduce_sum(per_sentence) / tf.maximum(num_tokens, 1.0), num_tokens, dropped
