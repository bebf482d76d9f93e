"""Warm start (--init_from, tfnmt/training/checkpoints/restoring.py warm_start): a deep Transformer starts
from a plain Transformer's weights; what is new, mismatched or unused is reported."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import events, run_cli, tiny_train_flags
from tfnmt.errors import CheckpointError
from tfnmt.models import catalog
from tfnmt.training import checkpoints

SMALL = dict(encoder_layers=3, decoder_layers=4, d_model=16, ffn_dim=32, num_heads=2, dropout=0.0)


def make(name="deep_transformer", **overrides):
    model = catalog.get(name)(50, 50, **dict(SMALL, **overrides))
    model.label_smoothing = 0.1
    model.build_with_dummy_batch()
    return model


@pytest.mark.slow
def test_warm_start_loads_the_baselines_weights_and_initialises_the_new_ones(tmp_path):
    baseline = make("transformer")
    path = tf.train.Checkpoint(**checkpoints.trackables(baseline)).write(str(tmp_path / "ckpt-1"))
    deep = make(encoder_aggregation="hierarchical", decoder_aggregation="iterative", multi_layer_attention=2)
    fresh = {v.path: v.numpy() for v in deep.weights}
    report = checkpoints.warm_start(deep, path)
    plain = {v.path.split("/", 1)[1]: v.numpy() for v in baseline.weights}
    assert sorted(report["loaded"]) == sorted(plain) and not report["unused"] and not report["mismatched"]
    assert report["new"] and all(("aggregation" in n or "lower_" in n) for n in report["new"])
    for v in deep.weights:
        name = v.path.split("/", 1)[1]
        np.testing.assert_array_equal(v.numpy(), plain[name] if name in plain else fresh[v.path])
    # Same path, other shape: not loaded, reported; names of no use here: reported as unused.
    other = tf.train.Checkpoint(model={
        "transformer/encoder_layer_0/ffn/inner/kernel": tf.Variable(tf.zeros([3, 3])),
        "transformer/encoder_layer_0/ffn/inner/bias": tf.Variable(tf.ones([32])),
        "transformer/encoder_layer_9/ffn/inner/bias": tf.Variable(tf.ones([32]))}).write(str(tmp_path / "other"))
    partial = checkpoints.warm_start(deep, other)
    assert partial["loaded"] == ["encoder_layer_0/ffn/inner/bias"]
    assert partial["mismatched"] == ["encoder_layer_0/ffn/inner/kernel (3, 3) -> (16, 32)"]
    assert partial["unused"] == ["encoder_layer_9/ffn/inner/bias"]
    np.testing.assert_array_equal(deep.encoder.layers[0].ffn.inner.bias.numpy(), 1.0)
    unrelated = tf.train.Checkpoint(step=tf.Variable(1)).write(str(tmp_path / "unrelated"))
    with pytest.raises(CheckpointError, match="no weight of .* matches this model"):
        checkpoints.warm_start(deep, unrelated)
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in glob.glob(path + ".*"):
        data = open(name, "rb").read()
        (broken / os.path.basename(name)).write_bytes(data[:10] if ".data" in name else data)
    with pytest.raises(CheckpointError, match="--init_from: cannot read"):
        checkpoints.warm_start(deep, str(broken / "ckpt-1"))


@pytest.mark.slow
def test_init_from_the_command_line(corpus, trained_model, tmp_path, capsys, caplog):
    # trained_model: a 1+1-layer transformer; its layers and embeddings start layer 0 of a
    # 2+2-layer deep model, whose second layers and aggregation nodes are new.
    deep = str(tmp_path / "deep")
    flags = [f for f in tiny_train_flags(corpus, deep, steps=2)
             if not f.startswith(("--model=", "--encoder_layers", "--decoder_layers"))] + [
        "--model=deep_transformer", "--encoder_layers=2", "--decoder_layers=2", "--log_every=1",
        "--encoder_aggregation=hierarchical", "--decoder_aggregation=hierarchical",
        "--diversity_weight=1"]
    caplog.clear()
    assert run_cli("train", *flags, f"--init_from={trained_model}") == 0
    log = caplog.text
    assert "vocabulary of --init_from copied" in log
    baseline = checkpoints.resolve(trained_model)
    stored = [k for k, _ in tf.train.list_variables(baseline) if k.startswith("model/")]
    assert f"--init_from: loaded {len(stored)} weights" in log and f"from {baseline}" in log
    new = log.split("new weights")[1].splitlines()[0]
    assert "encoder_aggregation/node_0/inner/kernel" in new and "decoder_layer_1/ffn/outer/bias" in new
    assert "encoder_layer_0" not in new
    # Both terms of the objective are logged.
    assert events(deep, "train/diversity") and events(deep, "train/translation_loss")
    capsys.readouterr()
    for bad, message in ((str(tmp_path / "nowhere"), "neither a model directory nor a checkpoint"),
                         (str(tmp_path / "deep" / "logs"), "--init_from: no checkpoint in")):
        assert run_cli("train", *flags, f"--model_dir={tmp_path / 'd2'}", f"--init_from={bad}") == 2
        err = capsys.readouterr().err
        assert err.startswith("tfnmt train: error:") and message in err and len(err.splitlines()) == 1
