"""Checkpoints: the last K every N steps, the K best by a validation metric (loss or BLEU), and
robust restore.

TensorFlow writes a checkpoint's data and index files under temporary names and renames them,
and the `checkpoint` state file is replaced atomically, so a run killed mid-save leaves the
previous checkpoint intact. A checkpoint that is damaged anyway (disk trouble, a truncated copy)
is set aside wherever it is met, by `train` and by every verb that restores one (`restore`):
renamed to ckpt-N.corrupt-TIME.*, dropped from the `checkpoint` state file or best.json, with a
warning naming it, and the next older (or next best) one is used. A state file that is missing
or unreadable while checkpoint files are there is rebuilt from the files, so that training never
silently starts over. Temporary files of saves that were killed are removed when training
starts. A save that fails (a full disk) ends training with one line and leaves the previous
checkpoints as they were.
"""

import contextlib
import logging as std_logging
import os
import re
import shutil
import tempfile
import time

import tensorflow as tf
from absl import logging

from tfnmt import json_files
from tfnmt.errors import CheckpointError, ConfigError, cannot_write, write_errors
from tfnmt.training.options import BEST_METRICS, TrainOptions

LAST_DIR, BEST_DIR = "ckpt", "best"
_BEST_INDEX = "best.json"
_STATE_FILE = "checkpoint"  # TensorFlow's name
_NUMBERED = re.compile(r"ckpt-(\d+)\.index")
_said_rebuilt = set()  # directories whose missing state file was reported (once a process)


def _damage_errors():
    """What reading a damaged checkpoint raises. A truncated or garbled index is a bare OpError
    ('not an sstable (bad magic number)'), a garbled data file too ('Checksum does not match'),
    no subclass of it; a data file cut short is an IndexError ('Read less bytes than
    requested')."""
    return (tf.errors.OpError, IndexError)


def _readable_errors():
    return _damage_errors() + (AssertionError, ValueError, OSError)


def _why(error):
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


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


# A training checkpoint's entry for the training stream's iterator (its position, shuffle and
# bucket buffers): absent from checkpoints written before it, or with several input pipelines.
DATA_STATE = "data"


def _has_entry(path, name):
    """Whether the checkpoint at `path` holds the object `name` (a top-level entry)."""
    return any(key.split("/", 1)[0] == name for key, _ in tf.train.list_variables(path))


