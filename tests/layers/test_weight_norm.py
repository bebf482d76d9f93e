"""Weight-normalised dense and 1-D convolution layers (tfnmt/layers/weight_norm.py)."""

import numpy as np
import tensorflow as tf

from tfnmt.layers.weight_norm import WeightNormConv1D, WeightNormDense


def test_weight_norm_kernels_have_norm_g_per_unit():
    dense = WeightNormDense(7)
    dense(tf.ones([2, 5]))
    dense.g.assign(tf.fill([1, 7], 3.0))
    np.testing.assert_allclose(np.linalg.norm(dense.kernel().numpy(), axis=0), 3.0, rtol=1e-5)
    conv = WeightNormConv1D(6, 3, causal=True)
    x = tf.random.stateless_normal([1, 4, 5], seed=[0, 1])
    full = conv(x)
    np.testing.assert_allclose(np.linalg.norm(conv.kernel().numpy().reshape(-1, 6), axis=0),
                               conv.g.numpy().reshape(-1), rtol=1e-5)
    # The causal output at position t only sees inputs up to t: the last window gives the last row.
    window = x[:, 1:4]
    np.testing.assert_allclose(conv.step(window).numpy(), full[:, 3].numpy(), atol=1e-5)
