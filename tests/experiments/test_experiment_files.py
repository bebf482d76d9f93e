"""`tfnmt experiment`'s files and flags: every experiment file under configs/experiments/ parses
and names train flagfiles (one per paper at each budget), and bad flags are one-line errors."""

import dataclasses
import glob
import os

import pytest

from conftest import REPO, run_cli
from helpers.experiments import tiny_experiment
from helpers.experiments import write as _write


@pytest.fixture(scope="module")
def experiment(corpus, tmp_path_factory):
    """An experiment file and where its runs go."""
    return tiny_experiment(corpus, tmp_path_factory.mktemp("experiment"))


@pytest.mark.parametrize("flag, message", [
    ("--shard=3/2", "--shard='3/2': give I/N"),
    ("--average_checkpoints=-1", "--average_checkpoints=-1"),
    ("--average_checkpoints=6", "--keep_checkpoints=5"),
    ("--systems=a=nowhere.cfg,b=nowhere.cfg", "flagfile nowhere.cfg is not in the current directory"),
    ("--seeds=1,x", "--seeds='1,x'"),
])
def test_bad_experiment_flags_are_one_line(experiment, flag, message, capsys):
    config, _ = experiment
    assert run_cli("experiment", f"--flagfile={config}", flag) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tfnmt experiment: error:") and message in err and "\n" not in err


def test_an_experiment_needs_one_budget(tmp_path, capsys):
    config = _write(tmp_path / "x.cfg", ["--experiment=x", "--systems=a=x.cfg,b=x.cfg"])
    assert run_cli("experiment", f"--flagfile={config}") == 2
    assert "one budget" in capsys.readouterr().err
    # Sentence batches with the token batches' default left on: the report would state one
    # budget and the runs train another.
    config = _write(tmp_path / "y.cfg", ["--experiment=y", "--systems=a=x.cfg,b=x.cfg",
                                         "--train_steps=10", "--batch_size=8"])
    assert run_cli("experiment", f"--flagfile={config}") == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "tfnmt experiment: error: an experiment's batches are either --batch_tokens or "
        "--batch_size, the other 0, not --batch_tokens=4096 and --batch_size=8")


EXPERIMENTS = sorted(glob.glob(os.path.join(REPO, "configs", "experiments", "**", "*.cfg"),
                           recursive=True))


def test_there_is_an_experiment_per_paper_at_the_cpu_and_the_gpu_budget():
    papers = {"densenmt", "deeplau", "deeplau-2x2", "deep_representations", "ctc_nat",
              "conv_encoder"}
    for folder in ("experiments", "gpu"):
        assert papers <= {os.path.basename(p)[:-len(".cfg")] for p in EXPERIMENTS
                          if os.path.basename(os.path.dirname(p)) == folder}


@pytest.mark.parametrize("path", EXPERIMENTS, ids=[os.path.relpath(p, REPO) for p in EXPERIMENTS])
def test_experiment_file_parses_and_names_train_flagfiles(path, monkeypatch):
    monkeypatch.chdir(REPO)  # experiment files name flagfiles by paths from the repository root
    from tfnmt.cli import experiment
    from tfnmt.cli.flags import FLAGS, read
    from tfnmt.decoding.options import DecodingOptions
    from tfnmt.experiments.options import ExperimentOptions
    from tfnmt.models import catalog
    FLAGS.unparse_flags()
    try:
        FLAGS(["tfnmt", f"--flagfile={path}"])
        spec = experiment.spec_from_flags(read(ExperimentOptions))
        budget = spec["budget"]
        folder = os.path.basename(os.path.dirname(path))
        if folder == "gpu":  # the papers' sizes and data
            assert spec["seeds"] == [1, 2, 3] and budget["train_steps"] >= 100_000
        elif folder == "converged":  # configs/experiments/converge.flags
            assert budget["kind"] == "converge" and budget["batch_tokens"] == 2048
            assert budget["best_metric"] == "bleu" and budget["early_stopping_patience"] == 3
            assert spec["seeds"] == [1] and spec["test_splits"] == ["test"]
        else:  # configs/experiments/cpu.flags
            assert budget["train_steps"] == 1500 and budget["batch_tokens"] == 2048
            assert spec["seeds"] == [1, 2] and spec["test_splits"] == ["test"]
        forwarded = experiment.forwarded_flags(budget.get("kind", "steps"))
        assert f"--train_steps={budget['train_steps']}" in forwarded
        # Every system decodes alike, but CTC models: greedy, against the baseline's beam.
        assert spec["system_decoding"] == {
            name: {"beam_size": 1} for name, _ in spec["systems"][1:]
            if os.path.basename(path) == "ctc_nat.cfg"}
        for name, flagfile in spec["systems"]:
            FLAGS.unparse_flags()
            FLAGS(["tfnmt", f"--flagfile={flagfile}", *forwarded])
            catalog.get(FLAGS.model)
            # The experiment's budget wins over the system's own.
            assert [FLAGS[n].value for n in experiment.BUDGET] == [
                budget[n] for n in experiment.BUDGET], name
            # Its test splits are decoded as its `train` decodes for validation.
            assert dataclasses.asdict(read(DecodingOptions)) == spec["decodings"][name], name
    finally:
        FLAGS.unparse_flags()
