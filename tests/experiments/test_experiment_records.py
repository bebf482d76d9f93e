"""What an experiment's records let it skip: a run counts as trained only under the budget and
stopping rule it was trained by, and as scored only on the checkpoint its budget scores."""

import os

from absl import flags

from tfnmt.cli import experiment
from tfnmt.cli.flags import FLAGS, read
from tfnmt.experiments import runs as runs_lib
from tfnmt.experiments.options import ExperimentOptions

STEPS_BUDGET = {"train_steps": 8, "batch_tokens": 64, "batch_size": 0, "accumulate_steps": 1}
CONVERGE = dict(STEPS_BUDGET, kind="converge", best_metric="bleu", early_stopping_patience=3,
                validate_every=4, bleu_sentences=10)


def _run(tmp_path, run_record=None, scores=None):
    run = runs_lib.Run("sys", 1, "sys.cfg", str(tmp_path / "sys" / "seed1"))
    os.makedirs(run.directory)
    if run_record is not None:
        runs_lib.write_json(os.path.join(run.directory, runs_lib.RUN_FILE), run_record)
    if scores is not None:
        runs_lib.write_json(os.path.join(run.directory, runs_lib.SCORES_FILE), scores)
    return run


def test_a_run_is_trained_only_under_the_rule_it_was_trained_by(tmp_path):
    record = {"system": "sys", "seed": 1, "flagfile": "sys.cfg", "budget_steps": 8, "step": 8,
              "budget": "converge", "rule": CONVERGE}
    run = _run(tmp_path, record)
    assert runs_lib.trained(run, CONVERGE)
    assert not runs_lib.trained(run, dict(CONVERGE, early_stopping_patience=5))
    assert not runs_lib.trained(run, dict(CONVERGE, validate_every=2))
    assert not runs_lib.trained(run, STEPS_BUDGET)
    # The batch size is part of a fixed budget too.
    steps_record = {k: v for k, v in record.items() if k not in ("budget", "rule")}
    fixed = _run(tmp_path / "c", dict(steps_record, rule=STEPS_BUDGET))
    assert runs_lib.trained(fixed, STEPS_BUDGET)
    assert not runs_lib.trained(fixed, dict(STEPS_BUDGET, batch_tokens=128))
    # A record written before the rule was kept goes by its steps and kind.
    legacy = _run(tmp_path / "d", steps_record)
    assert runs_lib.trained(legacy, STEPS_BUDGET)


def test_a_run_scored_on_its_last_checkpoint_is_not_scored_for_a_converge_budget(tmp_path):
    scores = {"step": 8, "checkpoint": "ckpt-8", "checkpoint_step": 8, "parameters": 10,
              "tests": {"test": {}}}
    last = _run(tmp_path, {"step": 8}, dict(scores, scored="last"))
    assert runs_lib.scored(last, ["test"], "last")
    assert not runs_lib.scored(last, ["test"], runs_lib.scored_checkpoint(CONVERGE))
    best = _run(tmp_path / "b", {"step": 8}, dict(scores, scored="best"))
    assert runs_lib.scored(best, ["test"], runs_lib.scored_checkpoint(CONVERGE))
    assert not runs_lib.scored(best, ["test"], runs_lib.scored_checkpoint(STEPS_BUDGET))
    # Scores written before the field: the last checkpoint, all an experiment scored then.
    legacy = _run(tmp_path / "c", {"step": 8}, scores)
    assert runs_lib.scored(legacy, ["test"], "last")
    assert not runs_lib.scored(legacy, ["test"], "best")


def test_the_converge_rule_wins_over_a_systems_own_validation_settings(tmp_path):
    system = tmp_path / "system.cfg"
    system.write_text("--validate_every=777\n--bleu_sentences=200\n--validate_per_epoch=true\n"
                      "--best_metric=loss\n")
    exp = tmp_path / "exp.cfg"
    # The experiment sets the two flags it must; the validation cadence is train's default.
    exp.write_text(f"--experiment=e\n--systems=a={system},b={system}\n--train_steps=8\n--batch_tokens=64\n"
                   "--budget=converge\n--best_metric=bleu\n--early_stopping_patience=3\n")
    # From the defaults: a flag an earlier test of this worker parsed would otherwise stay set.
    FLAGS.unparse_flags()
    try:
        FLAGS(["tfnmt", f"--flagfile={exp}"])
        budget = experiment.spec_from_flags(read(ExperimentOptions))["budget"]
        forwarded = experiment.forwarded_flags("converge")
        FLAGS.unparse_flags()
        FLAGS(["tfnmt", f"--flagfile={system}", *forwarded])
        assert [FLAGS[name].value for name in experiment.STOPPING] == [
            budget[name] for name in experiment.STOPPING]
        assert FLAGS.validate_every != 777 and FLAGS.validate_per_epoch is False
    finally:
        FLAGS.unparse_flags()


def test_validating_per_epoch_is_refused_under_the_converge_budget(tmp_path):
    exp = tmp_path / "exp.cfg"
    exp.write_text("--experiment=e\n--systems=s=x.cfg\n--train_steps=8\n--batch_tokens=64\n"
                   "--budget=converge\n--best_metric=bleu\n--early_stopping_patience=3\n"
                   "--validate_per_epoch=true\n")
    try:
        FLAGS(["tfnmt", f"--flagfile={exp}"])
        try:
            experiment.spec_from_flags(read(ExperimentOptions))
        except flags.Error:
            raise
        except Exception as e:  # ConfigError
            assert "drop --validate_per_epoch" in str(e)
        else:
            raise AssertionError("--validate_per_epoch was accepted under --budget=converge")
    finally:
        FLAGS.unparse_flags()
