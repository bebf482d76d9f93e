"""tfnmt uses Keras through its public API only: no attribute Keras keeps private (a name with a
leading underscore that a Keras model, layer, optimizer or metric has) is read or set, neither
on another object (`model._distribute_strategy`) nor on `self` in the models and layers (which
subclass Keras'), so a Keras release that renames its internals cannot silently change
training."""

import ast
import os

import keras

from conftest import REPO


def _keras_private_names():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    objects = [model, model.optimizer, keras.layers.Dense(1), keras.metrics.Mean()]
    return {name for obj in objects for name in set(dir(obj)) | set(vars(obj))
            if name.startswith("_") and not name.startswith("__")}


# The one exception, and why: Keras 3.15 has no public switch for it. A model created under a
# tf.distribute strategy makes fit() pull a batch and average it across replicas to build the
# (already built) model, which fails for bucketed batches of different shapes on each replica;
# creating the model outside the scope instead would leave the variables its __init__ creates
# (data position, metrics, dropout seeds) undistributed.
ALLOWED = {("tfnmt/training/trainer.py", "_distribute_strategy")}

# Packages whose classes subclass Keras': there `self._name` may be Keras' own attribute.
KERAS_SUBCLASSES = {"models", "layers", "objectives"}


def _is_self(node):
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def test_no_private_keras_attribute_is_used():
    private = _keras_private_names()
    uses = []
    for directory, _, files in os.walk(os.path.join(REPO, "tfnmt")):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            tree = ast.parse(open(path, encoding="utf-8").read())
            keras_subclasses = os.path.basename(directory) in KERAS_SUBCLASSES
            relative = os.path.relpath(path, REPO)
            uses += [(relative, node.lineno, node.attr) for node in ast.walk(tree)
                     if isinstance(node, ast.Attribute) and node.attr in private
                     and (keras_subclasses or not _is_self(node.value))]
    refused = [f"{path}:{line}: .{attr}" for path, line, attr in uses
               if (path, attr) not in ALLOWED]
    assert not refused, "\n".join(refused)
    assert {(path, attr) for path, _, attr in uses} == ALLOWED  # drop an exception once unused
