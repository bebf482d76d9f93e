"""`run_layer_test`: what every serialisable Keras layer of tfnmt must do (in the spirit of
keras-hub's `TestCase.run_layer_test`). tests/layers/test_every_layer.py applies it to each one.

For a layer class, constructor arguments and example inputs it checks:

(a) the layer builds and calls, eagerly and inside a `tf.function` with the same outputs;
(b) `get_config()` names every constructor argument (of every `__init__` in its bases), and
    `from_config(get_config())` gives an equal config, the same weights (paths and shapes) and,
    with the weights copied, the same output values;
(c) Keras serialisation under the registered name `tfnmt>ClassName`, through JSON (as a config
    file holds it): `deserialize_keras_object` gives the same class, config and output values;
(d) under each mixed policy (mixed_float16, mixed_bfloat16) the layer builds with float32
    variables, its floating outputs have the compute dtype, are finite, and are the float32
    layer's outputs (same weights) to the policy's precision;
(e) the outputs have `expected_output_shape` (and the layer's own `compute_output_shape`, if
    it has one, says so);
(f) every trainable weight reaches the outputs (a gradient of at least 1e-4 from a random
    projection of them), except the `inert_weights` the caller names, which must get none (a
    bias that softmax cancels: then the list says why, and fails when the weight comes alive).

The weights are moved off their initial values first (zero biases, zero gates, a=0 pooling
scales...), so a copy that failed, or a clone with another architecture, shows in the values.
The arguments must leave every constructor default (unless named in `allow_defaults`): a config
that dropped an argument rebuilds the default, which only a non-default value reveals.
"""

import contextlib
import inspect
import json

import keras
import numpy as np
import tensorflow as tf

PACKAGE = "tfnmt"
POLICIES = ("mixed_float16", "mixed_bfloat16")
# Largest |mixed - float32| output difference allowed, relative to the largest float32 output
# (at least 1): float16 keeps 11 significant bits, bfloat16 8, and a layer chains a few ops.
TOLERANCE = {"mixed_float16": 5e-3, "mixed_bfloat16": 4e-2}


def call_layer(layer, *args, **kwargs):
    """The default way to run a layer: through `__call__`."""
    return layer(*args, **kwargs)


@contextlib.contextmanager
def global_policy(name):
    """The global dtype policy set to `name` (layers take it when they are made and built)."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def _tensor(x):
    """numpy and Python inputs as tensors; floating ones as float32."""
    x = tf.convert_to_tensor(x)
    return tf.cast(x, tf.float32) if x.dtype.is_floating else x


def _cast_floating(structure, dtype):
    return tf.nest.map_structure(lambda x: tf.cast(x, dtype) if x.dtype.is_floating else x, structure)


def _flat(outputs):
    return [tf.convert_to_tensor(t) for t in tf.nest.flatten(outputs)]


def _shapes(expected):
    """One shape (a tuple of ints/None) or a list of shapes, one per flattened output."""
    if isinstance(expected, tuple) and all(d is None or isinstance(d, int) for d in expected):
        return [expected]
    return [tuple(shape) for shape in expected]


def _assert_same_values(actual, expected, what):
    actual, expected = _flat(actual), _flat(expected)
    assert len(actual) == len(expected), f"{what}: {len(actual)} outputs, expected {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == e.dtype, f"{what}: output {i} is {a.dtype}, expected {e.dtype}"
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=f"{what}: output {i}")


def _own_bases(layer_cls):
    """The class and its bases that are not Keras's (or Python's) own."""
    return [cls for cls in layer_cls.__mro__
            if cls.__module__.split(".")[0] not in ("keras", "builtins", "tensorflow")]


def _init_parameters(layer_cls):
    """{name: default or inspect.Parameter.empty} over every `__init__` of `_own_bases`."""
    parameters = {}
    for cls in _own_bases(layer_cls):
        if "__init__" not in vars(cls):
            continue
        for name, p in inspect.signature(cls.__init__).parameters.items():
            if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                parameters.setdefault(name, p.default)
    return parameters


_OTHER = object()


def _plain(value):
    """A number, string, bool or None, or a list/tuple of them (as a list); else _OTHER."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(_plain(v) == v for v in value):
        return list(value)
    return _OTHER


def _perturb(layer, seed):
    """Moves every trainable weight off its initial value (seeded)."""
    rng = np.random.default_rng(seed)
    for weight in layer.trainable_weights:
        value = keras.ops.convert_to_numpy(weight.value)
        weight.assign(value + rng.normal(0.0, 0.3, value.shape).astype(value.dtype))


