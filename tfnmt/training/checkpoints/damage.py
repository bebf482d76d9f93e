"""A damaged checkpoint (disk trouble, a truncated copy) is set aside wherever it is met, by
`train` and by every verb that restores one: renamed to ckpt-N.corrupt-TIME.*, dropped from the
state file or best.json, with a warning naming it, and the next older (or next best) one is
used. Temporary files of saves that were killed are removed when training starts.
"""

import os
import time

import tensorflow as tf
from absl import logging

from tfnmt.errors import CheckpointError, write_errors
from tfnmt.training.checkpoints.state import (BEST_DIR, LAST_DIR, drop_from_best, drop_from_state,
                                              files_of)


def damage_errors():
    """What reading a damaged checkpoint raises. A truncated or garbled index is a bare OpError
    ('not an sstable (bad magic number)'), a garbled data file too ('Checksum does not match'),
    no subclass of it; a data file cut short is an IndexError ('Read less bytes than
    requested')."""
    return (tf.errors.OpError, IndexError)


def readable_errors():
    return damage_errors() + (AssertionError, ValueError, OSError)


def first_line(error):
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def readable(paths, read, model_dir, which, rename=True):
    """Yields (path, read(path)) for each of `paths` (newest or best first) that reads. The
    damaged ones met before a readable one are then set aside (`rename`) or only reported; if
    none reads, a CheckpointError names them all and nothing is renamed: all damaged is more
    likely a systematic problem (permissions, another TensorFlow) than corruption."""
    damaged, used = {}, None
    for path in paths:
        try:
            result = read(path)
        except readable_errors() as e:
            if not isinstance(e, damage_errors()) or isinstance(e, tf.errors.PermissionDeniedError):
                raise CheckpointError(f"cannot restore {path}: {first_line(e)}") from None
            damaged[path] = first_line(e)
            continue
        put_aside(model_dir, which, damaged, path, rename)
        damaged, used = {}, path
        yield path, result
    if damaged and used is None:
        raise CheckpointError(
            f"no readable {'best ' if which == 'best' else ''}checkpoint in {model_dir}: "
            + "; ".join(f"{p}: {why}" for p, why in damaged.items())
            + ("; choose another --checkpoint" if which == "best" else
               "; move them away to train anew, or use a new --model_dir"))
    put_aside(model_dir, which, damaged, used, rename)


def put_aside(model_dir, which, damaged, used, rename=True):
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
                            set_aside(path), instead)
        except write_errors() as e:
            logging.warning("checkpoint %s is unreadable (%s)%s; it cannot be set aside: %s",
                            path, why, instead, first_line(e))
    if not damaged or not rename:
        return
    try:
        if which == "best":
            drop_from_best(model_dir, set(damaged))
        else:
            drop_from_state(os.path.join(model_dir, LAST_DIR), set(damaged))
    except write_errors():
        pass  # reported above: the next reader meets them again


def set_aside(prefix):
    """Renames a checkpoint's files to PREFIX.corrupt-TIME.*; returns the new prefix."""
    new_prefix = f"{prefix}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}"
    for name in files_of(prefix):
        tf.io.gfile.rename(name, new_prefix + name[len(prefix):], overwrite=True)
    return new_prefix


def unreadable(path):
    """Why the checkpoint at `path` cannot be read in full, or None if it can."""
    try:
        reader = tf.train.load_checkpoint(path)
        for key, dtype in reader.get_variable_to_dtype_map().items():
            # Python cannot read a variant (the training stream's state): its restore checks
            # it, and falls back to re-making the batches (`_restore_stream`).
            if dtype != tf.variant:
                reader.get_tensor(key)
    except readable_errors() as e:
        return str(e).splitlines()[0]
    return None


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
