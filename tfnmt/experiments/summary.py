"""summary.md: every experiment of a runs directory in one page, each figure read from the
experiments' report.json files (`tfnmt experiment --summary`), with each comparison's verdict
worded by one rule (`verdict`) and each run's end by the stopping rule (`run_end`).

The page is what docs/results/README.md quotes: a figure there comes from a record, and a
rebuilt page shows whether a record changed.
"""

import glob
import json
import os

from tfnmt.errors import ConfigError
from tfnmt.experiments.report_page import number

# p below this is significant.
ALPHA = 0.05
# With one seed, a gap under this many BLEU needs a second seed before it is judged.
SECOND_SEED_BELOW = 1.0
SUMMARY_FILE = "summary.md"
_TESTS = ("bootstrap", "randomization")


def verdict(gaps, per_seed):
    """The wording of a system's BLEU gaps over its baseline ({seed: gap}) by the project's rule
    (docs/results/README.md, "How verdicts are worded"), from each seed's p-values
    ({seed: {"bootstrap": {"bleu": p}, "randomization": {"bleu": p}}}: sacreBLEU's tests are
    two-sided): "ahead" or "behind" where the gap has that sign and both tests find it
    significant in every seed; "seeds disagree" where significant gaps differ in sign; "no
    difference detected" where some seed's test finds none; "second seed needed" where one seed
    shows a gap under SECOND_SEED_BELOW. Whether "ahead" is the paper's claim holding or
    shrinking is the paper's gap's business, not a record's."""
    seeds = sorted(set(gaps) & set(per_seed))
    if not seeds:
        return "not scored"
    if len(seeds) == 1 and abs(gaps[seeds[0]]) < SECOND_SEED_BELOW:
        return "second seed needed"
    significant = all(per_seed[seed][test]["bleu"] is not None
                      and per_seed[seed][test]["bleu"] < ALPHA for seed in seeds for test in _TESTS)
    if not significant:
        return "no difference detected"
    signs = {gaps[seed] > 0 for seed in seeds}
    if len(signs) > 1:
        return "seeds disagree"
    return "ahead" if signs.pop() else "behind"


def run_end(run, budget):
    """How a run ended: "steps" (a fixed budget), "stopped at S" (the stopping rule fired),
    "capped at S, still rising (+X BLEU per 1,000 steps)" or "capped at S, flat"; the slope
    is over the last two validations."""
    if budget.get("kind") != "converge":
        return "steps"
    if run.get("status") != "complete":
        return run.get("status", "not started")
    step, cap = run["step"], budget["train_steps"]
    if step < cap:
        return f"stopped at {step:,}"
    curve = [point for point in run.get("validation", []) if point.get("bleu") is not None]
    if len(curve) < 2:
        return f"capped at {cap:,}"
    last, before = curve[-1], curve[-2]
    slope = (last["bleu"] - before["bleu"]) / (last["step"] - before["step"]) * 1000
    return (f"capped at {cap:,}, still rising ({slope:+.2f} BLEU per 1,000 steps)" if slope > 0
            else f"capped at {cap:,}, flat ({slope:+.2f} BLEU per 1,000 steps)")


def _seed_scores(report, split):
    """{system: {seed (str): test BLEU}} of the report's scored runs."""
    out = {}
    for run in report["runs"]:
        score = (run.get("tests") or {}).get(split, {}).get("bleu")
        if score is not None:
            out.setdefault(run["system"], {})[str(run["seed"])] = score
    return out