def run_layer_test(layer_cls, init_kwargs, args, kwargs=None, *, expected_output_shape,
                   call=call_layer, policies=POLICIES, allow_defaults=(), inert_weights=(), seed=0):
    """Checks (a)-(f) of the module docstring; returns the float32 layer and its outputs.

    `args`/`kwargs`: the inputs, passed as `call(layer, *args, **kwargs)` (by default
    `layer(*args, **kwargs)`; a layer driven through another method, or whose inputs come from
    its own weights, gives its own `call`). Floating inputs are fed as float32, and under a mixed
    policy in its compute dtype, as a model's embeddings would arrive.
    `expected_output_shape`: one shape, or one per output in `tf.nest.flatten` order.
    `inert_weights`: endings of the paths of weights no output depends on (check (f)).
    """
    args = tf.nest.map_structure(_tensor, tuple(args))
    kwargs = tf.nest.map_structure(_tensor, dict(kwargs or {}))
    name = layer_cls.__name__
    parameters = _init_parameters(layer_cls)
    for parameter, default in parameters.items():
        if default is not inspect.Parameter.empty and parameter not in allow_defaults:
            assert parameter in init_kwargs and init_kwargs[parameter] != default, (
                f"{name}: give {parameter} a non-default value, or the config round trip "
                f"cannot tell whether it survives")

    # (a) builds and calls, with weights moved off their initial values. Seeded: Keras draws
    # the initial values, and the mixed-precision tolerance of (d) held for most draws only
    # (LayerAggregation-hierarchical failed 1 run in 30).
    keras.utils.set_random_seed(seed)
    layer = layer_cls(**init_kwargs)
    call(layer, *args, **kwargs)
    assert layer.built, f"{name} is not built after a call"
    _perturb(layer, seed)
    outputs = call(layer, *args, **kwargs)
    traced = tf.function(lambda: call(layer, *args, **kwargs))()
    _assert_same_values(traced, outputs, f"{name} in a tf.function")

    # (e) shapes; float32 outputs are finite.
    flat = _flat(outputs)
    assert [tuple(t.shape) for t in flat] == _shapes(expected_output_shape), (
        f"{name}: output shapes {[tuple(t.shape) for t in flat]}")
    for t in flat:
        if t.dtype.is_floating:
            assert t.dtype == tf.float32 and np.isfinite(t.numpy()).all(), name
    if any("compute_output_shape" in vars(cls) for cls in _own_bases(layer_cls)):
        declared = _shapes(layer.compute_output_shape(tuple(args[0].shape)))
        assert declared == [tuple(t.shape) for t in flat], f"{name}.compute_output_shape: {declared}"

    # (f) every trainable weight but the inert ones reaches the outputs.
    rng = np.random.default_rng(seed + 1)
    with tf.GradientTape() as tape:
        floating = [t for t in _flat(call(layer, *args, **kwargs)) if t.dtype.is_floating]
        objective = tf.add_n([tf.reduce_sum(t * rng.normal(size=t.shape).astype(np.float32))
                              for t in floating])
    gradients = tape.gradient(objective, layer.trainable_weights)
    for weight, gradient in zip(layer.trainable_weights, gradients):
        largest = 0.0 if gradient is None else float(tf.reduce_max(tf.abs(gradient)))
        if weight.path.endswith(tuple(inert_weights)):
            assert largest < 1e-5, f"{weight.path} is listed inert but gets a gradient {largest}"
        else:
            assert largest > 1e-4, f"{weight.path} does not reach the outputs of {name}"

    # (b) config round trip.
    config = layer.get_config()
    missing = sorted(set(parameters) - set(config))
    assert not missing, f"{name}.get_config() lacks constructor arguments {missing}"
    for parameter, value in init_kwargs.items():
        # Plain values are recorded as given (an initializer given by name is recorded serialised).
        if _plain(value) is not _OTHER and not isinstance(config[parameter], dict):
            assert _plain(config[parameter]) == _plain(value), (
                f"{name}.get_config() records {parameter}={config[parameter]!r}, given {value!r}")
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config
    _assert_same_as(clone, layer, outputs, call, args, kwargs, f"{name}.from_config")

    # (c) Keras serialisation by the registered name, through JSON.
    registered = keras.saving.get_registered_name(layer_cls)
    assert registered == f"{PACKAGE}>{name}", f"{name} is not registered (got {registered!r})"
    assert keras.saving.get_registered_object(registered) is layer_cls
    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
    assert serialized["registered_name"] == registered
    restored = keras.saving.deserialize_keras_object(serialized)
    assert type(restored) is layer_cls and restored.get_config() == config
    _assert_same_as(restored, layer, outputs, call, args, kwargs, f"deserialized {name}")

    # (d) mixed precision.
    for policy in policies:
        with global_policy(policy):
            mixed = layer_cls(**init_kwargs)
            mixed_args, mixed_kwargs = (_cast_floating(args, mixed.compute_dtype),
                                        _cast_floating(kwargs, mixed.compute_dtype))
            call(mixed, *mixed_args, **mixed_kwargs)
            mixed.set_weights(layer.get_weights())
            mixed_outputs = _flat(call(mixed, *mixed_args, **mixed_kwargs))
        compute = policy.split("_")[1]
        assert mixed.compute_dtype == compute and mixed.variable_dtype == "float32", (name, policy)
        assert all(w.dtype == "float32" for w in mixed.weights), f"{name} under {policy}"
        assert [tuple(t.shape) for t in mixed_outputs] == [tuple(t.shape) for t in flat]
        for i, (m, f) in enumerate(zip(mixed_outputs, flat)):
            if not f.dtype.is_floating:
                np.testing.assert_array_equal(m.numpy(), f.numpy())
                continue
            assert m.dtype == compute, f"{name} under {policy}: output {i} is {m.dtype.name}"
            m32 = tf.cast(m, tf.float32).numpy()
            assert np.isfinite(m32).all(), f"{name} under {policy}: output {i} is not finite"
            scale = max(1.0, float(np.abs(f.numpy()).max()))
            np.testing.assert_allclose(m32, f.numpy(), rtol=0, atol=TOLERANCE[policy] * scale,
                                       err_msg=f"{name} under {policy}: output {i}")
    return layer, outputs


def _assert_same_as(other, layer, outputs, call, args, kwargs, what):
    """`other` (a rebuilt `layer`) has its weights and, with them copied, its outputs."""
    call(other, *args, **kwargs)
    assert [(w.path, tuple(w.shape)) for w in other.weights] == [
        (w.path, tuple(w.shape)) for w in layer.weights], f"{what} has other weights"
    other.set_weights(layer.get_weights())
    _assert_same_values(call(other, *args, **kwargs), outputs, what)
