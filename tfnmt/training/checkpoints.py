"""Checkpoints: the last K every N steps, the K best by a validation metric (loss or BLEU), and
robust restore.

TensorFlow writes a checkpoint's data and index files under temporary names and renames them,
and the `checkpoint` state file is replaced atomically, so a run killed mid-save leaves the
previous checkpoint intact. A checkpoint that is corrupt anyway (disk trouble, a truncated copy)
is reported by name; `train` then falls back to the newest readable one.
"""

import json
import os
import shutil
import tempfile

import tensorflow as tf
from absl import logging

from tfnmt.errors import CheckpointError

LAST_DIR, BEST_DIR = "ckpt", "best"
_BEST_INDEX = "best.json"


def _readable_errors():
    return (tf.errors.DataLossError, tf.errors.NotFoundError, tf.errors.InvalidArgumentError,
            tf.errors.FailedPreconditionError, tf.errors.OutOfRangeError, tf.errors.UnknownError,
            AssertionError, ValueError, IndexError, OSError)


def _by_path(variables, drop_prefix=False):
    # Keras 3 layers kept in lists or created in build() are invisible to TensorFlow's object
    # graph, so checkpoints name every variable by its Keras path instead. The keys are then
    # readable and independent of how a model nests its layers in Python. Optimizer names are
    # uniquified per process ("adam", "adam_1"), so their prefix is dropped.
    bag = {}
    for variable in variables:
        key = variable.path.split("/", 1)[-1] if drop_prefix else variable.path
        if key in bag:
            raise ValueError(f"two variables share the checkpoint key {key}")
        bag[key] = variable.value
    return bag


def _optimizer_variables(optimizer):
    # Under a mixed_float16 policy Keras wraps the optimizer in a LossScaleOptimizer, whose own
    # variables (its loss scale, its step counter) have the same names as the inner optimizer's
    # once the prefix is dropped. The inner optimizer keeps the keys a float32 run writes; the
    # wrapper's own go under "loss_scale/".
    inner = getattr(optimizer, "inner_optimizer", None)
    if inner is None:
        return _by_path(optimizer.variables, drop_prefix=True)
    inner_ids = {id(v) for v in inner.variables}
    own = [v for v in optimizer.variables if id(v) not in inner_ids]
    return dict(_by_path(inner.variables, drop_prefix=True),
                **{f"loss_scale/{k}": v for k, v in _by_path(own, drop_prefix=True).items()})


def trackables(model, optimizer=None, **extra):
    """What a checkpoint holds: model weights, optimizer state, data position, extras."""
    objects = {"model": _by_path(model.weights), "data_position": model.data_position}
    if optimizer is not None:
        objects["optimizer"] = _optimizer_variables(optimizer)
    objects.update(extra)
    return objects


# Validation metrics that can rank the best checkpoints, and whether higher is better.
BEST_METRICS = {"loss": False, "bleu": True}


def _rank(entries, metric):
    """Best first; entries written before `metric` was recorded rank last."""
    higher = BEST_METRICS[metric]
    worst = float("-inf") if higher else float("inf")
    return sorted(entries, key=lambda e: (-e.get(metric, worst) if higher else e.get(metric, worst),
                                          e["loss"]))


