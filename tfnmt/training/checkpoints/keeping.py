"""Saving and keeping: the last K checkpoints every N steps and the K best by a validation metric
(loss or BLEU), and restoring the newest readable one to resume. TensorFlow writes a
checkpoint's files under temporary names and renames them, and the state file is replaced
atomically, so a run killed mid-save leaves the previous checkpoint intact. A save that fails (a
full disk) ends training with one line and leaves the previous checkpoints as they were.
"""

import os
import shutil
import tempfile

import tensorflow as tf
from absl import logging

import tfnmt.training.checkpoints.state as checkpoint_files
from tfnmt.errors import CheckpointError, cannot_write, write_errors
from tfnmt.training.checkpoints.damage import put_aside, readable, remove_leftovers, unreadable
from tfnmt.training.checkpoints.state import (BEST_DIR, BEST_INDEX, LAST_DIR, drop_from_state,
                                              files_of, list_checkpoints, read_best_index,
                                              repair_state)
from tfnmt.training.options import BEST_METRICS, TrainOptions


def by_path(variables, drop_prefix=False):
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
        return by_path(optimizer.variables, drop_prefix=True)
    inner_ids = {id(v) for v in inner.variables}
    own = [v for v in optimizer.variables if id(v) not in inner_ids]
    return dict(by_path(inner.variables, drop_prefix=True),
                **{f"loss_scale/{k}": v for k, v in by_path(own, drop_prefix=True).items()})


# A training checkpoint's entry for the training stream's iterator (its position, shuffle and
# bucket buffers): absent from checkpoints written before it, or with several input pipelines.
DATA_STATE = "data"


def _has_entry(path, name):
    """Whether the checkpoint at `path` holds the object `name` (a top-level entry)."""
    return any(key.split("/", 1)[0] == name for key, _ in tf.train.list_variables(path))