def rows(report, split):
    """One row per system of `report` on `split`: its means, gap to the baseline, p-values per
    seed and the verdict (on the gaps of the seeds both systems were scored in)."""
    results = report["results"][split]
    base = results[report["baseline"]]
    scores = _seed_scores(report, split)
    base_scores = scores.get(report["baseline"], {})
    out = []
    for system in (s["name"] for s in report["systems"]):
        row = results.get(system)
        if row is None:
            continue
        per_seed = (row.get("significance") or {}).get("per_seed", {})
        gaps = {seed: score - base_scores[seed] for seed, score in scores.get(system, {}).items()
                if seed in base_scores}
        gap = (None if system == report["baseline"] or row["bleu_mean"] is None
               or base["bleu_mean"] is None else row["bleu_mean"] - base["bleu_mean"])
        out.append({
            "system": system, "seeds": row.get("seeds", []), "bleu": row["bleu_mean"],
            "bleu_std": row.get("bleu_std"), "chrf": row.get("chrf_mean"), "gap": gap,
            "per_seed": per_seed,
            "verdict": "baseline" if system == report["baseline"] else verdict(gaps, per_seed),
            "parameters": row.get("parameters"), "decode_speedup": row.get("decode_speedup"),
        })
    return out


def _pvalues(per_seed):
    return "; ".join(f"seed {seed}: {number(p['bootstrap']['bleu'], 4)} / "
                     f"{number(p['randomization']['bleu'], 4)}"
                     for seed, p in sorted(per_seed.items(), key=lambda item: int(item[0]))) or "-"


def experiment_section(name, report):
    split = report["test_splits"][0]
    lines = [f"## {name}", "",
             f"Baseline {report['baseline']}; seeds {', '.join(map(str, report['seeds']))}; "
             f"test split {split}; [report]({name}/report.md).", "",
             "| system | seeds | BLEU | ± | chrF | gap | p bootstrap / randomization | verdict "
             "| parameters | decoding speed |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows(report, split):
        lines.append(
            f"| {row['system']} | {len(row['seeds'])} | {number(row['bleu'])} | "
            f"{number(row['bleu_std']) if len(row['seeds']) > 1 else '-'} | "
            f"{number(row['chrf'])} | "
            f"{number(row['gap'], sign=True)} | {_pvalues(row['per_seed'])} | {row['verdict']} "
            f"| {'-' if row['parameters'] is None else format(row['parameters'], ',')} | "
            f"{'-' if row['decode_speedup'] is None else number(row['decode_speedup']) + 'x'} |")
    ends = [f"{run['system']}/seed{run['seed']}: {run_end(run, report['budget'])}"
            for run in report["runs"]]
    if report["budget"].get("kind") == "converge":
        lines += ["", "Runs: " + "; ".join(ends) + "."]
    return lines


def page(runs_dir):
    """summary.md's text for every RUNS_DIR/*/report.json, in name order."""
    reports = glob.glob(os.path.join(runs_dir, "*", "report.json"))
    if not reports:
        raise ConfigError(f"--runs_dir={runs_dir} holds no experiment's report.json "
                          "(RUNS_DIR/NAME/report.json): nothing to summarise")
    lines = ["# Every experiment at a glance", "",
             "Written by `tfnmt experiment --summary` from each experiment's report.json: "
             "mean test BLEU and chrF over the seeds, the BLEU gap to the baseline, each seed's "
             f"p-values, and the verdict by the rule of README.md (p < {ALPHA} by both tests "
             f"in every seed, the gap of one sign; one seed and a gap under "
             f"{SECOND_SEED_BELOW:g} BLEU: a second seed first), on each experiment's first test "
             "split and final (or, under a convergence budget, best) checkpoints; averaged "
             "checkpoints are in the reports. Decoding speed is relative to the baseline's. "
             "Under a convergence "
             "budget each run's end is given: stopped by the rule, or capped with the slope of "
             "its validation BLEU over its last two validations.", ""]
    for path in sorted(reports, key=lambda p: os.path.basename(os.path.dirname(p))):
        with open(path) as f:
            report = json.load(f)
        lines += experiment_section(os.path.basename(os.path.dirname(path)), report) + [""]
    return "\n".join(lines)


def write(runs_dir):
    """Writes RUNS_DIR/summary.md; returns its path."""
    text = page(runs_dir)
    path = os.path.join(runs_dir, SUMMARY_FILE)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path
