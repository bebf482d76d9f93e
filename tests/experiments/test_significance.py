"""The experiment report's significance tests (tfnmt/experiments/report.py): sacreBLEU's paired
bootstrap and approximate randomization, with resampled differences that tie the real one
counted as at least as extreme."""

import itertools
import os

import numpy as np

from tfnmt.evaluation import bleu
from tfnmt.experiments import report, report_page

REFERENCES = ["a man rides a red bike down the street", "two dogs play in the snow",
              "a woman is reading a book in the park", "children run on the beach",
              "a cook prepares food in a kitchen", "the old man sits on a bench",
              "a girl jumps into the pool", "people walk across a bridge"]
BASELINE = ["a man rides a bike down the street", "two dogs play in snow",
            "a woman reads a book in the park", "children run on a beach",
            "a cook makes food in a kitchen", "an old man sits on a bench",
            "a girl jumps in the pool", "people walk over a bridge"]
# Better than the baseline on two sentences, worse on one: a small difference.
SYSTEM = [REFERENCES[0], REFERENCES[1], "a woman book park", *BASELINE[3:]]


def test_two_identical_systems_are_not_significantly_different():
    pvalues = report._pvalues([("baseline", BASELINE), ("system", list(BASELINE))], REFERENCES,
                              "en", "")
    # sacreBLEU's own count (strictly greater) gives 1 / (n + 1) here: 0.001 and 0.0001.
    assert pvalues == {"bootstrap": {"bleu": 1.0, "chrf": 1.0},
                       "randomization": {"bleu": 1.0, "chrf": 1.0}}


def test_the_randomization_p_value_of_a_small_difference_is_the_exact_one():
    """Every one of the 2^8 ways of swapping the two systems' translations sentence by sentence
    gives the exact permutation p-value: the share of swaps whose BLEU difference is at least
    the real one. 10,000 random swaps estimate it within a few standard errors."""
    metric = bleu.metric(target_lang="en")

    def score(lines):
        return metric.corpus_score(lines, [REFERENCES]).score

    real = abs(score(SYSTEM) - score(BASELINE))
    assert 0 < real < 10
    extreme = 0
    for swap in itertools.product((False, True), repeat=len(REFERENCES)):
        a = [s if flip else b for flip, b, s in zip(swap, BASELINE, SYSTEM)]
        b = [b if flip else s for flip, b, s in zip(swap, BASELINE, SYSTEM)]
        extreme += abs(score(a) - score(b)) >= real - 1e-9
    exact = extreme / 2 ** len(REFERENCES)
    assert 0.05 < exact < 0.95  # a test that can tell "greater" from "at least"
    p = report._pvalues([("baseline", BASELINE), ("system", SYSTEM)], REFERENCES, "en",
                        "")["randomization"]["bleu"]
    standard_error = np.sqrt(exact * (1 - exact) / 10000)
    assert abs(p - exact) < 4 * standard_error + 1e-4, (p, exact)


def test_sacrebleus_own_count_is_restored_after_the_tests():
    before = report.sacrebleu_significance._compute_p_value
    report._pvalues([("baseline", BASELINE), ("system", SYSTEM)], REFERENCES, "en", "")
    assert report.sacrebleu_significance._compute_p_value is before
    assert before(np.zeros(9), 0.0) == 0.1  # strictly greater: ties not counted


def test_the_report_marks_p_values_of_identical_outputs():
    p = {"bootstrap": {"bleu": 1.0, "chrf": 1.0}, "randomization": {"bleu": 1.0, "chrf": 1.0}}
    row = {"significance": {"pooled": p, "per_seed": {"1": p, "2": p}, "identical_outputs": [2]}}
    assert report_page._identical(row, 2) == " (identical outputs)"
    assert report_page._identical(row, 1) == "" and report_page._identical(row, None) == ""
    row["significance"]["identical_outputs"] = [1, 2]
    assert report_page._identical(row, None) == " (identical outputs)"


def test_a_report_reuses_the_p_values_of_unchanged_outputs_and_keeps_only_those_it_used(
        tmp_path, monkeypatch):
    from tfnmt.experiments import runs
    root = str(tmp_path)
    runs.write_lines(runs.data_path(root, "test", "ref"), REFERENCES)
    base, system = (runs.Run(name, 1, "", str(tmp_path / name)) for name in ("base", "system"))
    for run, lines in ((base, BASELINE), (system, SYSTEM)):
        runs.write_lines(runs.hypotheses_path(run, "test"), lines)

    def significance():
        known = report._PValues(root)
        found = report.significance(root, "test", {1: base}, {1: system}, [1], "en", "", known)
        known.save()
        return found

    computed = []
    paired_test = report.PairedTest
    monkeypatch.setattr(report, "PairedTest", lambda *a, **k: computed.append(1) or paired_test(
        *a, **k))
    # A test per kind, bootstrap and randomization; pooled over one seed, the inputs are the
    # seed's own, so its p-values are computed once.
    first = significance()
    assert len(computed) == 2 and first["pooled"] == first["per_seed"]["1"]
    assert significance() == first and len(computed) == 2  # from pvalues.json
    runs.write_lines(runs.hypotheses_path(system, "test"), BASELINE)  # the run scored again
    assert significance()["per_seed"]["1"]["randomization"]["bleu"] == 1.0
    assert len(computed) == 4
    assert len(runs.read_json(os.path.join(root, report.PVALUES_FILE))) == 1  # the old one gone
    (tmp_path / report.PVALUES_FILE).write_text("{damaged")
    assert significance()["per_seed"]["1"]["randomization"]["bleu"] == 1.0
    assert len(computed) == 6