def trackables(model, optimizer=None, **extra):
    """What a checkpoint holds: model weights, optimizer state, data position, extras."""
    objects = {"model": by_path(model.weights), "data_position": model.data_position}
    if optimizer is not None:
        objects["optimizer"] = _optimizer_variables(optimizer)
    objects.update(extra)
    return objects


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

    def __init__(self, model_dir, objects, keep_last=TrainOptions.keep_checkpoints,
                 keep_best=TrainOptions.keep_best, best_metric=TrainOptions.best_metric,
                 chief=True, optional=(), stream=None):
        """optional: names of `objects` that older checkpoints may lack (state of a feature
        turned on when resuming); they keep their initial values then. stream: the training
        stream (training/stream_state.py SavedStream), saved too."""
        self.model_dir = model_dir
        self._stream = stream
        self.checkpoint = tf.train.Checkpoint(**objects, **(stream.trackables() if stream else {}))
        # The stream's state is restored on its own (`_restore_stream`): a state that does not
        # fit this run's pipeline is no reason to doubt the checkpoint.
        self._restorable = tf.train.Checkpoint(**objects)
        self.restored_stream = False  # whether restore_latest restored the stream's state
        self._without_optional = (tf.train.Checkpoint(**{k: v for k, v in objects.items()
                                                         if k not in optional})
                                  if optional else None)
        self.keep_last = keep_last
        if chief:
            repair_state(os.path.join(model_dir, LAST_DIR))
        self.last = self._manager()
        self.best_dir = os.path.join(model_dir, BEST_DIR)
        self.keep_best = keep_best
        if best_metric not in BEST_METRICS:
            raise ValueError(f"unknown best-checkpoint metric {best_metric!r}")
        self.best_metric = best_metric
        self.chief = chief
        self._best = None if chief else read_best_index(model_dir)
        if chief:
            remove_leftovers(model_dir)

    def _manager(self):
        # It keeps every checkpoint: `_keep_newest` removes the old ones, in an order a kill
        # cannot break (TensorFlow's own lists the new checkpoint with the old ones, deletes the
        # old ones' files, then lists again, so a kill in between leaves the state file naming
        # files that are gone).
        return tf.train.CheckpointManager(self.checkpoint, os.path.join(self.model_dir, LAST_DIR),
                                          max_to_keep=None, checkpoint_name="ckpt")

    def _keep_newest(self):
        """Drops all but the `keep_last` newest checkpoints from the state file (an atomic
        replace), then deletes their files."""
        old = list_checkpoints(self.model_dir)[self.keep_last:]
        if not old:
            return
        drop_from_state(self.last.directory, set(old))
        for prefix in old:
            for name in files_of(prefix):
                tf.io.gfile.remove(name)
        self.last = self._manager()  # it reads the state file: the dropped ones are forgotten

    def save(self, step):
        if self._stream is None:
            return self._save(step)
        with self._stream.saving(step):
            return self._save(step)

    def _save(self, step):
        if not self.chief:
            # The same calls as the chief's: a first save creates the checkpoint's save counter,
            # a variable, and creating one is a collective operation.
            return self._in_scratch(lambda scratch: tf.train.CheckpointManager(
                self.checkpoint, scratch, max_to_keep=1, checkpoint_name="ckpt").save(checkpoint_number=step))
        previous = self.last.latest_checkpoint
        try:
            path = self.last.save(checkpoint_number=step)
            self._keep_newest()
            return path
        except write_errors() as e:
            prefix = os.path.join(self.last.directory, f"ckpt-{step}")
            self._discard_failed_write(prefix, list_checkpoints(self.model_dir))
            raise cannot_write(prefix, e, "free some space, then run the same command again: "
                               + (f"training resumes from {previous}" if previous else
                                  "training starts over")) from None

    def _discard_failed_write(self, prefix, kept):
        """What a failed save may have left: its temporary files and, unless `prefix` is a
        checkpoint still listed in `kept`, its own files."""
        remove_leftovers(self.model_dir)
        if prefix not in kept:
            for name in files_of(prefix):
                tf.io.gfile.remove(name)

    def _in_scratch(self, write):
        scratch = tempfile.mkdtemp(prefix="tfnmt-worker-")
        try:
            return write(scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def restore_latest(self):
        """Restores the newest readable checkpoint; returns its path or None for a fresh run.
        Newer, damaged ones are set aside (the chief's job; the other workers only warn)."""
        paths = list(reversed(self.last.checkpoints))
        for path, status in readable(paths, self._restorable.restore, self.model_dir, "last",
                                      rename=self.chief):
            break
        else:
            return None
        self.restored_stream = self._restore_stream(path)
        if path != paths[0] and self.chief:
            # A manager keeps its own list, which its next save would write back.
            self.last = self._manager()
            self._set_aside_damaged_best()
        try:
            status.assert_existing_objects_matched()
        except AssertionError as e:
            status.expect_partial()  # no second report of the mismatch at exit
            if not self._restores_without_optional(path):
                # Readable but for another model or optimizer: older checkpoints will not fit
                # either, and silently training from scratch would lose the run.
                raise CheckpointError(
                    f"checkpoint {path} does not match this model and optimizer "
                    f"({str(e).split('.')[0]}); changing the architecture or --optimizer needs "
                    "a new --model_dir") from None
        return path

    def _restore_stream(self, path):
        """Restores the training stream from `path`; False if it holds no such state or one
        that does not fit this run's pipeline (another --batch_tokens, --accumulate_steps,
        ...): the stream then skips to the data position instead."""
        if self._stream is None or not _has_entry(path, DATA_STATE):
            return False
        try:
            tf.train.Checkpoint(**self._stream.trackables()).read(path).expect_partial()
            self._stream.restored()
        except (tf.errors.OpError, ValueError) as e:
            logging.warning("%s: the training stream's saved state does not fit this run's "
                            "input pipeline (%s); re-making the batches up to its position "
                            "instead", path, str(e).splitlines()[0][:200])
            return False
        return True

    def _restores_without_optional(self, path):
        if self._without_optional is None:
            return False
        status = self._without_optional.restore(path)
        try:
            status.assert_existing_objects_matched()
        except AssertionError:
            status.expect_partial()
            return False
        logging.info("%s was written without some state of this run's settings (e.g. "
                     "--early_stopping_patience): it starts afresh", path)
        return True

    def _set_aside_damaged_best(self):
        """Reads every checkpoint of best/ in full, since disk trouble seldom hits one file only;
        a damaged one is set aside and dropped from best.json."""
        damaged = {}
        for entry in read_best_index(self.model_dir):
            path = os.path.join(self.best_dir, entry["path"])
            why = unreadable(path)
            if why is not None:
                damaged[path] = why
        put_aside(self.model_dir, "best", damaged, None)

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
            self._in_scratch(lambda scratch: self._restorable.write(os.path.join(scratch, f"ckpt-{step}")))
            entry["path"] = f"ckpt-{step}"
            self._best = entries[: self.keep_best]
            return True
        prefix = os.path.join(self.best_dir, f"ckpt-{step}")
        try:
            os.makedirs(self.best_dir, exist_ok=True)
            # Without the training stream: a best checkpoint is decoded, never resumed from.
            entry["path"] = os.path.basename(self._restorable.write(prefix))
            checkpoint_files.write_json(os.path.join(self.best_dir, BEST_INDEX), entries[: self.keep_best])
        except write_errors() as e:
            self._discard_failed_write(prefix, [os.path.join(self.best_dir, kept["path"])
                                                for kept in self.best_entries()])
            raise cannot_write(prefix, e, "free some space, then run the same command again: "
                               "training resumes from its last checkpoint") from None
        for dropped in entries[self.keep_best:]:
            for name in files_of(os.path.join(self.best_dir, dropped["path"])):
                tf.io.gfile.remove(name)
        return True
