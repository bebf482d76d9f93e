"""tfnmt average: average the weights of the last N (or N best) checkpoints into a new model dir.

The best are those training ranked by --best_metric (validation loss or BLEU), listed in
MODEL_DIR/best/best.json."""

import os
import shutil

import numpy as np
import tensorflow as tf
from absl import logging

from tfnmt import model_dir as model_dir_lib
from tfnmt.cli import common
from tfnmt.cli.flags import read
from tfnmt.cli.options import AverageOptions, ModelDirOptions
from tfnmt.data import vocab
from tfnmt.errors import ConfigError
from tfnmt.exporters import versions
from tfnmt.models import catalog
from tfnmt.training import checkpoints


def average_checkpoints(model_dir, output_dir, num, which):
    """Writes output_dir (config, vocabulary, one checkpoint of averaged weights); returns the
    checkpoint path and the averaged paths. output_dir appears complete or not at all."""
    if os.path.abspath(output_dir) == os.path.abspath(model_dir):
        raise ConfigError("--output_dir must differ from --model_dir")
    if os.path.exists(output_dir) and (not os.path.isdir(output_dir) or os.listdir(output_dir)):
        raise ConfigError(f"--output_dir={output_dir} exists and is not empty: choose a new one")
    config = model_dir_lib.read_config(model_dir)
    model = catalog.build(config)
    sums = [np.zeros(v.shape, np.float64) for v in model.weights]
    paths = []
    # Damaged checkpoints are set aside on the way: the `num` newest (or best) readable ones.
    for path in checkpoints.restored_each(model, model_dir, which):
        for total, variable in zip(sums, model.weights):
            total += variable.numpy()
        paths.append(path)
        if len(paths) == num:
            break
    if len(paths) < num:
        logging.warning("only %d %s checkpoints in %s; averaging those", len(paths), which, model_dir)
    for total, variable in zip(sums, model.weights):
        variable.assign((total / len(paths)).astype(variable.dtype))
    step = max(int(p.rsplit("-", 1)[1]) for p in paths)
    output_dir = os.path.normpath(output_dir)
    staging = os.path.join(os.path.dirname(output_dir), f".{os.path.basename(output_dir)}.staging-{os.getpid()}")
    versions.write_atomically(output_dir, staging,
                              lambda d: _write_model_dir(d, model, config, model_dir, step),
                              "--output_dir")
    return os.path.join(output_dir, checkpoints.LAST_DIR, f"ckpt-{step}"), paths


def _write_model_dir(directory, model, config, model_dir, step):
    os.makedirs(directory)
    model_dir_lib.write_config(directory, config)
    for name in (vocab.JOINT_FILE, vocab.SOURCE_FILE, vocab.TARGET_FILE):
        if os.path.isfile(os.path.join(model_dir, name)):
            shutil.copy(os.path.join(model_dir, name), os.path.join(directory, name))
    # The state file names the checkpoint relative to its directory, so the rename keeps it valid.
    tf.train.CheckpointManager(tf.train.Checkpoint(**checkpoints.trackables(model)),
                               os.path.join(directory, checkpoints.LAST_DIR), max_to_keep=1,
                               checkpoint_name="ckpt").save(checkpoint_number=step)


def run():
    where, average = read(ModelDirOptions), read(AverageOptions)
    common.require(model_dir=where.model_dir, output_dir=average.output_dir)
    common.check_output_dir(average.output_dir, "output_dir")
    path, averaged = average_checkpoints(where.model_dir, average.output_dir,
                                         average.num_checkpoints, average.average_from)
    logging.info("averaged %d checkpoints: %s", len(averaged), ", ".join(averaged))
    if average.average_from == "best":
        for entry in checkpoints.read_best_index(where.model_dir)[: len(averaged)]:
            logging.info("  step %d: %s", entry["step"], "  ".join(
                f"validation {k} {v:.4f}" for k, v in entry.items() if k not in ("step", "path")))
    print(path)
