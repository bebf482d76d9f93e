"""Where a model directory's checkpoints are listed: ckpt/'s `checkpoint` state file (TensorFlow's)
and best/best.json. A state file that is missing or unreadable while checkpoint files are there
is rebuilt from the files (`repair_state`), so that training never silently starts over; an
entry is dropped by rewriting the file whole, an atomic replace.
"""

import contextlib
import logging as std_logging
import os
import re
import time

import tensorflow as tf
from absl import logging

from tfnmt import json_files
from tfnmt.errors import CheckpointError, ConfigError


LAST_DIR, BEST_DIR = "ckpt", "best"
BEST_INDEX = "best.json"
_STATE_FILE = "checkpoint"  # TensorFlow's name
_NUMBERED = re.compile(r"ckpt-(\d+)\.index")
_said_rebuilt = set()  # directories whose missing state file was reported (once a process)


def files_of(prefix):
    return tf.io.gfile.glob(prefix + ".index") + tf.io.gfile.glob(prefix + ".data-*")


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


def repair_state(directory):
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


def drop_from_state(directory, dropped):
    paths, stamps, last_preserved = _state(directory)
    kept = [(p, t) for p, t in zip(paths, stamps) if p not in dropped]
    _write_state(directory, [p for p, _ in kept], [t for _, t in kept], last_preserved)


def write_json(path, value):
    json_files.write(path, value, indent=1)


def read_best_index(model_dir):
    """best.json's entries, best first; [] without it. A damaged one is reported and taken as
    none: the next validation writes it anew (the checkpoints it listed stay in best/)."""
    path = os.path.join(model_dir, BEST_DIR, BEST_INDEX)
    try:
        entries = json_files.read(path, default=[])
        if not isinstance(entries, list) or not all(
                isinstance(e, dict) and {"step", "path"} <= e.keys() for e in entries):
            raise ConfigError(f"cannot read {path}: not a list of checkpoints")
    except ConfigError as e:
        logging.warning("%s; taken as no best checkpoint yet", e)
        return []
    return entries


def drop_from_best(model_dir, dropped):
    entries = read_best_index(model_dir)
    kept = [e for e in entries if os.path.join(model_dir, BEST_DIR, e["path"]) not in dropped]
    if len(kept) < len(entries):
        write_json(os.path.join(model_dir, BEST_DIR, BEST_INDEX), kept)


def list_checkpoints(model_dir, which="last"):
    """Checkpoint paths, newest (last) or best (best) first."""
    if which == "best":
        return [os.path.join(model_dir, BEST_DIR, e["path"]) for e in read_best_index(model_dir)]
    return list(reversed(_state(os.path.join(model_dir, LAST_DIR))[0]))
