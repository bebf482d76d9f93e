"""DenseAtt-1 and -2 against a direct numpy evaluation of eq. 9 and eq. 10 of the DenseNMT paper."""

import numpy as np
import tensorflow as tf

from tfnmt.layers.dense_attention import DenseAttention1, DenseAttention2, attend

RNG = np.random.default_rng(0)
B, S, T, A = 2, 5, 3, 4
H = [RNG.normal(size=(B, S, d)).astype(np.float32) for d in (3, 6, 2)]  # h^1..h^3
H0 = RNG.normal(size=(B, S, 5)).astype(np.float32)                       # embedding h^0
Z = RNG.normal(size=(B, T, 7)).astype(np.float32)                        # decoder layer z^l
MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)


def linear(layer, x):
    kernel = layer.kernel.numpy()
    return x @ kernel + (layer.bias.numpy() if layer.use_bias else 0.0)


def F(q, k, v, mask):
    scores = q @ np.swapaxes(k, 1, 2)
    scores = np.where(mask[:, None, :], scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return weights @ v


def test_dense_attention_1_is_eq_9():
    layer = DenseAttention1(A)
    out = layer(tf.constant(Z), layer.project_memory([tf.constant(h) for h in H], tf.constant(H0),
                                                     tf.constant(MASK))).numpy()
    projected = linear(layer.layers_projection, np.concatenate(H, -1))
    expected = F(linear(layer.query, Z), projected,
                 projected + linear(layer.embedding_projection, H0), MASK)
    assert out.shape == (B, T, A)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_dense_attention_2_is_eq_10():
    layer = DenseAttention2(A, num_encoder_layers=3)
    out = layer(tf.constant(Z), layer.project_memory([tf.constant(h) for h in H], tf.constant(H0),
                                                     tf.constant(MASK))).numpy()
    query = linear(layer.query, Z)
    embedding = layer.embedding_projection
    expected = 0.0
    for i in range(3):
        key = layer.key_projections[i].kernel.numpy()
        # L'_i([h^i; h^0]): one matrix over the concatenation, its blocks K_i and the shared E.
        value_kernel = np.concatenate([key, embedding.kernel.numpy()], 0)
        value = np.concatenate([H[i], H0], -1) @ value_kernel + embedding.bias.numpy()
        expected = expected + F(query, H[i] @ key, value, MASK)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_dense_attention_2_has_dense_attention_1s_parameter_count():
    """The paper (eq. 10): DenseAtt-2 'maintains the same number of parameters'."""
    memory = ([tf.constant(h) for h in H], tf.constant(H0), tf.constant(MASK))
    one, two = DenseAttention1(A), DenseAttention2(A, num_encoder_layers=3)
    for layer in (one, two):
        layer(tf.constant(Z), layer.project_memory(*memory))
    assert two.count_params() == one.count_params() == (7 + 1) * A + (3 + 6 + 2) * A + (5 + 1) * A


def test_padding_positions_get_no_attention():
    layer = DenseAttention2(A, num_encoder_layers=3)
    memory = layer.project_memory([tf.constant(h) for h in H], tf.constant(H0), tf.constant(MASK))
    changed = [h.copy() for h in H]
    for h in changed:
        h[1, 3:] = 100.0  # padded positions of sentence 2
    h0 = H0.copy()
    h0[1, 3:] = -50.0
    memory2 = layer.project_memory([tf.constant(h) for h in changed], tf.constant(h0), tf.constant(MASK))
    np.testing.assert_allclose(layer(tf.constant(Z), memory)[1].numpy(),
                               layer(tf.constant(Z), memory2)[1].numpy(), atol=1e-5)


def test_hypotheses_read_their_sentences_memory_row_as_a_tiled_copy():
    # A beam's k hypotheses of a sentence (consecutive query rows) over its one memory row
    # (decoding/shared.py BY_SENTENCE): the contexts, the weights and ConvS2S's length scale of
    # the memory tiled to one row a hypothesis.
    k = 3
    keys, values = tf.constant(H[1][:, :, :A]), tf.constant(H[2].repeat(2, -1))
    query = tf.constant(RNG.normal(size=(B * k, 1, A)).astype(np.float32))
    scale = tf.constant([2.0, 3.0])
    grouped_layer, tiled_layer = DenseAttention1(A), DenseAttention1(A)
    grouped = attend(query, keys, values, tf.constant(MASK), grouped_layer, scale)
    tiled = attend(query, tf.repeat(keys, k, 0), tf.repeat(values, k, 0),
                   tf.repeat(tf.constant(MASK), k, 0), tiled_layer, tf.repeat(scale, k))
    np.testing.assert_allclose(grouped.numpy(), tiled.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(grouped_layer.last_weights.numpy(),
                               tiled_layer.last_weights.numpy(), atol=1e-7)
    assert grouped.shape == (B * k, 1, 4) and grouped_layer.last_weights.shape == (B * k, 1, S)
    np.testing.assert_array_equal(grouped_layer.last_weights.numpy()[k:, 0, 3:], 0.0)
    expected = F(query.numpy()[:k], H[1][:1, :, :A], H[2][:1].repeat(2, -1), MASK[:1]) * 2.0
    np.testing.assert_allclose(grouped.numpy()[:k], expected, rtol=1e-5, atol=1e-6)
