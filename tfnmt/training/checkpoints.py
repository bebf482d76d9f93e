"""Checkpoints: the last K every N steps, the K best by validation loss, and robust restore.

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


def trackables(model, optimizer=None, **extra):
    """What a checkpoint holds: model weights, optimizer state, data position, extras."""
    objects = {"model": _by_path(model.weights), "data_position": model.data_position}
    if optimizer is not None:
        objects["optimizer"] = _by_path(optimizer.variables, drop_prefix=True)
    objects.update(extra)
    return objects


class Checkpoints:
    """`chief=False` (the other workers of a multi-worker job): every save still happens, since
    saving distributed variables may need collective ops with the chief, but into a scratch
    directory that is deleted at once; best-checkpoint decisions use an in-memory copy of the
    chief's index, so they are taken exactly as the chief takes them."""

    def __init__(self, model_dir, objects, keep_last=5, keep_best=5, chief=True):
        self.model_dir = model_dir
        self.checkpoint = tf.train.Checkpoint(**objects)
        self.last = tf.train.CheckpointManager(self.checkpoint, os.path.join(model_dir, LAST_DIR),
                                               max_to_keep=keep_last, checkpoint_name="ckpt")
        self.best_dir = os.path.join(model_dir, BEST_DIR)
        self.keep_best = keep_best
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

    # --- best by validation loss ------------------------------------------------------------
    def best_entries(self):
        return read_best_index(self.model_dir) if self._best is None else list(self._best)

    def offer_best(self, step, score):
        """Keeps the checkpoint of `step` if its validation loss is among the K best."""
        entries = self.best_entries()
        if len(entries) >= self.keep_best and score >= max(e["loss"] for e in entries):
            return False
        if not self.chief:
            self._in_scratch(lambda scratch: self.checkpoint.write(os.path.join(scratch, f"ckpt-{step}")))
            entries.append({"step": int(step), "loss": float(score), "path": f"ckpt-{step}"})
            self._best = sorted(entries, key=lambda e: e["loss"])[: self.keep_best]
            return True
        os.makedirs(self.best_dir, exist_ok=True)
        path = self.checkpoint.write(os.path.join(self.best_dir, f"ckpt-{step}"))
        entries.append({"step": int(step), "loss": float(score), "path": os.path.basename(path)})
        entries.sort(key=lambda e: e["loss"])
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
