"""Restoring a model's weights for the verbs that read a checkpoint, and warm-starting one from
another model's checkpoint (--init_from)."""

import os

import tensorflow as tf

from tfnmt.errors import CheckpointError
from tfnmt.training.checkpoints.damage import first_line, readable, readable_errors
from tfnmt.training.checkpoints.keeping import by_path
from tfnmt.training.checkpoints.state import list_checkpoints


def restore(model, model_dir, checkpoint=""):
    """Restores `model`'s weights from `model_dir`'s `checkpoint` ('' or 'last': the newest,
    'best': the best, or a path) and returns its path: what every verb that reads a checkpoint
    calls. A damaged newest (or best) is set aside and the next one used; a path given
    explicitly is restored or refused in one line."""
    if checkpoint in ("", "last", "best"):
        for path in restored_each(model, model_dir, "best" if checkpoint == "best" else "last"):
            return path
    path = resolve(model_dir, checkpoint)
    restore_model(model, path)
    return path


def restored_each(model, model_dir, which="last"):
    """Yields the path of each readable checkpoint of `which` ('last': newest first; 'best':
    best first) once `model` holds its weights; a damaged one is set aside and skipped."""
    paths = list_checkpoints(model_dir, which)
    if not paths:
        raise CheckpointError(f"no {'best ' if which == 'best' else ''}checkpoint in "
                              f"{model_dir}: train a model first (tfnmt train)")

    def read(path):
        return tf.train.Checkpoint(model=by_path(model.weights)).read(path).expect_partial()
    for path, status in readable(paths, read, model_dir, which):
        try:
            status.assert_existing_objects_matched()
        except AssertionError as e:
            raise CheckpointError(f"cannot restore {path}: {first_line(e)}") from None
        yield path


def resolve(model_dir, checkpoint=""):
    """A checkpoint path from '' (latest), 'best' or an explicit path."""
    if checkpoint in ("", "last", "best"):
        paths = list_checkpoints(model_dir, "best" if checkpoint == "best" else "last")
        if not paths:
            raise CheckpointError(f"no {'best ' if checkpoint == 'best' else ''}checkpoint in "
                                  f"{model_dir}: train a model first (tfnmt train)")
        return paths[0]
    if not tf.io.gfile.exists(checkpoint + ".index"):
        raise CheckpointError(f"checkpoint not found: {checkpoint} (no {checkpoint}.index)")
    return checkpoint


def restore_model(model, path):
    """Restores the model's weights from a checkpoint, with a clear error if it cannot."""
    try:
        tf.train.Checkpoint(model=by_path(model.weights)).read(path).expect_partial() \
            .assert_existing_objects_matched()
    except readable_errors() as e:
        raise CheckpointError(f"cannot restore {path}: {str(e).splitlines()[0]}") from None


# --- warm start (--init_from) -------------------------------------------------------------------
_MODEL_PREFIX, _VALUE_SUFFIX = "model/", "/.ATTRIBUTES/VARIABLE_VALUE"


def _unescape(name):
    # tf.train.Checkpoint writes "/" in a dict key as ".S" and "." as "..".
    out, i = [], 0
    while i < len(name):
        if name[i] == "." and i + 1 < len(name):
            out.append("/" if name[i + 1] == "S" else name[i + 1])
            i += 2
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def _below_model_name(path):
    # "transformer/encoder_layer_0/..." -> "encoder_layer_0/...": the first component is the
    # registry name, which differs between a baseline and the model that extends it.
    return path.split("/", 1)[-1]


def resolve_init_from(source):
    """A checkpoint path from --init_from: a checkpoint prefix, or a model directory (its newest
    checkpoint). Returns (checkpoint path, model directory or None)."""
    if tf.io.gfile.isdir(source):
        try:
            return resolve(source), source
        except CheckpointError as e:
            raise CheckpointError(f"--init_from: {e}") from None
    if not tf.io.gfile.exists(source + ".index"):
        raise CheckpointError(f"--init_from={source}: neither a model directory nor a checkpoint "
                              f"(no {source}.index)")
    parent = os.path.dirname(os.path.dirname(os.path.abspath(source)))
    return source, (parent if os.path.isfile(os.path.join(parent, "config.json")) else None)


def warm_start(model, path):
    """Initialises `model` from another model's checkpoint: every weight whose Keras path (below
    the model's name) and shape match is loaded; the others keep their fresh initialisation.
    Returns {"loaded", "new", "mismatched", "unused"}: lists of paths below the model name."""
    try:
        reader = tf.train.load_checkpoint(path)
        shapes = reader.get_variable_to_shape_map()
    except readable_errors() as e:
        raise CheckpointError(f"--init_from: cannot read {path}: {str(e).splitlines()[0]}") from None
    stored = {}
    for key in shapes:
        if key.startswith(_MODEL_PREFIX) and key.endswith(_VALUE_SUFFIX):
            name = _unescape(key[len(_MODEL_PREFIX):-len(_VALUE_SUFFIX)])
            stored[_below_model_name(name)] = key
    report = {"loaded": [], "new": [], "mismatched": [], "unused": []}
    for variable in model.weights:
        name = _below_model_name(variable.path)
        key = stored.pop(name, None)
        if key is None:
            report["new"].append(name)
        elif tuple(shapes[key]) != tuple(variable.shape):
            report["mismatched"].append(f"{name} {tuple(shapes[key])} -> {tuple(variable.shape)}")
        else:
            try:
                variable.assign(reader.get_tensor(key))
            except readable_errors() as e:
                raise CheckpointError(f"--init_from: cannot read {name} from {path}: "
                                      f"{str(e).splitlines()[0]}") from None
            report["loaded"].append(name)
    report["unused"] = sorted(stored)
    if not report["loaded"]:
        raise CheckpointError(f"--init_from: no weight of {path} matches this model "
                              f"(is it a tfnmt checkpoint of a related model?)")
    return report
