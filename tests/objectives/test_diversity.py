"""Layer diversity (tfnmt/objectives/diversity.py; Dou et al. 2018, eq. 10)."""

import numpy as np
import tensorflow as tf

from tfnmt.objectives.diversity import adjacent_layer_distances, layer_diversity

B, T, D = 2, 3, 8


def states(n, seed=0):
    rng = np.random.default_rng(seed)
    return [tf.constant(rng.normal(size=(B, T, D)).astype(np.float32)) for _ in range(n)]


def diversity_numpy(layers, mask):
    pairs = []
    for lower, upper in zip(layers[:-1], layers[1:]):
        values = []
        for b, t in zip(*np.nonzero(mask)):
            u, v = lower[b, t], upper[b, t]
            values.append(1 - (u @ v / np.linalg.norm(u) / np.linalg.norm(v)) ** 2)
        pairs.append(np.mean(values))
    return np.array(pairs)


def test_diversity_is_equation_10_and_ignores_padding():
    layers = [x.numpy() for x in states(4, seed=3)]
    layers[2][0, 1] = 3.0 * layers[1][0, 1]  # parallel states: distance 0 at that position
    mask = np.array([[True, True, True], [True, False, False]])
    got = adjacent_layer_distances([tf.constant(x) for x in layers], tf.constant(mask)).numpy()
    np.testing.assert_allclose(got, diversity_numpy(layers, mask), rtol=1e-5)
    noisy = [x.copy() for x in layers]
    for x in noisy:
        x[1, 1:] = 100.0 * np.random.default_rng(5).normal(size=(2, D))
    np.testing.assert_allclose(adjacent_layer_distances([tf.constant(x) for x in noisy], tf.constant(mask)).numpy(),
                               got, rtol=1e-6)
    decoder = [x.numpy() for x in states(2, seed=6)]
    dmask = np.array([[True, False, False], [True, True, True]])
    both = layer_diversity([([tf.constant(x) for x in layers], tf.constant(mask)),
                            ([tf.constant(x) for x in decoder], tf.constant(dmask))]).numpy()
    np.testing.assert_allclose(both, np.mean(np.concatenate([got, diversity_numpy(decoder, dmask)])), rtol=1e-5)
