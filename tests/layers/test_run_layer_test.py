"""run_layer_test (tests/helpers/layers.py) fails on a layer broken in each way it checks, and
passes the same layer unbroken: toy scaled-dense layers, each with one fault."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers.layers import run_layer_test

INPUTS = (np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32),)


def register(cls):
    return keras.saving.register_keras_serializable(package="tfnmt")(cls)


@register
class ToyScaledDense(keras.layers.Layer):
    """x W * scale + b."""

    def __init__(self, units, scale=1.0, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.scale = scale

    def build(self, input_shape):
        self.kernel = self.add_weight(name="kernel", shape=(input_shape[-1], self.units))
        self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros")

    def call(self, x):
        return (tf.matmul(x, self.kernel) * self.scale + self.bias)

    def get_config(self):
        return dict(super().get_config(), units=self.units, scale=self.scale)


@register
class ToyForgetsScale(ToyScaledDense):
    def get_config(self):
        config = super().get_config()
        del config["scale"]
        return config


@register
class ToyRecordsAnotherScale(ToyScaledDense):
    def get_config(self):
        return dict(super().get_config(), scale=1.0)


class ToyUnregistered(ToyScaledDense):
    pass


@register
class ToyFloat32Output(ToyScaledDense):
    def call(self, x):
        return tf.cast(super().call(x), tf.float32)


@register
class ToyUnusedBias(ToyScaledDense):
    def call(self, x):
        return tf.matmul(x, self.kernel) * self.scale


@register
class ToyNotTraceable(ToyScaledDense):
    """Different outputs inside a tf.function than eagerly."""

    def call(self, x):
        return super().call(x) + (0.0 if tf.executing_eagerly() else 1.0)


@register
class ToyOverflows(ToyScaledDense):
    """exp() of the outputs: finite in float32, inf in float16."""

    def call(self, x):
        return tf.exp(super().call(x) * 1e-3 + 20.0)


def run(cls, units=5, **options):
    run_layer_test(cls, dict(units=units, scale=2.0), INPUTS, expected_output_shape=(2, 3, units),
                   **options)


def test_a_sound_layer_passes():
    layer, outputs = run_layer_test(ToyScaledDense, dict(units=5, scale=2.0), INPUTS,
                                    expected_output_shape=(2, 3, 5))
    expected = INPUTS[0] @ layer.kernel.numpy() * 2.0 + layer.bias.numpy()
    np.testing.assert_allclose(outputs.numpy(), expected, rtol=1e-5, atol=1e-5)
    assert np.abs(layer.bias.numpy()).max() > 0  # the weights were moved off their initial values


@pytest.mark.parametrize("cls, options, message", [
    (ToyForgetsScale, {}, r"get_config\(\) lacks constructor arguments \['scale'\]"),
    (ToyRecordsAnotherScale, {}, r"records scale=1.0, given 2.0"),
    (ToyUnregistered, {}, "ToyUnregistered is not registered"),
    (ToyFloat32Output, {}, "ToyFloat32Output under mixed_float16: output 0 is float32"),
    (ToyUnusedBias, {}, "toy_unused_bias/bias does not reach the outputs"),
    (ToyScaledDense, dict(inert_weights=("bias",)), "is listed inert but gets a gradient"),
    (ToyNotTraceable, {}, "ToyNotTraceable in a tf.function"),
    (ToyOverflows, dict(policies=("mixed_float16",)), "under mixed_float16: output 0 is not finite"),
])
def test_a_broken_layer_fails(cls, options, message):
    with pytest.raises(AssertionError, match=message):
        run(cls, **options)


def test_a_wrong_shape_and_a_default_argument_fail():
    with pytest.raises(AssertionError, match="output shapes"):
        run_layer_test(ToyScaledDense, dict(units=5, scale=2.0), INPUTS,
                       expected_output_shape=(2, 3, 4))
    with pytest.raises(AssertionError, match="give scale a non-default value"):
        run_layer_test(ToyScaledDense, dict(units=5), INPUTS, expected_output_shape=(2, 3, 5))
    run_layer_test(ToyScaledDense, dict(units=5), INPUTS, expected_output_shape=(2, 3, 5),
                   allow_defaults=("scale",))
