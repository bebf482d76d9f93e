"""Checkpoints written before a change keep restoring: tests/fixtures/old_checkpoints holds, per
registered model, a model directory written by tests/make_old_checkpoints.py with an older
version of the code. The current code must read its config.json, build the model, restore every
weight under the same checkpoint key and compute the same logits."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO, run_cli
from contract import TINY, logits_of
from tfnmt import formats
from tfnmt import model_dir as model_dir_lib
from tfnmt.models import catalog
from tfnmt.training import checkpoints
from tfnmt.training.checkpoints import trackables

OLD = os.path.join(REPO, "tests", "fixtures", "old_checkpoints")


# Registered after the checkpoints were made: nothing older to restore.
NEW_SINCE = {"hybrid"}


def test_every_registered_model_has_an_old_checkpoint():
    models = {model_dir_lib.read_config(os.path.join(OLD, case))["model"] for case in os.listdir(OLD)}
    assert models == set(TINY) - NEW_SINCE


@pytest.mark.parametrize("name", sorted(os.listdir(OLD)))
def test_a_checkpoint_written_by_older_code_restores_every_weight_and_the_same_logits(name):
    directory = os.path.join(OLD, name)  # or a copy's path
    model = catalog.build(model_dir_lib.read_config(directory))
    # assert_consumed: every variable of the model is read, and every value of the checkpoint.
    tf.train.Checkpoint(**trackables(model)).restore(checkpoints.resolve(directory)).assert_consumed()
    stored = np.load(os.path.join(directory, "logits.npz"))
    logits = logits_of(model({"source": tf.constant(stored["source"]),
                              "target_in": tf.constant(stored["target_in"])}))
    np.testing.assert_allclose(logits.numpy(), stored["logits"], atol=1e-5)


@pytest.mark.parametrize("name", sorted(os.listdir(OLD)))
def test_an_old_model_directory_resumes_under_every_hyper_parameter_declared_since(name):
    # `train` with --model (every flagfile gives it) asks for every declared default and
    # refuses a directory whose config differs: one without a hyper-parameter declared since
    # must read as that default, or resuming it fails ("trained with --X=None").
    saved = model_dir_lib.read_config(os.path.join(OLD, name))
    cls = catalog.get(saved["model"])
    model_dir_lib.check_compatible(saved, dict(saved, hparams=cls.with_defaults(saved["hparams"])))


@pytest.mark.parametrize("name,old,new,value", [
    # DenseNMT's --embedding_dim is --table_dim since; that model directory predates it.
    ("densenmt-summaries-dense1", "embedding_dim", "table_dim", 8),
    # The convolutional families' --hidden_dim is --residual_dim since.
    *[(name, "hidden_dim", "residual_dim", 12) for name in ("convs2s", "densenmt")],
])
def test_a_config_json_with_a_renamed_hyper_parameter_reads_under_the_new_name(name, old, new,
                                                                              value):
    directory = os.path.join(OLD, name)
    with open(model_dir_lib.config_path(directory)) as f:
        assert f'"{old}"' in f.read()
    hparams = model_dir_lib.read_config(directory)["hparams"]
    assert hparams[new] == value and old not in hparams


def test_a_hybrid_config_with_the_old_name_keeps_it_where_its_recurrent_part_reads_it():
    # Before --residual_dim, a recurrent encoder and a convolutional decoder read one
    # --hidden_dim: both widths now, each under its own name.
    config = {"model": "hybrid", "hparams": {"encoder_type": "recurrent", "decoder_type": "densenmt",
                                             "hidden_dim": 12}}
    upgrade = model_dir_lib.upgrade
    assert upgrade(config)["hparams"]["hidden_dim"] == 12
    assert upgrade(config)["hparams"]["residual_dim"] == 12
    config["hparams"]["encoder_type"] = "transformer"
    assert "hidden_dim" not in upgrade(config)["hparams"]
    assert upgrade(config)["hparams"]["residual_dim"] == 12


@pytest.mark.parametrize("name,added", [
    ("deep_transformer-pre_norm-hierarchical", {"dense_aggregation_norm": "layer"}),
    *[(name, dict(scale_context=False, scale_encoder_gradients=False, scale_values=False,
                  narrow_positions=False))
      for name in ("convs2s", "densenmt-residual-multistep")],
    ("densenmt-summaries-dense1", {"narrow_positions": False}),
    *[(name, {"decoder_gru_form": "appendix"}) for name in ("gru_encdec", "conv_encoder")],
])
def test_a_config_json_from_before_a_hyper_parameter_reads_as_the_model_it_trained(name, added):
    # The paper's form became the default after these were trained with the other one.
    directory = os.path.join(OLD, name)
    with open(model_dir_lib.config_path(directory)) as f:
        assert not any(key in f.read() for key in added)
    hparams = model_dir_lib.read_config(directory)["hparams"]
    assert {key: hparams[key] for key in added} == added


def test_only_a_format_1_config_is_upgraded():
    # A format-2 config lacking a declared name is not one written before the name existed:
    # it is not given the old form (train refuses to resume it instead).
    config = {"model": "convs2s", "hparams": {"residual_dim": 12}}
    assert model_dir_lib.upgrade(config)["hparams"]["narrow_positions"] is False
    assert model_dir_lib.upgrade(config)["format"] == formats.CONFIG_FORMAT == 2
    config["format"] = 2
    assert model_dir_lib.upgrade(config) == config


@pytest.mark.parametrize("name", sorted(os.listdir(OLD)))
def test_tfnmt_upgrade_rewrites_config_json_once_keeps_the_old_one_and_the_model(name, tmp_path,
                                                                                capsys):
    directory = str(tmp_path / name)
    shutil.copytree(os.path.join(OLD, name), directory)
    read_before = model_dir_lib.read_config(directory)
    with open(model_dir_lib.config_path(directory)) as f:
        written_before = json.load(f)
    assert run_cli("upgrade", f"--model_dir={directory}") == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"{directory}/config.json: format 1 -> 2 (") and out.count("\n") == 0
    with open(os.path.join(directory, "config.format1.json")) as f:
        assert json.load(f) == written_before
    with open(model_dir_lib.config_path(directory)) as f:
        assert json.load(f) == read_before  # as every verb read it before: the same model
    test_a_checkpoint_written_by_older_code_restores_every_weight_and_the_same_logits(directory)
    assert run_cli("upgrade", f"--model_dir={directory}") == 0
    assert "is in format 2 already: nothing to do" in capsys.readouterr().out
    assert sorted(os.listdir(directory)) == sorted(os.listdir(os.path.join(OLD, name)) +
                                                   ["config.format1.json"])


@pytest.mark.parametrize("value, message", [
    (formats.CONFIG_FORMAT + 1, "is in format 3, written by a newer tfnmt than this one (which "
                                "reads formats 1 to 2): upgrade tfnmt"),
    ("2", 'is not a tfnmt config (no whole-number "format"); train anew or restore the file')])
def test_a_config_json_of_a_newer_or_garbled_format_is_one_error_line(value, message,
                                                                      trained_model, tmp_path,
                                                                      capsys):
    directory = str(tmp_path / "m")
    shutil.copytree(trained_model, directory)
    with open(model_dir_lib.config_path(directory)) as f:
        config = json.load(f)
    assert config["format"] == formats.CONFIG_FORMAT  # what `train` writes
    config["format"] = value
    with open(model_dir_lib.config_path(directory), "w") as f:
        json.dump(config, f)
    for verb in ("upgrade", "translate"):
        assert run_cli(verb, f"--model_dir={directory}") == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"tfnmt {verb}: error: {directory}/config.json {message}"]