def trackables(model, optimizer=None, **extra):
    """What a checkpoint holds: model weights, optimizer state, data position, extras."""
    objects = {"model": _by_path(model.weights), "data_position": model.data_position}
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
            _repair_state(os.path.join(model_dir, LAST_DIR))
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
        _drop_from_state(self.last.directory, set(old))
        for prefix in old:
            for name in _files_of(prefix):
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
            for name in _files_of(prefix):
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
        for path, status in _readable(paths, self._restorable.restore, self.model_dir, "last",
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
            why = _unreadable(path)
            if why is not None:
                damaged[path] = why
        _put_aside(self.model_dir, "best", damaged, None)

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
            _write_json(os.path.join(self.best_dir, _BEST_INDEX), entries[: self.keep_best])
        except write_errors() as e:
            self._discard_failed_write(prefix, [os.path.join(self.best_dir, kept["path"])
                                                for kept in self.best_entries()])
            raise cannot_write(prefix, e, "free some space, then run the same command again: "
                               "training resumes from its last checkpoint") from None
        for dropped in entries[self.keep_best:]:
            for name in _files_of(os.path.join(self.best_dir, dropped["path"])):
                tf.io.gfile.remove(name)
        return True


def _readable(paths, read, model_dir, which, rename=True):
    """Yields (path, read(path)) for each of `paths` (newest or best first) that reads. The
    damaged ones met before a readable one are then set aside (`rename`) or only reported; if
    none reads, a CheckpointError names them all and nothing is renamed: all damaged is more
    likely a systematic problem (permissions, another TensorFlow) than corruption."""
    damaged, used = {}, None
    for path in paths:
        try:
            result = read(path)
        except _readable_errors() as e:
            if not isinstance(e, _damage_errors()) or isinstance(e, tf.errors.PermissionDeniedError):
                raise CheckpointError(f"cannot restore {path}: {_why(e)}") from None
            damaged[path] = _why(e)
            continue
        _put_aside(model_dir, which, damaged, path, rename)
        damaged, used = {}, path
        yield path, result
    if damaged and used is None:
        raise CheckpointError(
            f"no readable {'best ' if which == 'best' else ''}checkpoint in {model_dir}: "
            + "; ".join(f"{p}: {why}" for p, why in damaged.items())
            + ("; choose another --checkpoint" if which == "best" else
               "; move them away to train anew, or use a new --model_dir"))
    _put_aside(model_dir, which, damaged, used, rename)


def _put_aside(model_dir, which, damaged, used, rename=True):
    """Reports each damaged checkpoint {path: why} of `which` ('last' or 'best') with `used`, the
    one used instead, and (`rename`) sets it aside: renamed and dropped from its index, so that
    nothing offers it again. A model directory that cannot be written keeps them as they are."""
    instead = f", using {used}" if used else ""
    for path, why in damaged.items():
        if not rename:
            logging.warning("checkpoint %s is unreadable (%s)%s", path, why, instead)
            continue
        try:
            logging.warning("checkpoint %s is unreadable (%s); set aside as %s.*%s", path, why,
                            _set_aside(path), instead)
        except write_errors() as e:
            logging.warning("checkpoint %s is unreadable (%s)%s; it cannot be set aside: %s",
                            path, why, instead, _why(e))
    if not damaged or not rename:
        return
    try:
        if which == "best":
            _drop_from_best(model_dir, set(damaged))
        else:
            _drop_from_state(os.path.join(model_dir, LAST_DIR), set(damaged))
    except write_errors():
        pass  # reported above: the next reader meets them again


def _drop_from_best(model_dir, dropped):
    entries = read_best_index(model_dir)
    kept = [e for e in entries if os.path.join(model_dir, BEST_DIR, e["path"]) not in dropped]
    if len(kept) < len(entries):
        _write_json(os.path.join(model_dir, BEST_DIR, _BEST_INDEX), kept)


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
        return tf.train.Checkpoint(model=_by_path(model.weights)).read(path).expect_partial()
    for path, status in _readable(paths, read, model_dir, which):
        try:
            status.assert_existing_objects_matched()
        except AssertionError as e:
            raise CheckpointError(f"cannot restore {path}: {_why(e)}") from None
        yield path


def _files_of(prefix):
    return tf.io.gfile.glob(prefix + ".index") + tf.io.gfile.glob(prefix + ".data-*")


def _set_aside(prefix):
    """Renames a checkpoint's files to PREFIX.corrupt-TIME.*; returns the new prefix."""
    new_prefix = f"{prefix}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}"
    for name in _files_of(prefix):
        tf.io.gfile.rename(name, new_prefix + name[len(prefix):], overwrite=True)
    return new_prefix


def _unreadable(path):
    """Why the checkpoint at `path` cannot be read in full, or None if it can."""
    try:
        reader = tf.train.load_checkpoint(path)
        for key, dtype in reader.get_variable_to_dtype_map().items():
            # Python cannot read a variant (the training stream's state): its restore checks
            # it, and falls back to re-making the batches (`_restore_stream`).
            if dtype != tf.variant:
                reader.get_tensor(key)
    except _readable_errors() as e:
        return str(e).splitlines()[0]
    return None


def _state_file(directory):
    """(TensorFlow's CheckpointState of `directory` or None, None or why there is none:
    'missing' or 'unreadable')."""
    if not tf.io.gfile.exists(os.path.join(directory, _STATE_FILE)):
        return None, "missing"
    try:
        # TensorFlow's two warnings about a garbled file ("Checkpoint ignored") would come
        # before ours, which says what happens instead.
        with _tensorflow_quiet():
            state = tf.train.get_checkpoint_state(directory)
    except ValueError:  # an empty file ('Invalid checkpoint state'), bytes that are not text
        state = None
    return state, None if state else "unreadable"


@contextlib.contextmanager
def _tensorflow_quiet():
    """TensorFlow's Python warnings off (its deprecation notice of update_checkpoint_state, which
    `_write_state` needs: CheckpointManager cannot drop or rebuild an entry)."""
    tf_logger = std_logging.getLogger("tensorflow")
    level = tf_logger.level
    tf_logger.setLevel(std_logging.ERROR)
    try:
        yield
    finally:
        tf_logger.setLevel(level)


def _files_state(directory):
    """(paths oldest first, their times, a last preserved time): the checkpoints whose index is
    in `directory`, as a lost state file would list them."""
    names = tf.io.gfile.listdir(directory) if tf.io.gfile.isdir(directory) else []
    found = sorted((int(m.group(1)), os.path.join(directory, f"ckpt-{m.group(1)}"))
                   for m in map(_NUMBERED.fullmatch, names) if m)
    paths = [path for _, path in found]
    stamps = [tf.io.gfile.stat(path + ".index").mtime_nsec / 1e9 for path in paths]
    # CheckpointManager lists only the checkpoints newer than the last preserved time.
    return paths, stamps, min(stamps, default=time.time()) - 1


def _state(directory):
    """(paths, oldest first; their timestamps; the last preserved timestamp) of the state file
    in `directory`, each path one that opens. Until 2026-11-25 tfnmt rewrote the state file of a
    relative model directory with each path relative to that directory twice over (ckpt-N listed
    as DIR/../../../ckpt-N: nothing could be resumed, scored or deleted); a listed checkpoint
    that is not there but is in `directory` itself is read from there. Without a readable state
    file, the checkpoint files there are listed (`tfnmt train` writes the state file anew)."""
    state, problem = _state_file(directory)
    if not state:
        paths, stamps, last_preserved = _files_state(directory)
        if paths and directory not in _said_rebuilt:
            _said_rebuilt.add(directory)
            logging.warning("%s is %s: reading the checkpoints from their files (newest %s)",
                            os.path.join(directory, _STATE_FILE), problem, paths[-1])
        return paths, stamps, last_preserved
    paths = []
    for path in state.all_model_checkpoint_paths:
        here = os.path.join(directory, os.path.basename(path))
        if not tf.io.gfile.exists(path + ".index") and tf.io.gfile.exists(here + ".index"):
            path = here
        paths.append(path)
    stamps = (list(state.all_model_checkpoint_timestamps)
              or [state.last_preserved_timestamp] * len(paths))
    return paths, stamps, state.last_preserved_timestamp


def _write_state(directory, paths, stamps, last_preserved):
    # The file is to hold names relative to `directory`, as CheckpointManager writes them, so that
    # the model directory stays movable. Under a relative `directory` TensorFlow takes each path
    # given as relative to the working directory and rewrites it relative to `directory`; under
    # an absolute one it writes a relative path as given.
    names = [os.path.basename(p) for p in paths]
    if not os.path.isabs(directory):
        names = [os.path.join(directory, name) for name in names]
    with _tensorflow_quiet():
        tf.compat.v1.train.update_checkpoint_state(
            directory, names[-1], names, all_model_checkpoint_timestamps=stamps,
            last_preserved_timestamp=last_preserved)


def _repair_state(directory):
    """Rewrites a state file that is missing or unreadable while checkpoint files are there, or
    that lists checkpoints by paths that do not open (see _state). An unreadable one with no
    checkpoint beside it stops training: starting over would bury whatever it was."""
    state, problem = _state_file(directory)
    if not state:
        paths, stamps, last_preserved = _files_state(directory)
        if paths:
            logging.warning("%s is %s: rebuilt from the checkpoint files there (%s)",
                            os.path.join(directory, _STATE_FILE), problem,
                            ", ".join(os.path.basename(p) for p in paths))
            _write_state(directory, paths, stamps, last_preserved)
            _said_rebuilt.add(directory)
        elif problem == "unreadable":
            raise CheckpointError(f"{os.path.join(directory, _STATE_FILE)} is unreadable and no "
                                  "checkpoint is beside it: remove it to train from scratch, or "
                                  "use a new --model_dir")
        return
    paths, stamps, last_preserved = _state(directory)
    if paths and paths != list(state.all_model_checkpoint_paths):
        logging.info("%s: the checkpoint state file listed its checkpoints by wrong paths "
                     "(tfnmt before 2026-11-25, a relative model directory): rewritten", directory)
        _write_state(directory, paths, stamps, last_preserved)


def _drop_from_state(directory, dropped):
    paths, stamps, last_preserved = _state(directory)
    kept = [(p, t) for p, t in zip(paths, stamps) if p not in dropped]
    _write_state(directory, [p for p, _ in kept], [t for _, t in kept], last_preserved)


def remove_leftovers(model_dir):
    """Removes the temporary files and directories of saves that were killed (TensorFlow's
    ckpt-N_temp/ and checkpoint.tmp*, best.json.tmp)."""
    removed = []
    for directory in (os.path.join(model_dir, LAST_DIR), os.path.join(model_dir, BEST_DIR)):
        for name in tf.io.gfile.glob(os.path.join(directory, "*_temp*")) + \
                tf.io.gfile.glob(os.path.join(directory, "*.tmp*")):
            if tf.io.gfile.isdir(name):
                tf.io.gfile.rmtree(name)
            else:
                tf.io.gfile.remove(name)
            removed.append(name)
    if removed:
        logging.info("removed what interrupted saves left: %s", ", ".join(removed))


def _write_json(path, value):
    json_files.write(path, value, indent=1)


def read_best_index(model_dir):
    """best.json's entries, best first; [] without it. A damaged one is reported and taken as
    none: the next validation writes it anew (the checkpoints it listed stay in best/)."""
    path = os.path.join(model_dir, BEST_DIR, _BEST_INDEX)
    try:
        entries = json_files.read(path, default=[])
        if not isinstance(entries, list) or not all(
                isinstance(e, dict) and {"step", "path"} <= e.keys() for e in entries):
            raise ConfigError(f"cannot read {path}: not a list of checkpoints")
    except ConfigError as e:
        logging.warning("%s; taken as no best checkpoint yet", e)
        return []
    return entries


def list_checkpoints(model_dir, which="last"):
    """Checkpoint paths, newest (last) or best (best) first."""
    if which == "best":
        return [os.path.join(model_dir, BEST_DIR, e["path"]) for e in read_best_index(model_dir)]
    return list(reversed(_state(os.path.join(model_dir, LAST_DIR))[0]))


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
