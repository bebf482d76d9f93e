"""`tfnmt experiment`: a tiny experiment (2 systems x 2 seeds, a few steps on the synthetic corpus,
helpers/experiments.py) run in shares, interrupted, resumed, its report checked against
sacreBLEU, its checkpoints averaged, its records kept as docs/results keeps them; a failing run
and the time left. The converge budget: test_converge_budget.py; experiment files and flags:
test_experiment_files.py."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import sacrebleu
from sacrebleu.significance import PairedTest

from conftest import REPO, run_cli
from helpers.experiments import STEPS, tiny_experiment
from helpers.experiments import complete as _complete
from helpers.experiments import report as _report
from helpers.experiments import steps as _steps
from helpers.experiments import write as _write
from tfnmt.experiments import report as report_lib


@pytest.fixture(scope="module")
def experiment(corpus, tmp_path_factory):
    """An experiment file and where its runs go."""
    return tiny_experiment(corpus, tmp_path_factory.mktemp("experiment"))


@pytest.mark.slow
def test_tiny_experiment_in_shares_interrupted_resumed_and_reported(experiment, caplog):
    config, root = experiment
    runs = ["small/seed1", "narrow/seed1", "small/seed2", "narrow/seed2"]
    # Share 1 of 4, the first run only, interrupted halfway (a smaller budget stands in for a
    # kill).
    assert run_cli("experiment", f"--flagfile={config}", "--shard=1/4",
                   f"--train_steps={STEPS // 2}") == 0
    assert [_steps(root, r) for r in runs] == [STEPS // 2, 0, 0, 0]
    assert run_cli("experiment", f"--flagfile={config}", "--report_only") == 0
    partial = _report(root)
    assert [r["status"] for r in partial["runs"]] == ["partial"] + ["not started"] * 3
    with open(os.path.join(root, "report.md")) as f:
        assert "Partial experiment" in f.read()
    assert partial["results"]["test"]["small"]["bleu_mean"] is None

    # The whole experiment: the interrupted run resumes from its checkpoint.
    with caplog.at_level("INFO"):
        assert run_cli("experiment", f"--flagfile={config}") == 0
    assert f"resuming from {root}/small/seed1/ckpt/ckpt-{STEPS // 2}" in caplog.text
    assert [_steps(root, r) for r in runs] == [STEPS] * 4
    report = _report(root)
    assert [r["status"] for r in report["runs"]] == ["complete"] * 4
    row = report["results"]["test"]["narrow"]
    assert row["runs"] == 2 and row["bleu_mean"] is not None and row["parameters"] > 0
    assert row["sentences_per_second_mean"] > 0 and row["target_tokens_per_second_mean"] > 0
    # The literature's figure beside sacreBLEU's, the mean of the runs' own.
    assert row["bleu_moses_lc_mean"] == pytest.approx(np.mean([
        json.load(open(os.path.join(root, "narrow", f"seed{seed}", "scores.json")))
        ["tests"]["test"]["bleu_moses_lc"] for seed in (1, 2)]))
    base_row = report["results"]["test"]["small"]
    assert base_row["decode_speedup"] == 1.0
    assert row["decode_speedup"] == pytest.approx(
        row["sentences_per_second_mean"] / base_row["sentences_per_second_mean"])
    with open(os.path.join(root, "report.md")) as f:
        text = f.read()
    assert f"| {row['decode_speedup']:.2f}x | 2 |" in text
    # Each system decodes as its flagfile says where the experiment file is silent, and the
    # report says so.
    assert report["decoding"]["max_decode_length"] == 256 and not report["decoding"]["sampling"]
    assert report["system_decoding"] == {"narrow": {
        "max_decode_length": 3, "sampling": True, "sampling_temperature": 1000.0}}
    assert "except narrow, as its flagfile says" in text and "max_decode_length 3" in text
    words = [len(line.split()) for seed in (1, 2)
             for line in open(f"{root}/narrow/seed{seed}/test/test.hyp")]
    assert max(words) <= 3 and sum(n > 0 for n in words) > 20
    assert [b["bucket"] for b in row["length_buckets"]] == ["1-3", "4-5", ">5"]
    # The validation curves: every validation, with the target tokens seen growing.
    curve = report["runs"][0]["validation"]
    assert [p["step"] for p in curve] == [5, 10]
    assert 0 < curve[0]["target_tokens"] < curve[1]["target_tokens"]

    # p-values are sacreBLEU's tests, ties counted as extreme: the pooled bootstrap test,
    # recomputed here from the files.
    def lines(path):
        with open(path) as f:
            return f.read().splitlines()
    references = lines(os.path.join(root, "data/test.ref"))
    assert len(references) == 20
    base = lines(f"{root}/small/seed1/test/test.hyp") + lines(f"{root}/small/seed2/test/test.hyp")
    other = lines(f"{root}/narrow/seed1/test/test.hyp") + lines(f"{root}/narrow/seed2/test/test.hyp")
    with report_lib._ties_count_as_extreme():
        _, scores = PairedTest([("b", base), ("s", other)], {"BLEU": sacrebleu.metrics.BLEU()},
                               [references * 2], test_type="bs")()
    pooled = row["significance"]["pooled"]
    assert pooled["bootstrap"]["bleu"] == pytest.approx(scores["BLEU"][1].p_value)
    for p in [pooled] + list(row["significance"]["per_seed"].values()):
        for test in ("bootstrap", "randomization"):
            assert 0 <= p[test]["bleu"] <= 1 and 0 <= p[test]["chrf"] <= 1
    assert set(row["significance"]["per_seed"]) == {"1", "2"}
    assert row["significance"]["identical_outputs"] == [] and "(identical outputs)" not in text
    assert "Null hypothesis: the system and the baseline are equally good" in text

    # The plots: PNGs, with one thin line per seed and a bold mean per system in each panel.
    assert report["plots"] == {"validation_bleu.png": 6, "validation_loss.png": 6,
                               "length_bleu_test.png": 2}
    for name in report["plots"]:
        with open(os.path.join(root, name), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"

    # Run again, it trains and scores nothing; rebuilt from what exists, the report is the same.
    with open(os.path.join(root, "report.md")) as f:
        markdown = f.read()
    scored = [os.path.getmtime(os.path.join(root, r, "scores.json")) for r in runs]
    caplog.clear()
    with caplog.at_level("INFO"):
        assert run_cli("experiment", f"--flagfile={config}") == 0
    assert caplog.text.count("is trained") == 4 and "training transformer" not in caplog.text
    assert [os.path.getmtime(os.path.join(root, r, "scores.json")) for r in runs] == scored
    assert run_cli("experiment", f"--flagfile={config}", "--report_only") == 0
    assert _report(root) == report
    with open(os.path.join(root, "report.md")) as f:
        assert f.read() == markdown


def _without_directories(report):
    return dict(report, runs=[{k: v for k, v in r.items() if k != "directory"}
                              for r in report["runs"]])


@pytest.mark.slow
def test_the_records_docs_results_keeps_rebuild_the_report_and_count_as_finished(
        experiment, tmp_path, caplog, capsys):
    """What git keeps of a finished experiment under docs/results/.gitignore (no checkpoints,
    vocabularies or data) is enough: the report rebuilt from it is the same, and running the
    experiment again trains and scores nothing."""
    config, root = experiment
    runs = ["small/seed1", "narrow/seed1", "small/seed2", "narrow/seed2"]
    # Done already by the test above (this test comes before the averages are added, so that
    # its report is the one it left).
    if not _complete(root) or _report(root)["average_checkpoints"]:
        assert run_cli("experiment", f"--flagfile={config}") == 0
    report = _report(root)
    with open(os.path.join(root, "report.md")) as f:
        markdown = f.read()

    repo = tmp_path / "repo"
    shutil.copytree(root, repo / "docs" / "results" / "tiny")
    shutil.copy(os.path.join(REPO, "docs", "results", ".gitignore"), repo / "docs" / "results")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    kept = subprocess.run(["git", "-C", str(repo), "ls-files"], check=True, capture_output=True,
                          text=True).stdout.split()
    assert "docs/results/tiny/small/seed1/test/test.hyp" in kept
    assert not [f for f in kept if "/ckpt/" in f or "/data/" in f or f.endswith("spm.model")]
    results = tmp_path / "clone" / "docs" / "results"
    for name in kept:
        os.makedirs(os.path.dirname(tmp_path / "clone" / name), exist_ok=True)
        shutil.copy(repo / name, tmp_path / "clone" / name)
    copy = str(results / "tiny")

    # The test references are written back from the data for the significance tests.
    assert run_cli("experiment", f"--flagfile={config}", f"--runs_dir={results}",
                   "--report_only") == 0
    assert _without_directories(_report(copy)) == _without_directories(report)
    with open(os.path.join(copy, "report.md")) as f:
        assert f.read() == markdown
    caplog.clear()
    with caplog.at_level("INFO"):
        assert run_cli("experiment", f"--flagfile={config}", f"--runs_dir={results}") == 0
    assert caplog.text.count("is trained") == 4 and "training transformer" not in caplog.text
    assert "sentences/s)" not in caplog.text

    # At another budget there is nothing to resume from: refused, the records left as they were.
    with open(os.path.join(copy, runs[0], "run.json")) as f:
        record = f.read()
    capsys.readouterr()
    assert run_cli("experiment", f"--flagfile={config}", f"--runs_dir={results}",
                   f"--train_steps={2 * STEPS}", "--shard=1/4") == 2
    assert "no checkpoint to go on from" in capsys.readouterr().err
    with open(os.path.join(copy, runs[0], "run.json")) as f:
        assert f.read() == record


@pytest.mark.slow
def test_averaged_checkpoints_are_scored_once_and_reported(experiment, caplog):
    """--average_checkpoints=2 added to the tiny experiment (trained by the tests above, or here):
    each run's last two checkpoints are averaged into RUN/averaged-2 and scored, and reported as
    systems of their own; run again, nothing is averaged or scored twice."""
    import numpy as np
    import tensorflow as tf
    from tfnmt.training import checkpoints
    config, root = experiment
    runs = ["small/seed1", "narrow/seed1", "small/seed2", "narrow/seed2"]
    if not _complete(root):  # else done already by the tests above
        assert run_cli("experiment", f"--flagfile={config}") == 0
    assert run_cli("experiment", f"--flagfile={config}", "--average_checkpoints=2",
                   "--report_only") == 0
    assert _report(root)["averaged_results"]["test"]["small"]["runs"] == 0
    with open(os.path.join(root, "report.md")) as f:
        assert ("**Averages not scored yet** (left out of the averaged rows): small/seed1, "
                "narrow/seed1, small/seed2, narrow/seed2.") in f.read()

    assert run_cli("experiment", f"--flagfile={config}", "--average_checkpoints=2") == 0
    report = _report(root)
    assert report["average_checkpoints"] == 2
    assert [r["averaged"]["steps"] for r in report["runs"]] == [[STEPS // 2, STEPS]] * 4
    row = report["averaged_results"]["test"]["narrow"]
    assert row["runs"] == 2 and row["bleu_mean"] is not None and row["chrf_mean"] is not None
    assert [b["bucket"] for b in row["length_buckets"]] == ["1-3", "4-5", ">5"]
    assert report["averaged_results"]["test"]["small"]["runs"] == 2
    assert report["plots"]["length_bleu_test.png"] == 4  # a dashed line per averaged system

    # The averaged model is the mean of the run's two checkpoints, weight by weight.
    run = os.path.join(root, "narrow/seed2")
    readers = [tf.train.load_checkpoint(p) for p in checkpoints.list_checkpoints(run)[:2]]
    averaged = tf.train.load_checkpoint(checkpoints.resolve(os.path.join(run, "averaged-2")))
    keys = [k for k in averaged.get_variable_to_shape_map() if k.startswith("model/")]
    assert keys and any(not np.array_equal(*(r.get_tensor(k) for r in readers)) for k in keys)
    for key in keys:
        np.testing.assert_allclose(averaged.get_tensor(key),
                                   (readers[0].get_tensor(key) + readers[1].get_tensor(key)) / 2,
                                   rtol=1e-6, atol=1e-7)

    # Scored like the final checkpoints: BLEU of its own translations, and p-values against the
    # baseline's averaged models that are sacreBLEU's tests (ties counted as extreme).
    def lines(path):
        with open(path) as f:
            return f.read().splitlines()
    references = lines(os.path.join(root, "data/test.ref"))
    hyps = {r: lines(f"{root}/{r}/averaged-2/test/test.hyp") for r in runs}
    seed2 = next(r for r in report["runs"] if (r["system"], r["seed"]) == ("narrow", 2))
    assert seed2["averaged"]["tests"]["test"]["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(hyps["narrow/seed2"], [references]).score)
    with report_lib._ties_count_as_extreme():
        _, scores = PairedTest([("b", hyps["small/seed1"] + hyps["small/seed2"]),
                                ("s", hyps["narrow/seed1"] + hyps["narrow/seed2"])],
                               {"BLEU": sacrebleu.metrics.BLEU()}, [references * 2],
                               test_type="bs")()
    assert row["significance"]["pooled"]["bootstrap"]["bleu"] == pytest.approx(
        scores["BLEU"][1].p_value)
    with open(os.path.join(root, "report.md")) as f:
        markdown = f.read()
    assert "| narrow (average of the last 2) |" in markdown
    assert "| small (average of the last 2) | 2 | 5, 10 |" in markdown

    # Run again: nothing is averaged or scored again; the report is rebuilt the same.
    files = [os.path.join(root, r, "averaged-2", name) for r in runs
             for name in ("scores.json", "test/test.hyp", f"ckpt/ckpt-{STEPS}.index")]
    written = [os.path.getmtime(path) for path in files]
    caplog.clear()
    with caplog.at_level("INFO"):
        assert run_cli("experiment", f"--flagfile={config}", "--average_checkpoints=2") == 0
    assert "averaging" not in caplog.text and "sentences/s)" not in caplog.text
    assert [os.path.getmtime(path) for path in files] == written
    assert run_cli("experiment", f"--flagfile={config}", "--average_checkpoints=2",
                   "--report_only") == 0
    assert _report(root) == report
    with open(os.path.join(root, "report.md")) as f:
        assert f.read() == markdown


def _checkpoints(directory, steps):
    """A checkpoint state naming `steps` (empty files: only their names are read)."""
    import tensorflow as tf
    os.makedirs(os.path.join(directory, "ckpt"))
    for step in steps:
        open(os.path.join(directory, "ckpt", f"ckpt-{step}.index"), "w").close()
    paths = [os.path.join(directory, "ckpt", f"ckpt-{step}") for step in steps]
    tf.compat.v1.train.update_checkpoint_state(os.path.join(directory, "ckpt"), paths[-1], paths)


def test_an_average_of_an_older_step_is_replaced_and_a_current_one_kept(tmp_path):
    from tfnmt.experiments import runs as runs_lib
    run = runs_lib.Run("a", 1, "a.cfg", str(tmp_path / "a" / "seed1"))
    _checkpoints(run.directory, [5, 10, 15])
    _checkpoints(os.path.join(run.directory, "averaged-2"), [10])  # before the run went on
    os.makedirs(os.path.join(run.directory, ".averaged-2.staging-1", "ckpt"))  # a killed one's
    calls = []

    def average_checkpoints(model_dir, output_dir, num, which):
        calls.append((model_dir, output_dir, num, which))
        assert not os.path.exists(output_dir)  # `tfnmt average` refuses a full directory
        _checkpoints(output_dir, [15])

    averaged, steps = runs_lib.average(run, 2, average_checkpoints)
    assert calls == [(run.directory, averaged.directory, 2, "last")] and steps == [10, 15]
    assert averaged.directory == os.path.join(run.directory, "averaged-2")
    assert sorted(os.listdir(run.directory)) == ["averaged-2", "ckpt"]  # the leftover is gone
    assert runs_lib.average(run, 2, average_checkpoints) == (averaged, [10, 15])
    assert len(calls) == 1


def test_a_failing_run_does_not_stop_the_others(experiment, tmp_path, capsys):
    config, _ = experiment
    broken = _write(tmp_path / "broken.cfg", ["--model=no_such_model"])
    also = _write(tmp_path / "also.cfg", ["--model=no_such_model_either"])
    assert run_cli("experiment", f"--flagfile={config}", f"--runs_dir={tmp_path}",
                   f"--systems=a={broken},b={also}", "--seeds=1") == 2
    err = capsys.readouterr().err
    assert "no_such_model" in err and "no_such_model_either" in err  # both were tried
    assert err.strip().splitlines()[-1] == (
        "tfnmt experiment: error: 2 run(s) failed: a/seed1, b/seed1 (the lines above say why); "
        "run the same command again once fixed: the others are kept")
    with open(tmp_path / "tiny" / "report.json") as f:
        assert [r["status"] for r in json.load(f)["runs"]] == ["not started"] * 2


@pytest.mark.slow
def test_a_diverged_run_is_reported_as_diverged_and_the_others_go_on(experiment, tmp_path,
                                                                     capsys):
    config, root = experiment
    with open(config) as f:
        small = [line for line in f.read().splitlines()
                 if line.startswith("--systems=")][0].split("small=")[1].split(",")[0]
    wild = _write(tmp_path / "wild.cfg", [f"--flagfile={small}", "--learning_rate=1e30"])
    # small/seed1 as the tiny experiment trained and scored it (the first test above, or here):
    # a run of this experiment's own, at the same budget, that the wild one must not spoil.
    if not _complete(root):
        assert run_cli("experiment", f"--flagfile={config}", "--shard=1/4") == 0
    shutil.copytree(os.path.join(root, "small", "seed1"), tmp_path / "tiny" / "small" / "seed1")
    assert run_cli("experiment", f"--flagfile={config}", f"--runs_dir={tmp_path}",
                   f"--systems=small={small},wild={wild}", "--seeds=1") == 2
    err = capsys.readouterr().err
    assert "experiment: wild/seed1 failed: training did not finish" in err
    assert "training loss is" in err and "tfnmt train: error:" in err and "Traceback" not in err
    runs = {r["system"]: r for r in _report(str(tmp_path / "tiny"))["runs"]}
    assert runs["small"]["status"] == "complete"
    assert runs["wild"]["status"] == "diverged" and runs["wild"]["diverged_at_step"] >= 1
    with open(tmp_path / "tiny" / "report.md") as f:
        assert "wild/seed1 (diverged: loss not finite at step" in f.read()


def test_each_run_line_gives_the_experiments_time_left(experiment, tmp_path, monkeypatch, caplog):
    # It said "run 2 of 4" and no more; runs are timed with a fake clock, trained by a fake.
    from tfnmt import progress
    from tfnmt.cli import experiment as experiment_cli
    config, _ = experiment
    clock = [0.0]
    monkeypatch.setattr(progress, "now", lambda: clock[0])
    trained = {"small/seed1"}  # trained by an earlier invocation: skipped, not timed
    runs_lib = experiment_cli.runs_lib

    def train(run, forwarded, budget, main, init_from=""):
        clock[0] += 600 if run.seed == 1 else 1200
        trained.add(run.name)
    monkeypatch.setattr(runs_lib, "trained", lambda run, budget: run.name in trained)
    monkeypatch.setattr(runs_lib, "train", train)
    monkeypatch.setattr(runs_lib, "scored", lambda run, splits, checkpoint="last": True)
    monkeypatch.setattr(runs_lib, "restore_test_data", lambda *args: None)
    monkeypatch.setattr(experiment_cli.report_lib, "write",
                        lambda root, spec: {"runs": [], "test_splits": []})
    with caplog.at_level("INFO"):
        assert run_cli("experiment", f"--flagfile={config}", f"--runs_dir={tmp_path}") == 0
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("experiment:")]
    assert lines == [
        "experiment: small/seed1 is trained (1 of 4): skipped",
        "experiment: run 2 of 4: narrow/seed1",
        "experiment: run 3 of 4: small/seed2; about 20m00s left (2 runs to train, 10m00s each "
        "so far)",
        "experiment: run 4 of 4: narrow/seed2; about 15m00s left (1 run to train, 15m00s each "
        "so far)"]
