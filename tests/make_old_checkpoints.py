"""Writes tests/data/old_checkpoints/<model>/: a model directory per registered model, at its
contract.TINY size with seeded weights, as `tfnmt train` leaves it (config.json, ckpt/ written by
the trainer's own checkpoint writer), and logits.npz, the model's logits of a fixed batch.

tests/test_old_checkpoints.py restores each into a model built by the current code: a change
that moves a variable (a checkpoint format change) fails it. Run this only with the code whose
checkpoints are to be kept readable (it was run at 6917694, before the encoders/decoders split):

    PYTHONPATH=. python tests/make_old_checkpoints.py
"""

import os
import shutil
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from contract import TINY, logits_of, tiny_model  # noqa: E402
from tfnmt import model_dir as model_dir_lib  # noqa: E402
from tfnmt.training.checkpoints import Checkpoints, trackables  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "old_checkpoints")
SOURCE_VOCAB, TARGET_VOCAB = 20, 24
# Fewer learned positions than the TINY size: the files stay small.
SMALLER = {"densenmt": dict(max_positions=16), "convs2s": dict(max_positions=16)}
SOURCE = np.array([[5, 6, 7, 3, 0, 0], [8, 9, 3, 0, 0, 0]], np.int32)
TARGET_IN = np.array([[2, 10, 11, 12, 13, 14], [2, 13, 14, 0, 0, 0]], np.int32)


def seeded(model, seed):
    """Every weight drawn from a seeded normal (not the initializers': those may change)."""
    rng = np.random.default_rng(seed)
    for variable in sorted(model.weights, key=lambda v: v.path):
        if variable.trainable:
            variable.assign(rng.normal(0.0, 0.3, variable.shape).astype(variable.dtype))


def write(name, seed):
    directory = os.path.join(HERE, name)
    shutil.rmtree(directory, ignore_errors=True)
    model = tiny_model(name, SOURCE_VOCAB, TARGET_VOCAB, **SMALLER.get(name, {}))
    seeded(model, seed)
    # As `train` writes it: every hyper-parameter, defaults included.
    config = {"model": name, "hparams": model.hparams, "source_vocab_size": SOURCE_VOCAB,
              "target_vocab_size": TARGET_VOCAB, "label_smoothing": model.label_smoothing,
              "data": "text:none"}
    model_dir_lib.write_config(directory, config)
    Checkpoints(directory, trackables(model)).save(1)
    logits = logits_of(model({"source": tf.constant(SOURCE), "target_in": tf.constant(TARGET_IN)}))
    np.savez(os.path.join(directory, "logits.npz"), source=SOURCE, target_in=TARGET_IN,
             logits=logits.numpy())


if __name__ == "__main__":
    for seed, name in enumerate(sorted(TINY)):
        write(name, seed)
        print(name)
