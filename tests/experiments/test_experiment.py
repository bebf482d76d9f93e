"""`tfnmt experiment`: a tiny experiment (2 systems x 2 seeds, a few steps on the synthetic corpus)
run in shares, interrupted, resumed, and its report checked against sacreBLEU."""

import dataclasses
import glob
import json
import os
import shutil
import subprocess

import pytest
import sacrebleu
from sacrebleu.significance import PairedTest

from conftest import REPO, TINY_MODEL_FLAGS, run_cli
from tfnmt.experiments import report as report_lib

STEPS = 10


def _write(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def experiment(corpus, tmp_path_factory):
    """An experiment file and where its runs go."""
    base = tmp_path_factory.mktemp("experiment")
    small = _write(base / "small.cfg", TINY_MODEL_FLAGS)
    # Another system: a narrower feed-forward layer (a flagfile may include another), with
    # decoding flags of its own that the experiment file does not set: sampling from a flat
    # distribution, at most 3 tokens (greedy, these tiny models translate most test sentences
    # into an empty line).
    narrow = _write(base / "narrow.cfg", [f"--flagfile={small}", "--ffn_dim=16",
                                           "--learning_rate=1e-2", "--sampling=true",
                                           "--sampling_temperature=1000", "--max_decode_length=3"])
    config = _write(base / "tiny.cfg", [
        "--experiment=tiny", f"--runs_dir={base / 'runs'}",
        f"--systems=small={small},narrow={narrow}", "--seeds=1,2",
        f"--train_steps={STEPS}", "--batch_tokens=256", "--batch_size=0",
        f"--data=text:{corpus}", "--source_lang=en", "--target_lang=de",
        "--max_source_length=20", "--max_target_length=20", "--warmup_steps=0",
        "--log_every=5", "--validate_every=5", "--save_every=5", "--bleu_sentences=10",
        "--beam_size=1", "--test_limit=20", "--length_buckets=3,5"])
    return config, str(base / "runs" / "tiny")


def _steps(root, run):
    from tfnmt.experiments.runs import latest_step
    return latest_step(os.path.join(root, run))


def _report(root):
    with open(os.path.join(root, "report.json")) as f:
        return json.load(f)


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


def test_averaged_checkpoints_are_scored_once_and_reported(experiment, caplog):
    """--average_checkpoints=2 added to the tiny experiment (trained by the test above, or here):
    each run's last two checkpoints are averaged into RUN/averaged-2 and scored, and reported as
    systems of their own; run again, nothing is averaged or scored twice."""
    import numpy as np
    import tensorflow as tf
    from tfnmt.training import checkpoints
    config, root = experiment
    runs = ["small/seed1", "narrow/seed1", "small/seed2", "narrow/seed2"]
    assert run_cli("experiment", f"--flagfile={config}") == 0  # done already by the test above
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


def _without_directories(report):
    return dict(report, runs=[{k: v for k, v in r.items() if k != "directory"}
                              for r in report["runs"]])


def test_the_records_docs_results_keeps_rebuild_the_report_and_count_as_finished(
        experiment, tmp_path, caplog, capsys):
    """What git keeps of a finished experiment under docs/results/.gitignore (no checkpoints,
    vocabularies or data) is enough: the report rebuilt from it is the same, and running the
    experiment again trains and scores nothing."""
    config, root = experiment
    runs = ["small/seed1", "narrow/seed1", "small/seed2", "narrow/seed2"]
    assert run_cli("experiment", f"--flagfile={config}") == 0  # done already by the tests above
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


def test_each_run_line_gives_the_experiments_time_left(experiment, tmp_path, monkeypatch, caplog):
    # It said "run 2 of 4" and no more; runs are timed with a fake clock, trained by a fake.
    from tfnmt import progress
    from tfnmt.cli import experiment as experiment_cli
    config, _ = experiment
    clock = [0.0]
    monkeypatch.setattr(progress, "now", lambda: clock[0])
    trained = {"small/seed1"}  # trained by an earlier invocation: skipped, not timed
    runs_lib = experiment_cli.runs_lib

    def train(run, forwarded, budget, main):
        clock[0] += 600 if run.seed == 1 else 1200
        trained.add(run.name)
    monkeypatch.setattr(runs_lib, "trained", lambda run, budget: run.name in trained)
    monkeypatch.setattr(runs_lib, "train", train)
    monkeypatch.setattr(runs_lib, "scored", lambda run, splits: True)
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
