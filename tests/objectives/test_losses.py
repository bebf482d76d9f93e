import numpy as np
import tensorflow as tf

from tfnmt.objectives.losses import label_smoothed_cross_entropy


def test_without_smoothing_equals_masked_cross_entropy():
    logits = tf.random.stateless_normal([2, 3, 7], seed=[1, 2])
    labels = tf.constant([[4, 5, 0], [6, 0, 0]])
    loss, tokens = label_smoothed_cross_entropy(labels, logits, smoothing=0.0)
    ce = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True).numpy()
    expected = (ce[0, 0] + ce[0, 1] + ce[1, 0]) / 3
    assert tokens.numpy() == 3
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-5)


def test_padding_logits_do_not_matter_and_smoothing_raises_a_confident_loss():
    labels = tf.constant([[1, 0]])
    logits = tf.constant([[[0.0, 20.0, 0.0], [5.0, -3.0, 1.0]]])
    other = tf.constant([[[0.0, 20.0, 0.0], [-9.0, 9.0, 0.0]]])
    a, _ = label_smoothed_cross_entropy(labels, logits, 0.1)
    b, _ = label_smoothed_cross_entropy(labels, other, 0.1)
    plain, _ = label_smoothed_cross_entropy(labels, logits, 0.0)
    assert a.numpy() == b.numpy()
    assert a.numpy() > plain.numpy()


def _matches_the_derived_loss(labels, logits, smoothing):
    """The loss and its gradient equal the smoothed loss through log_softmax, as TensorFlow
    derives its gradient (padding, label 0, weighs nothing); returns the loss."""
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(logits)
        loss, _ = label_smoothed_cross_entropy(labels, logits, smoothing)
        log_probs = tf.nn.log_softmax(logits)
        per_token = ((1 - smoothing) * -tf.gather(log_probs, labels, batch_dims=2)
                     - smoothing * tf.reduce_mean(log_probs, axis=-1))
        weights = tf.cast(labels > 0, tf.float32)
        expected = tf.reduce_sum(per_token * weights) / tf.reduce_sum(weights)
    np.testing.assert_allclose(loss.numpy(), expected.numpy(), rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(loss, logits).numpy(),
                               tape.gradient(expected, logits).numpy(), atol=1e-7)
    return loss.numpy()


def test_the_written_out_gradient_equals_the_derived_one():
    # Mixed labels, padding, and a logit far from the rest.
    labels = tf.constant([[4, 5, 0], [6, 1, 0]])
    logits = tf.random.stateless_normal([2, 3, 7], seed=[3, 4]) * 4.0
    logits = tf.tensor_scatter_nd_update(logits, [[1, 1, 2]], [30.0])
    for smoothing in (0.0, 0.1, 0.3):
        _matches_the_derived_loss(labels, logits, smoothing)


def test_a_label_far_below_the_best_logit_keeps_a_finite_exact_loss():
    # Its probability underflows float32 (exp(-150)); the loss must still be lse - z_y, as the
    # derived one is, not the log of a rounded-off probability.
    labels = tf.constant([[2, 1]])
    logits = tf.constant([[[150.0, 0.0, 0.0, -1.0], [0.0, 3.0, -2.0, 1.0]]])
    for smoothing in (0.0, 0.1):
        loss = _matches_the_derived_loss(labels, logits, smoothing)
        assert np.isfinite(loss) and loss > 70
