"""`tfnmt experiment --budget=converge`: every run stops by one rule (early stopping on
validation BLEU, --train_steps the cap) and is scored at its best checkpoint; the experiment
file must set that rule. Runs the tiny experiment of helpers/experiments.py (one run of it)."""

import json

import pytest

from conftest import run_cli
from helpers.experiments import report as _report
from helpers.experiments import tiny_experiment


@pytest.fixture(scope="module")
def experiment(corpus, tmp_path_factory):
    """An experiment file and where its runs go."""
    return tiny_experiment(corpus, tmp_path_factory.mktemp("experiment"))


@pytest.mark.slow
def test_a_converge_budget_stops_every_run_by_one_rule_and_scores_its_best(
        experiment, tmp_path, caplog):
    """--budget=converge: early stopping on validation BLEU, --train_steps the cap; each run's
    best checkpoint by validation BLEU is scored, and the report says so."""
    from tfnmt.training import checkpoints
    config, _ = experiment
    cap = 40
    # One run of the two (--shard=1/2) is what the rule needs, and half the time.
    flags = [f"--flagfile={config}", "--budget=converge", "--experiment=converge", "--seeds=1",
             f"--runs_dir={tmp_path}", f"--train_steps={cap}", "--best_metric=bleu",
             "--early_stopping_patience=1", "--shard=1/2"]
    with caplog.at_level("INFO"):
        assert run_cli("experiment", *flags) == 0
    root = tmp_path / "converge"
    report = _report(root)
    assert report["budget"]["kind"] == "converge" and report["budget"]["train_steps"] == cap
    assert report["budget"]["early_stopping_patience"] == 1
    assert [r["status"] for r in report["runs"]] == ["complete", "not started"]
    # Tiny models' validation BLEU stops rising almost at once: the run stops before the cap.
    assert "early stopping: validation bleu has not improved" in caplog.text
    entry = report["runs"][0]
    assert entry["step"] < cap
    record = json.loads((root / "small" / "seed1" / "run.json").read_text())
    assert record["budget"] == "converge" and record["step"] == entry["step"]

    # The checkpoint scored is best.json's first, wherever it is: rank an older one first and
    # score again.
    run = root / "small" / "seed1"
    index = run / "best" / "best.json"
    entries = json.loads(index.read_text())
    older = min(entries, key=lambda e: e["step"])
    assert older["step"] < report["runs"][0]["step"]
    index.write_text(json.dumps([dict(older, bleu=100.0)]
                                + [e for e in entries if e is not older]))
    (run / "scores.json").unlink()
    assert run_cli("experiment", *flags) == 0
    scores = json.loads((run / "scores.json").read_text())
    assert scores["checkpoint_step"] == older["step"] and scores["step"] == report["runs"][0]["step"]
    assert checkpoints.list_checkpoints(str(run), "best")[0].endswith(f"ckpt-{older['step']}")
    text = (root / "report.md").read_text()
    assert "until validation BLEU converges" in text and "its best checkpoint by validation BLEU" in text
    assert f"| small | 1 | {older['step']} of {report['runs'][0]['step']} |" in text

    # A fixed-budget record does not count as finished under the converge rule.
    assert run_cli("experiment", *flags, "--budget=steps", "--report_only") == 0
    assert [r["status"] for r in _report(root)["runs"]] == ["partial", "not started"]


@pytest.mark.parametrize("flags, message", [
    (["--budget=converge"], "set --best_metric=bleu and --early_stopping_patience=N"),
    (["--budget=converge", "--best_metric=bleu"], "--early_stopping_patience=N"),
    (["--budget=converge", "--best_metric=loss", "--early_stopping_patience=3"],
     "--best_metric=bleu"),
    (["--budget=converge", "--best_metric=bleu", "--early_stopping_patience=3",
      "--average_checkpoints=2"], "scores each run's best checkpoint"),
])
def test_a_converge_budget_needs_its_rule_in_the_experiment_file(experiment, flags, message,
                                                                 capsys):
    config, _ = experiment
    assert run_cli("experiment", f"--flagfile={config}", *flags, "--report_only") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tfnmt experiment: error: --budget=converge") and message in err
