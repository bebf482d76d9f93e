"""State splitting (tfnmt/layers/state_splitter.py; Libovický and Helcl 2018, eq. 1)."""

import itertools

import numpy as np
import tensorflow as tf

from tfnmt.layers.state_splitter import StateSplitter


def test_state_splitter_is_equation_1_and_repeats_the_mask():
    k, d = 3, 4
    splitter = StateSplitter(k)
    states = tf.random.stateless_normal([2, 5, d], seed=[1, 2])
    mask = tf.constant([[True] * 5, [True, True, False, False, False]])
    split, split_mask = splitter(states, mask)
    assert split.shape == (2, k * 5, d) and split_mask.shape == (2, k * 5)
    projected = states.numpy() @ splitter.projection.kernel.numpy() + splitter.projection.bias.numpy()
    for c, b in itertools.product(range(5), range(k)):  # s_{ck+b} = (W h_c + b)[bd:(b+1)d]
        np.testing.assert_allclose(split[:, c * k + b].numpy(), projected[:, c, b * d:(b + 1) * d],
                                   rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(split_mask[1].numpy(), [True] * 6 + [False] * 9)
    wide, _ = StateSplitter(2, width=7)(states, mask)
    assert wide.shape == (2, 10, 7)
    clone = StateSplitter.from_config(splitter.get_config())
    assert clone.split_factor == k