class Checkpoints:
    """`chief=False` (the other workers of a multi-worker job): every save still happens, since
    saving distributed variables may need collective ops with the chief, but into a scratch
    directory that is deleted at once; best-checkpoint decisions use an in-memory copy of the
    chief's index, so they are taken exactly as the chief takes them."""

    def __init__(self, model_dir, objects, keep_last=5, keep_best=5, best_metric="loss", chief=True):
        self.model_dir = model_dir
        self.checkpoint = tf.train.Checkpoint(**objects)
        self.last = tf.train.CheckpointManager(self.checkpoint, os.path.join(model_dir, LAST_DIR),
                                               max_to_keep=keep_last, checkpoint_name="ckpt")
        self.best_dir = os.path.join(model_dir, BEST_DIR)
        self.keep_best = keep_best
        if best_metric not in BEST_METRICS:
            raise ValueError(f"unknown best-checkpoint metric {best_metric!r}")
        self.best_metric = best_metric
        self.chief = chief
        self._best = None if chief else read_best_index(model_dir)

    def save(self, step):
        if not self.chief:
            # The same calls as the chief's: a first save creates the checkpoint's save counter,
            # a variable, and creating one is a collective operation.
            return self._in_scratch(lambda scratch: tf.train.CheckpointManager(
                self.checkpoint, scratch, max_to_keep=1, checkpoint_name="ckpt").save(checkpoint_number=step))
        return self.last.save(checkpoint_number=step)

    def _in_scratch(self, write):
        scratch = tempfile.mkdtemp(prefix="tfnmt-worker-")
        try:
            return write(scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def restore_latest(self):
        """Restores the newest readable checkpoint; returns its path or None for a fresh run."""
        for path in reversed(self.last.checkpoints):
            try:
                status = self.checkpoint.restore(path)
            except _readable_errors() as e:
                logging.warning("checkpoint %s is unreadable (%s); trying an older one", path,
                                str(e).splitlines()[0])
                continue
            try:
                status.assert_existing_objects_matched()
            except AssertionError as e:
                status.expect_partial()  # no second report of the mismatch at exit
                # Readable but for another model or optimizer: older checkpoints will not fit
                # either, and silently training from scratch would lose the run.
                raise CheckpointError(
                    f"checkpoint {path} does not match this model and optimizer "
                    f"({str(e).split('.')[0]}); changing the architecture or --optimizer needs "
                    "a new --model_dir") from None
            return path
        if self.last.checkpoints:
            raise CheckpointError(f"no readable checkpoint in {self.last.directory}")
        return None

    # --- best by a validation metric --------------------------------------------------------
    def best_entries(self):
        return read_best_index(self.model_dir) if self._best is None else list(self._best)

    def offer_best(self, step, results):
        """Keeps the checkpoint of `step` if its validation results ({"loss", maybe "bleu"}) are
        among the K best by `best_metric`. best.json records every metric, best first."""
        entry = {"step": int(step), **{k: float(v) for k, v in results.items()}}
        # A resumed run may validate a step again: its new result replaces the old one.
        others = [e for e in self.best_entries() if e["step"] != entry["step"]]
        entries = _rank(others + [entry], self.best_metric)
        if not any(e is entry for e in entries[: self.keep_best]):
            return False
        if not self.chief:
            self._in_scratch(lambda scratch: self.checkpoint.write(os.path.join(scratch, f"ckpt-{step}")))
            entry["path"] = f"ckpt-{step}"
            self._best = entries[: self.keep_best]
            return True
        os.makedirs(self.best_dir, exist_ok=True)
        path = self.checkpoint.write(os.path.join(self.best_dir, f"ckpt-{step}"))
        entry["path"] = os.path.basename(path)
        for dropped in entries[self.keep_best:]:
            for name in tf.io.gfile.glob(os.path.join(self.best_dir, dropped["path"] + ".*")):
                tf.io.gfile.remove(name)
        _write_json(os.path.join(self.best_dir, _BEST_INDEX), entries[: self.keep_best])
        return True


def _write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
    os.replace(tmp, path)


def read_best_index(model_dir):
    path = os.path.join(model_dir, BEST_DIR, _BEST_INDEX)
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return json.load(f)


def list_checkpoints(model_dir, which="last"):
    """Checkpoint paths, newest (last) or best (best) first."""
    if which == "best":
        return [os.path.join(model_dir, BEST_DIR, e["path"]) for e in read_best_index(model_dir)]
    state = tf.train.get_checkpoint_state(os.path.join(model_dir, LAST_DIR))
    return list(reversed(state.all_model_checkpoint_paths)) if state else []


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
        tf.train.Checkpoint(model=_by_path(model.weights)).read(path).expect_partial() \
            .assert_existing_objects_matched()
    except _readable_errors() as e:
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
    except _readable_errors() as e:
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
            except _readable_errors() as e:
                raise CheckpointError(f"--init_from: cannot read {name} from {path}: "
                                      f"{str(e).splitlines()[0]}") from None
            report["loaded"].append(name)
    report["unused"] = sorted(stored)
    if not report["loaded"]:
        raise CheckpointError(f"--init_from: no weight of {path} matches this model "
                              f"(is it a tfnmt checkpoint of a related model?)")
    return report
