"""Gated pooling (tfnmt/layers/gated_pooling.py): a learned weighting of each pooling window."""

import numpy as np
import tensorflow as tf

from tfnmt.layers.gated_pooling import GatedPooling


def test_gated_pooling_is_a_learned_weighting_of_each_window():
    rng = np.random.default_rng(0)
    layer = GatedPooling((2,))
    x = rng.normal(size=(2, 7, 3)).astype(np.float32)
    out = layer(tf.constant(x)).numpy()
    windows = x[:, :6].reshape(2, 3, 2, 3)
    np.testing.assert_allclose(out, windows.mean(axis=2), atol=1e-6)  # initial: average pooling
    scale, bias = rng.normal(size=3), rng.normal(size=(2, 3))
    layer.scale.assign(scale.astype(np.float32))
    layer.position_bias.assign(bias.astype(np.float32))
    scores = windows * scale + bias
    weights = np.exp(scores) / np.exp(scores).sum(axis=2, keepdims=True)
    np.testing.assert_allclose(layer(tf.constant(x)).numpy(), (weights * windows).sum(axis=2),
                               atol=1e-5)
    layer.scale.assign(np.full(3, 1e5, np.float32))  # a steep gate is max pooling
    layer.position_bias.assign(np.zeros((2, 3), np.float32))
    np.testing.assert_allclose(layer(tf.constant(x)).numpy(), windows.max(axis=2), atol=1e-3)
    # 2-D windows (small filters): 2x2 blocks of [B, H, W, C].
    layer2 = GatedPooling((2, 2))
    image = rng.normal(size=(1, 5, 4, 2)).astype(np.float32)
    blocks = image[:, :4].reshape(1, 2, 2, 2, 2, 2).transpose(0, 1, 3, 2, 4, 5).reshape(1, 2, 2, 4, 2)
    np.testing.assert_allclose(layer2(tf.constant(image)).numpy(), blocks.mean(axis=3), atol=1e-6)
    assert GatedPooling.from_config(layer2.get_config()).pool_size == (2, 2)
