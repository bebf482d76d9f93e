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
