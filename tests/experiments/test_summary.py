import os

from conftest import run_cli
from tfnmt.experiments import summary

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(REPO, "docs", "results")


def _seeds(*pairs):
    return {str(seed): {"bootstrap": {"bleu": b}, "randomization": {"bleu": r}}
            for seed, (b, r) in enumerate(pairs, start=1)}


def _gaps(*values):
    return {str(seed): gap for seed, gap in enumerate(values, start=1)}


def test_a_verdict_needs_both_tests_in_every_seed_and_one_seed_a_gap_of_one_bleu():
    both = _seeds((0.001, 0.0001), (0.002, 0.0021))
    assert summary.verdict(_gaps(1.9, 1.7), both) == "ahead"
    assert summary.verdict(_gaps(-2.0, -1.9), both) == "behind"
    # One seed's tests short of significance (002's iterative row: seed 2 at 0.07 / 0.15), or
    # one of its tests only.
    assert summary.verdict(_gaps(1.5, 0.5), _seeds((0.002, 0.0029), (0.0709, 0.1526))) == \
        "no difference detected"
    assert summary.verdict(_gaps(1.2, 1.2), _seeds((0.03, 0.06), (0.01, 0.02))) == \
        "no difference detected"
    assert summary.verdict(_gaps(1.2, 1.2), _seeds((0.03, 0.05), (0.01, 0.02))) == \
        "no difference detected"  # 0.05 is not below 0.05
    # The tests are two-sided: significant gaps of opposite signs are no verdict either way.
    assert summary.verdict(_gaps(3.0, -0.6), both) == "seeds disagree"
    assert summary.verdict(_gaps(0.9), _seeds((0.03, 0.06))) == "second seed needed"
    assert summary.verdict(_gaps(-0.57), _seeds((0.001, 0.0001))) == "second seed needed"
    assert summary.verdict(_gaps(2.5), _seeds((0.001, 0.0001))) == "ahead"
    # Only the seeds both systems were scored in count.
    assert summary.verdict(_gaps(2.5, -3.0), _seeds((0.001, 0.0001))) == "ahead"
    assert summary.verdict({}, {}) == "not scored"


def test_a_run_under_a_convergence_budget_ends_stopped_or_capped_with_its_slope():
    budget = {"kind": "converge", "train_steps": 3000}
    curve = [{"step": 2000, "bleu": 20.0}, {"step": 2500, "bleu": 21.0}, {"step": 3000, "bleu": 21.5}]
    assert summary.run_end({"status": "complete", "step": 2500, "validation": curve[:2]},
                           budget) == "stopped at 2,500"
    assert summary.run_end({"status": "complete", "step": 3000, "validation": curve}, budget) == \
        "capped at 3,000, still rising (+1.00 BLEU per 1,000 steps)"
    assert summary.run_end({"status": "complete", "step": 3000,
                            "validation": curve[:2] + [{"step": 3000, "bleu": 20.5}]}, budget) == \
        "capped at 3,000, flat (-1.00 BLEU per 1,000 steps)"
    assert summary.run_end({"status": "partial", "step": 1000}, budget) == "partial"
    assert summary.run_end({"status": "complete", "step": 1500}, {"train_steps": 1500}) == "steps"


def test_the_committed_summary_is_what_the_committed_records_give():
    # docs/results/README.md quotes summary.md: a figure there that no record holds, or a
    # record changed without the page, fails here. Rebuild: tfnmt experiment --summary
    # --runs_dir=docs/results
    with open(os.path.join(RESULTS, summary.SUMMARY_FILE), encoding="utf-8") as f:
        assert f.read() == summary.page(RESULTS)


def test_the_page_reads_each_experiments_first_test_split_and_each_seeds_scores(tmp_path):
    import json
    import shutil
    shutil.copytree(os.path.join(RESULTS, "densenmt"), tmp_path / "densenmt",
                    ignore=shutil.ignore_patterns("*.hyp", "*.png", "logs"))
    path = tmp_path / "densenmt" / "report.json"
    report = json.loads(path.read_text())
    # The split renamed, and seed 2 of DenseNMT-4L-2 behind its baseline: the verdict follows.
    report["test_splits"] = ["test2016"]
    report["results"] = {"test2016": report["results"]["test"]}
    for run in report["runs"]:
        run["tests"] = {"test2016": run["tests"]["test"]}
        if (run["system"], run["seed"]) == ("DenseNMT-4L-2", 2):
            run["tests"]["test2016"]["bleu"] = 20.0
    path.write_text(json.dumps(report))
    assert run_cli("experiment", "--summary", f"--runs_dir={tmp_path}") == 0
    page = (tmp_path / summary.SUMMARY_FILE).read_text()
    assert "test split test2016" in page
    line = next(line for line in page.splitlines() if line.startswith("| DenseNMT-4L-2 |"))
    assert "| 33.30 | 0.07 |" in line and line.endswith("| seeds disagree | 6,063,872 | 0.81x |")


def test_a_runs_dir_without_reports_is_one_line(tmp_path, capsys):
    assert run_cli("experiment", "--summary", f"--runs_dir={tmp_path}") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tfnmt experiment: error: --runs_dir={tmp_path} holds no experiment's "
                   "report.json (RUNS_DIR/NAME/report.json): nothing to summarise"]
    assert not os.listdir(tmp_path)
