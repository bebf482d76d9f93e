import os

from conftest import run_cli
from tfnmt.experiments import summary

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(REPO, "docs", "results")


def _seeds(*pairs):
    return {str(seed): {"bootstrap": {"bleu": b}, "randomization": {"bleu": r}}
            for seed, (b, r) in enumerate(pairs, start=1)}


def test_a_verdict_needs_both_tests_in_every_seed_and_one_seed_a_gap_of_one_bleu():
    assert summary.verdict(1.8, _seeds((0.001, 0.0001), (0.002, 0.0021))) == "ahead"
    assert summary.verdict(-2.0, _seeds((0.001, 0.0001), (0.01, 0.02))) == "behind"
    # One test short of significance in one seed (002's iterative row: seed 2 at 0.07 / 0.15).
    assert summary.verdict(1.03, _seeds((0.002, 0.0029), (0.0709, 0.1526))) == \
        "no difference detected"
    assert summary.verdict(1.2, _seeds((0.03, 0.06), (0.01, 0.02))) == "no difference detected"
    assert summary.verdict(0.9, _seeds((0.03, 0.06))) == "second seed needed"
    assert summary.verdict(-0.57, _seeds((0.056, 0.13))) == "second seed needed"
    assert summary.verdict(2.5, _seeds((0.001, 0.0001))) == "ahead"
    assert summary.verdict(None, {}) == "not scored"


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


def test_a_runs_dir_without_reports_is_one_line(tmp_path, capsys):
    assert run_cli("experiment", "--summary", f"--runs_dir={tmp_path}") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tfnmt experiment: error: --runs_dir={tmp_path} holds no experiment's "
                   "report.json (RUNS_DIR/NAME/report.json): nothing to summarise"]
    assert not os.listdir(tmp_path)
