"""Weight-normalised dense and 1-D convolution layers (Salimans & Kingma 2016), as ConvS2S uses.

The kernel is `g * v / ||v||` with the norm taken per output unit, so the direction and the
length of each unit's weights are learned separately.
"""

import keras
import tensorflow as tf

from tfnmt.layers.configured import Configured


def _init_pair(layer, v_shape, g_shape, stddev, fan):
    """v ~ N(0, stddev); g starts at the expected norm of a column of v, stddev * sqrt(fan), so the
    layer starts like fairseq's (which sets g = ||v|| exactly). Setting g from v's sampled value
    is not possible here: Keras builds layers in a scratch graph whose tensors do not survive."""
    layer.v = layer.add_weight(name="v", shape=v_shape,
                               initializer=keras.initializers.RandomNormal(stddev=stddev))
    layer.g = layer.add_weight(name="g", shape=g_shape,
                               initializer=keras.initializers.Constant(stddev * fan ** 0.5))


def _normalised(v, g, axes):
    return v * (g / tf.sqrt(tf.reduce_sum(tf.square(v), axis=axes, keepdims=True) + 1e-12))


@keras.saving.register_keras_serializable(package="tfnmt")
class WeightNormDense(Configured, keras.layers.Layer):
    """x [..., in] -> [..., units]."""

    def __init__(self, units, dropout_in=0.0, **kwargs):
        super().__init__(**kwargs)
        self.set_config(units=units, dropout_in=dropout_in)

    def build(self, input_shape):
        fan_in = input_shape[-1]
        # fairseq's ConvS2S init: std sqrt((1 - dropout) / fan_in) keeps activations' variance.
        std = ((1.0 - self.dropout_in) / fan_in) ** 0.5
        _init_pair(self, (fan_in, self.units), (1, self.units), std, fan_in)
        self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros")

    def kernel(self):
        return _normalised(self.v, self.g, axes=0)

    def call(self, x):
        return tf.matmul(x, tf.cast(self.kernel(), x.dtype)) + tf.cast(self.bias, x.dtype)


@keras.saving.register_keras_serializable(package="tfnmt")
class WeightNormConv1D(Configured, keras.layers.Layer):
    """1-D convolution [B, T, in] -> [B, T, filters], 'same' or causal padding.

    `step` computes the output for the newest position from the last `kernel_size` inputs,
    so causal decoders can run one position at a time.
    """

    def __init__(self, filters, kernel_size, causal=False, dropout_in=0.0, **kwargs):
        super().__init__(**kwargs)
        self.set_config(filters=filters, kernel_size=kernel_size, causal=causal, dropout_in=dropout_in)

    def build(self, input_shape):
        fan_in = input_shape[-1]
        # fairseq: std sqrt(4 (1 - dropout) / (k * in)) for a conv feeding a GLU.
        std = (4.0 * (1.0 - self.dropout_in) / (self.kernel_size * fan_in)) ** 0.5
        _init_pair(self, (self.kernel_size, fan_in, self.filters), (1, 1, self.filters), std,
                   self.kernel_size * fan_in)
        self.bias = self.add_weight(name="bias", shape=(self.filters,), initializer="zeros")

    def kernel(self):
        return _normalised(self.v, self.g, axes=[0, 1])

    def call(self, x):
        k = self.kernel_size
        pad = [k - 1, 0] if self.causal else [(k - 1) // 2, k // 2]
        x = tf.pad(x, [[0, 0], pad, [0, 0]])
        out = tf.nn.conv1d(x, tf.cast(self.kernel(), x.dtype), stride=1, padding="VALID")
        return out + tf.cast(self.bias, x.dtype)

    def step(self, recent):
        """recent [N, kernel_size, in], the last inputs (oldest first) -> [N, filters] for the
        newest position."""
        return (tf.einsum("nki,kio->no", recent, tf.cast(self.kernel(), recent.dtype))
                + tf.cast(self.bias, recent.dtype))
