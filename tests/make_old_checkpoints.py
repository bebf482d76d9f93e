"""Writes tests/fixtures/old_checkpoints/<model>/: a model directory per registered model, at its
contract.TINY size with seeded weights, as `tfnmt train` leaves it (config.json, ckpt/ written by
the trainer's own checkpoint writer), and logits.npz, the model's logits of a fixed batch.

tests/models/test_old_checkpoints.py restores each into a model built by the current code: a change
that moves a variable (a checkpoint format change) fails it. Run this only with the code whose
checkpoints are to be kept readable (it was run at 2cdd492, before the encoders/decoders split):

    PYTHONPATH=. python tests/make_old_checkpoints.py

(At 2cdd492 `table_dim` was still called `embedding_dim`: the config.json of that case holds
the old name, which model_dir.read_config must still read.)
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

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "old_checkpoints")
SOURCE_VOCAB, TARGET_VOCAB = 20, 24
# Narrower than the TINY sizes, and fewer learned positions: the files stay small.
_POSITIONS = dict(max_positions=16)
_NARROW = dict(d_model=8, ffn_dim=16)
# Directory: (model, hyper-parameters over its TINY size). Besides every model, the switches
# that give a model other variables.
CASES = dict({name: (name, {}) for name in TINY}, **{
    "transformer": ("transformer", _NARROW),
    "deep_transformer": ("deep_transformer", _NARROW),
    "ctc_nat": ("ctc_nat", _NARROW),
    "densenmt": ("densenmt", _POSITIONS),
    "convs2s": ("convs2s", _POSITIONS),
    "transformer-pre_norm-untied": ("transformer", dict(_NARROW, pre_norm=True, tie_output=False)),
    "deep_transformer-pre_norm-hierarchical": ("deep_transformer", dict(
        _NARROW, pre_norm=True, encoder_aggregation="hierarchical", decoder_aggregation="linear",
        multi_layer_attention=3, encoder_layers=3)),
    "ctc_nat-pre_norm-untied": ("ctc_nat", dict(_NARROW, pre_norm=True, tie_output=False,
                                                ctc_variant="encoder_decoder")),
    "densenmt-summaries-dense1": ("densenmt", dict(_POSITIONS, attention="dense1", sumlen=2,
                                                   table_dim=8)),
    "densenmt-residual-multistep": ("densenmt", dict(_POSITIONS, encoder="residual",
                                                     attention="multistep", sumlen=2)),
    "deeplau-fast_forward": ("deeplau", dict(stack_connection="fast_forward")),
    "conv_encoder-small_filters": ("conv_encoder", dict(conv_encoder="small_filters",
                                                        conv_filters=4, source_window=8)),
})
SOURCE = np.array([[5, 6, 7, 3, 0, 0], [8, 9, 3, 0, 0, 0]], np.int32)
TARGET_IN = np.array([[2, 10, 11, 12, 13, 14], [2, 13, 14, 0, 0, 0]], np.int32)


def seeded(model, seed):
    """Every weight drawn from a seeded normal (not the initializers': those may change)."""
    rng = np.random.default_rng(seed)
    for variable in sorted(model.weights, key=lambda v: v.path):
        if variable.trainable:
            variable.assign(rng.normal(0.0, 0.3, variable.shape).astype(variable.dtype))


def write(case, seed):
    name, overrides = CASES[case]
    directory = os.path.join(HERE, case)
    shutil.rmtree(directory, ignore_errors=True)
    model = tiny_model(name, SOURCE_VOCAB, TARGET_VOCAB, **overrides)
    seeded(model, seed)
    # As `train` writes it: every hyper-parameter, defaults included.
    config = {"model": name, "hparams": model.hparams, "source_vocab_size": SOURCE_VOCAB,
              "target_vocab_size": TARGET_VOCAB,
              "data": "text:none"}
    model_dir_lib.write_config(directory, config)
    Checkpoints(directory, trackables(model)).save(1)
    logits = logits_of(model({"source": tf.constant(SOURCE), "target_in": tf.constant(TARGET_IN)}))
    np.savez(os.path.join(directory, "logits.npz"), source=SOURCE, target_in=TARGET_IN,
             logits=logits.numpy())


if __name__ == "__main__":
    for seed, case in enumerate(sorted(CASES)):
        write(case, seed)
        print(case)
