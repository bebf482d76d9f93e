"""`tfnmt experiment --warm_start` (paper 002's protocol): every system after the baseline
starts from the baseline's run of its seed, which must be trained first. Runs the tiny
experiment of helpers/experiments.py, one seed."""

import json

import pytest

from conftest import run_cli
from helpers.experiments import report as _report
from helpers.experiments import tiny_experiment


@pytest.mark.slow
def test_a_system_starts_from_its_seeds_baseline_once_that_is_trained(corpus, tmp_path, caplog):
    (tmp_path / "files").mkdir()
    config, _ = tiny_experiment(corpus, tmp_path / "files")
    # Shorter than the tiny experiment's runs: what is tested is where each starts.
    short = tmp_path / "short.cfg"
    short.write_text("\n".join([f"--flagfile={config}", "--train_steps=4", "--validate_every=4",
                                "--save_every=4", "--test_limit=5", "--bleu_sentences=0"]) + "\n")
    flags = [f"--flagfile={short}", "--warm_start", "--seeds=1", f"--runs_dir={tmp_path}"]
    root = tmp_path / "tiny"
    # The second share holds only narrow/seed1, whose baseline is not trained yet: it is
    # refused in one line and the command fails, with nothing trained.
    with caplog.at_level("INFO"):
        assert run_cli("experiment", *flags, "--shard=2/2") != 0
    assert ("narrow/seed1 failed: --warm_start: narrow/seed1 starts from small/seed1, which is "
            "not trained yet: train it first") in caplog.text
    assert not (root / "narrow" / "seed1" / "ckpt").exists()
    caplog.clear()

    # The whole file trains the baseline first, then starts narrow from its final checkpoint.
    with caplog.at_level("INFO"):
        assert run_cli("experiment", *flags) == 0
    start = str(root / "small" / "seed1" / "ckpt" / "ckpt-4")
    record = json.loads((root / "narrow" / "seed1" / "run.json").read_text())
    assert record["init_from"] == start
    assert "init_from" not in json.loads((root / "small" / "seed1" / "run.json").read_text())
    # narrow differs from small in its feed-forward width only: all else is loaded.
    loaded = [line for line in caplog.text.splitlines() if "--init_from: loaded" in line]
    assert len(loaded) == 1 and loaded[0].endswith(f"from {start}")
    assert "--init_from: shape differs, freshly initialised: " in caplog.text
    assert "ffn" in caplog.text.split("shape differs")[1].splitlines()[0]
    report = _report(root)
    assert report["warm_start"] is True
    assert [r["status"] for r in report["runs"]] == ["complete", "complete"]
    text = (root / "report.md").read_text()
    assert ("- Warm start: every system but the baseline started from the weights of the "
            "baseline's run of its seed (its final checkpoint)") in text
