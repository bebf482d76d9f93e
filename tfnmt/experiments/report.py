"""The report of an experiment, from what its runs left on disk: report.json (every number),
report.md (the table a paper prints) and PNG plots.

Reads each run's TensorBoard events (train/target_tokens and train/seconds per logging interval,
validation/loss and validation/bleu), run.json, scores.json and the test translations; decodes
nothing. Significance against the baseline is sacreBLEU's own (`sacrebleu.significance`): paired
bootstrap resampling and paired approximate randomization, per seed (a system's run against the
baseline's run of the same seed) and across seeds (the outputs of the seeds both have, pooled:
the test set once per seed). A run is complete when `train` finished it at the experiment's
budget and its final checkpoint (with --budget=converge, its best) is scored; other runs are
listed as partial (or not started) and left out of the means and the tests. With --average_checkpoints=N the averages of the runs' last N
checkpoints (runs.py) are reported the same way, as systems of their own: averaged_results, with
their p-values against the baseline's averaged models; a complete run whose average is not scored
yet is left out of those.
"""

import contextlib
import glob
import os

import numpy as np
import sacrebleu
from sacrebleu import significance as sacrebleu_significance
from sacrebleu.significance import PairedTest

from tfnmt.evaluation import bleu
from tfnmt.experiments import plots, runs as runs_lib
from tfnmt.training.callbacks import DIVERGED_FILE

TESTS = {"bootstrap": "bs", "randomization": "ar"}
# What report.md says of the tests (and `_ties_count_as_extreme` does).
NULL_HYPOTHESIS = ("the system and the baseline are equally good: their difference in score on "
                   "this test set is what chance alone gives")
TIES = ("a p-value counts the resamples whose difference is at least as large as the real one "
        "(ties included; Noreen 1989, Riezler and Maxwell 2005), plus one, over the resamples "
        "plus one: two identical outputs get p = 1")


@contextlib.contextmanager
def _ties_count_as_extreme():
    """sacreBLEU (after multeval) counts the resampled differences strictly greater than the
    real one: with identical outputs every resample ties with the real difference of 0 and
    p = 1/(n+1), "significant". A permutation or bootstrap test counts those at least as
    extreme, so sacreBLEU's p-value function is swapped for that one while the tests run
    (sacreBLEU is pinned in setup.py; the identical-systems test fails if its internals
    change)."""
    strict = sacrebleu_significance._compute_p_value
    sacrebleu_significance._compute_p_value = lambda stats, real: (
        (np.sum(stats >= real).item() + 1) / (len(stats) + 1))
    try:
        yield
    finally:
        sacrebleu_significance._compute_p_value = strict


def read_scalars(directory):
    """{tag: {step: value}} of a run's TensorBoard events; a step logged again (a resumed run
    redoing steps after its last checkpoint) keeps its newest value."""
    import tensorflow as tf
    out = {}
    # Event file names start with their creation time: older runs first.
    for path in sorted(glob.glob(os.path.join(directory, "logs", "events.out.tfevents.*"))):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                number = (float(tf.make_ndarray(value.tensor)) if value.HasField("tensor")
                          else float(value.simple_value))
                out.setdefault(value.tag, {})[int(event.step)] = number
    return out


def curves(scalars):
    """Validation points with the target tokens seen and training seconds at their step."""
    tokens, seconds = scalars.get("train/target_tokens", {}), scalars.get("train/seconds", {})
    steps = sorted(tokens)
    cum_tokens = np.cumsum([0.0] + [tokens[s] for s in steps])
    cum_seconds = np.cumsum([0.0] + [seconds.get(s, 0.0) for s in steps])
    at = [0] + steps
    points = []
    for step in sorted(scalars.get("validation/loss", {})):
        point = {"step": step, "target_tokens": float(np.interp(step, at, cum_tokens)),
                 "seconds": float(np.interp(step, at, cum_seconds)),
                 "loss": scalars["validation/loss"][step]}
        if step in scalars.get("validation/bleu", {}):
            point["bleu"] = scalars["validation/bleu"][step]
        points.append(point)
    total = {"target_tokens": float(cum_tokens[-1]), "train_seconds": float(cum_seconds[-1])}
    total["target_tokens_per_second"] = (total["target_tokens"] / total["train_seconds"]
                                         if total["train_seconds"] else None)
    return points, total


def collect(run, budget, splits, average=0):
    """What exists of one run (and, average > 0, of the average of its last `average`
    checkpoints)."""
    entry = {"system": run.system, "seed": run.seed, "directory": run.directory, "step": 0,
             "status": "not started", "validation": []}
    if not os.path.isdir(os.path.join(run.directory, "logs")):
        return entry
    entry["step"] = runs_lib.step(run.directory)
    entry["validation"], totals = curves(read_scalars(run.directory))
    entry.update(totals)
    scores = runs_lib.read_json(os.path.join(run.directory, runs_lib.SCORES_FILE))
    complete = (runs_lib.trained(run, budget)
                and runs_lib.scored(run, splits, runs_lib.scored_checkpoint(budget)))
    entry["status"] = "complete" if complete else "partial"
    diverged = runs_lib.read_json(os.path.join(run.directory, DIVERGED_FILE))
    if diverged and not complete:
        entry["status"] = "diverged"
        entry["diverged_at_step"] = diverged["step"]
    if complete:
        entry["parameters"] = scores["parameters"]
        entry["tests"] = scores["tests"]
        if budget.get("kind") == "converge":
            entry["checkpoint_step"] = scores["checkpoint_step"]
        if average and runs_lib.averaged_scored(run, average, splits):
            averaged = runs_lib.read_json(os.path.join(runs_lib.averaged(run, average).directory,
                                                       runs_lib.SCORES_FILE))
            entry["averaged"] = {"steps": averaged["averaged_steps"], "tests": averaged["tests"]}
    return entry


def _pvalues(named, references, target_lang, tokenize):
    """{test: {"bleu": p, "chrf": p}} of named[1] against named[0] (the baseline)."""
    out = {}
    for test, kind in TESTS.items():
        metrics = {"BLEU": bleu.metric(target_lang=target_lang, tokenize=tokenize),
                   "chrF": sacrebleu.metrics.CHRF()}
        with _ties_count_as_extreme():
            _, scores = PairedTest(named, metrics, [references], test_type=kind)()
        out[test] = {("bleu" if name.lower().startswith("bleu") else "chrf"): results[1].p_value
                     for name, results in scores.items() if name != "System"}
    return out


def significance(root, split, baseline, system, seeds, target_lang, tokenize):
    """Per seed and pooled over the seeds both systems completed."""
    references = runs_lib.read_lines(runs_lib.data_path(root, split, "ref"))
    per_seed, pooled_base, pooled_system, identical = {}, [], [], []
    for seed in seeds:
        base = runs_lib.read_lines(runs_lib.hypotheses_path(baseline[seed], split))
        hyps = runs_lib.read_lines(runs_lib.hypotheses_path(system[seed], split))
        if base == hyps:  # p = 1 then says "the same translations", not a finding
            identical.append(seed)
        per_seed[str(seed)] = _pvalues([("baseline", base), ("system", hyps)], references,
                                       target_lang, tokenize)
        pooled_base += base
        pooled_system += hyps
    pooled = _pvalues([("baseline", pooled_base), ("system", pooled_system)],
                      references * len(seeds), target_lang, tokenize) if seeds else None
    return {"pooled": pooled, "per_seed": per_seed, "identical_outputs": identical}


def _mean_std(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    # The sample standard deviation: the seeds are a sample of the runs one could train.
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def _target_lang(runs, default):
    """The target language the runs were trained on (it picks sacreBLEU's tokenizer)."""
    from tfnmt import model_dir
    for run in runs:
        if os.path.isfile(model_dir.config_path(run.directory)):
            return model_dir.read_config(run.directory)["data"]["target_lang"]
    return default


def _results(root, spec, by_run, target_lang):
    """{split: {system: row}}: means over the seeds a system completed, and p-values against the
    baseline. by_run: {(system, seed): (run, its entry)}, the entry holding "tests" if scored."""
    names = [name for name, _ in spec["systems"]]
    baseline = names[0]
    results = {}
    for split in spec["test_splits"]:
        results[split] = {}
        for name in names:
            done = [(seed, by_run[(name, seed)]) for seed in spec["seeds"]
                    if split in by_run[(name, seed)][1].get("tests", {})]
            tests = [e["tests"][split] for _, (_, e) in done]
            row = {"runs": len(done), "seeds": [seed for seed, _ in done]}
            for metric in ("bleu", "chrf", "bleu_moses_lc", "sentences_per_second"):
                row[f"{metric}_mean"], row[f"{metric}_std"] = _mean_std(
                    [t.get(metric) for t in tests])  # records before bleu_moses_lc lack it
            row["target_tokens_per_second_mean"], _ = _mean_std(
                [e.get("target_tokens_per_second") for _, (_, e) in done])
            row["parameters"] = done[0][1][1]["parameters"] if done else None
            if done and tests[0].get("length_buckets"):
                row["length_buckets"] = [
                    {"bucket": b["bucket"], "sentences": b["sentences"],
                     "bleu_mean": _mean_std([t["length_buckets"][i]["bleu"] for t in tests])[0]}
                    for i, b in enumerate(tests[0]["length_buckets"])]
            if name != baseline:
                base_seeds = {seed for seed in spec["seeds"]
                              if split in by_run[(baseline, seed)][1].get("tests", {})}
                paired = [seed for seed, _ in done if seed in base_seeds]
                row["significance"] = significance(
                    root, split, {s: by_run[(baseline, s)][0] for s in paired},
                    {s: by_run[(name, s)][0] for s in paired}, paired, target_lang, spec["tokenize"]) if paired else None
            # The decode speed-up over the baseline, as the CTC paper tables it.
            base_speed = results[split].get(baseline, row)["sentences_per_second_mean"]
            row["decode_speedup"] = (row["sentences_per_second_mean"] / base_speed
                                     if base_speed and row["sentences_per_second_mean"] else None)
            results[split][name] = row
    return results


def build(root, spec):
    """report.json's content. spec: experiment, systems [(name, flagfile)], seeds, budget
    {train_steps, ...}, test_splits, decoding, target_lang, tokenize, average_checkpoints."""
    average = spec.get("average_checkpoints", 0)
    runs = runs_lib.plan(root, spec["systems"], spec["seeds"])
    entries = [collect(run, spec["budget"], spec["test_splits"], average) for run in runs]
    by_run = {(e["system"], e["seed"]): (run, e) for run, e in zip(runs, entries)}
    baseline = spec["systems"][0][0]
    target_lang = _target_lang(runs, spec["target_lang"])
    splits = spec["test_splits"]
    results = _results(root, spec, by_run, target_lang)
    signatures = {}
    for entry in entries:
        for split, test in entry.get("tests", {}).items():
            signatures.setdefault(split, {"bleu": test["bleu_signature"],
                                          "chrf": test["chrf_signature"]})
    report = {"experiment": spec["experiment"], "baseline": baseline,
              "systems": [{"name": n, "flagfile": f} for n, f in spec["systems"]],
              "seeds": spec["seeds"], "budget": spec["budget"], "decoding": spec["decoding"],
              "system_decoding": spec["system_decoding"],
              "test_splits": splits, "signatures": signatures,
              "significance_tests": {"bootstrap": "sacrebleu.significance paired bootstrap "
                                     "resampling, 1000 resamples",
                                     "randomization": "sacrebleu.significance paired approximate "
                                     "randomization, 10000 trials"},
              "average_checkpoints": average, "warm_start": spec.get("warm_start", False),
              "runs": entries, "results": results}
    if average:
        # The averaged models as systems: the same rows and tests, from their own files.
        averaged = {key: (runs_lib.averaged(run, average),
                          dict(entry, tests=entry["averaged"]["tests"]) if "averaged" in entry
                          else {})
                    for key, (run, entry) in by_run.items()}
        report["averaged_results"] = _results(root, spec, averaged, target_lang)
    return report


def averaged_label(report):
    return f"average of the last {report['average_checkpoints']}"


def _number(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def _p(value):
    return "-" if value is None else f"{value:.4f}"


def _p_pair(pvalues, metric):
    return f"{_p(pvalues['bootstrap'][metric])} / {_p(pvalues['randomization'][metric])}"


def _budget_text(budget):
    size = (f"{budget['batch_tokens']:,} tokens" if budget.get("batch_tokens")
            else f"{budget.get('batch_size')} sentences")
    accumulate = budget.get("accumulate_steps", 1)
    per_step = f"{accumulate} batches of {size}" if accumulate > 1 else f"batches of {size}"
    if budget.get("kind") == "converge":
        sentences = budget["bleu_sentences"]
        return (f"until validation BLEU converges: {per_step}, validated every "
                f"{budget['validate_every']:,} steps on BLEU of {sentences:,} validation "
                f"sentences; a run stops after {budget['early_stopping_patience']} validations "
                f"in a row without a new best, or at {budget['train_steps']:,} steps; its best "
                "checkpoint by validation BLEU is scored (one rule for every system; Step: the "
                "checkpoint scored, and where the run stopped)")
    return f"{budget['train_steps']:,} steps, {per_step} (equal for every system)"


def _seed_scores(entry, averaged, split):
    """(test scores or None, its step as text) of a run's final checkpoint or of its average."""
    if averaged:
        scores = entry.get("averaged", {})
        return (scores.get("tests", {}).get(split),
                ", ".join(f"{step:,}" for step in scores.get("steps", ())))
    step = f"{entry['step']:,}"
    if "checkpoint_step" in entry:
        step = f"{entry['checkpoint_step']:,} of {step}"
    return entry.get("tests", {}).get(split), step


def markdown(report, plot_files):
    lines = _header(report)
    for split in report["test_splits"]:
        lines += _split_section(report, split)
    lines += _runs_table(report)
    if plot_files:
        lines += ["## Plots", ""] + [f"![{name}]({name})" for name in plot_files] + [""]
    return "\n".join(lines)


def _scored_name(budget):
    return "best" if runs_lib.scored_checkpoint(budget) == "best" else "final"


def _header(report):
    """The title, the budget, seeds, decoding and tests, and the runs left out of the tables."""
    lines = [f"# Experiment `{report['experiment']}`", "",
             f"- Budget: {_budget_text(report['budget'])}.",
             f"- Seeds: {', '.join(str(s) for s in report['seeds'])}; baseline: "
             f"**{report['baseline']}**.",
             f"- Decoding: {', '.join(f'{k} {v}' for k, v in report['decoding'].items())}.",
             *(f"  - except {name}, as its flagfile says (the experiment file does not set "
               f"these): {', '.join(f'{k} {v}' for k, v in own.items())}."
               for name, own in report["system_decoding"].items()),
             "- p-values against the baseline: sacreBLEU's paired bootstrap resampling (bs, 1000 "
             "resamples) and paired approximate randomization (ar, 10000 trials), on the "
             "translations of the seeds both systems completed, pooled; per seed below. "
             f"Null hypothesis: {NULL_HYPOTHESIS}. Ties: {TIES}.", ""]
    if report.get("warm_start"):
        lines.insert(-1, f"- Warm start: every system but the baseline started from the weights of "
                     f"the baseline's run of its seed (its {_scored_name(report['budget'])} "
                     "checkpoint), then trained under the budget above: its steps come on top "
                     "of the baseline's.")
    if report.get("average_checkpoints"):
        lines.insert(-1, f"- ({averaged_label(report)}): the average of each run's last "
                     f"{report['average_checkpoints']} checkpoints (`tfnmt average`), scored the "
                     "same way; its p-values are against the baseline's averages, and its Step "
                     "the steps averaged.")
    partial = [r for r in report["runs"] if r["status"] != "complete"]
    if partial:
        lines += ["**Partial experiment**: these runs are not complete and are left out of the "
                  "tables: " + ", ".join(f"{r['system']}/seed{r['seed']} ({_status(r)}, step "
                                         f"{r['step']:,} of {report['budget']['train_steps']:,})"
                                         for r in partial) + ".", ""]
    unaveraged = [r for r in report["runs"] if report.get("average_checkpoints")
                  and r["status"] == "complete" and "averaged" not in r]
    if unaveraged:
        lines += ["**Averages not scored yet** (left out of the averaged rows): "
                  + ", ".join(f"{r['system']}/seed{r['seed']}" for r in unaveraged) + ".", ""]
    return lines


def _status(entry):
    if entry["status"] == "diverged":
        return f"diverged: loss not finite at step {entry['diverged_at_step']:,}"
    return entry["status"]


def _split_section(report, split):
    """One test split's tables: systems, signatures, per seed, BLEU by source length."""
    # (label suffix, rows, averaged?): the final checkpoints, then their averages.
    blocks = [("", report["results"][split], False)]
    if report.get("average_checkpoints"):
        blocks.append((f" ({averaged_label(report)})", report["averaged_results"][split], True))
    lines = [f"## {split}", ""] + _systems_table(report, blocks)
    signature = report["signatures"].get(split)
    if signature:
        lines += ["", f"BLEU signature: `{signature['bleu']}`  ",
                  f"chrF signature: `{signature['chrf']}`  ",
                  f"BLEU as papers report it: {bleu.MOSES_LC_SIGNATURE} (not comparable "
                  "with sacreBLEU's)"]
    lines += _seeds_table(report, blocks, split)
    rows = [(name + suffix, row) for suffix, block, _ in blocks for name, row in block.items()]
    lines += _length_table(rows)
    lines.append("")
    return lines


def _systems_table(report, blocks):
    lines = ["| System | Parameters | BLEU (mean ± std) | chrF (mean ± std) | p BLEU (bs / ar) "
             "| p chrF (bs / ar) | BLEU as papers report it | Train target tokens/s "
             "| Decode sentences/s | Decode speed-up | Runs |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for suffix, block, _ in blocks:
        for name, row in block.items():
            pooled = (row.get("significance") or {}).get("pooled")
            p_bleu = p_chrf = "baseline" if name == report["baseline"] else "-"
            if pooled:
                p_bleu = _p_pair(pooled, "bleu") + _identical(row, None)
                p_chrf = _p_pair(pooled, "chrf") + _identical(row, None)
            parameters = "-" if row["parameters"] is None else f"{row['parameters']:,}"
            lines.append(
                f"| {name}{suffix} | {parameters} "
                f"| {_number(row['bleu_mean'])} ± {_number(row['bleu_std'])} "
                f"| {_number(row['chrf_mean'])} ± {_number(row['chrf_std'])} "
                f"| {p_bleu} | {p_chrf} | {_number(row.get('bleu_moses_lc_mean'))} "
                f"| {_number(row['target_tokens_per_second_mean'], 0)} "
                f"| {_number(row['sentences_per_second_mean'], 1)} "
                f"| {_number(row['decode_speedup'])}{'x' if row['decode_speedup'] else ''} "
                f"| {row['runs']} |")
    return lines


def _identical(row, seed):
    """" (identical outputs)" where the system translated exactly as the baseline: for `seed`,
    or (None) for every seed pooled."""
    significance = row.get("significance") or {}
    identical = significance.get("identical_outputs", [])
    seeds = [int(s) for s in significance.get("per_seed", {})]
    same = seed in identical if seed is not None else bool(seeds) and sorted(identical) == sorted(seeds)
    return " (identical outputs)" if same else ""


def _seeds_table(report, blocks, split):
    lines = ["", "Per seed:", "", "| System | Seed | Step | BLEU | chrF | p BLEU (bs / ar) "
             "| p chrF (bs / ar) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for suffix, block, averaged in blocks:
        for entry in report["runs"]:
            test, step = _seed_scores(entry, averaged, split)
            if test is None:
                continue
            row = block[entry["system"]]
            seed_p = (row.get("significance") or {}).get("per_seed", {}).get(str(entry["seed"]))
            p_bleu = p_chrf = "-"
            if seed_p:
                p_bleu = _p_pair(seed_p, "bleu") + _identical(row, entry["seed"])
                p_chrf = _p_pair(seed_p, "chrf") + _identical(row, entry["seed"])
            lines.append(f"| {entry['system']}{suffix} | {entry['seed']} | {step} "
                         f"| {test['bleu']:.2f} | {test['chrf']:.2f} | {p_bleu} | {p_chrf} |")
    return lines


def _length_table(rows):
    """BLEU by source length of the (label, row) rows that have it; none if none has."""
    buckets = [row.get("length_buckets") for _, row in rows if row.get("length_buckets")]
    if not buckets:
        return []
    labels = [b["bucket"] for b in buckets[0]]
    lines = ["", "BLEU by source length (words; mean over seeds):", "",
             "| System | " + " | ".join(f"{label} ({b['sentences']})"
                                        for label, b in zip(labels, buckets[0])) + " |",
             "|---|" + "---:|" * len(labels)]
    for name, row in rows:
        if row.get("length_buckets"):
            lines.append(f"| {name} | " + " | ".join(_number(b["bleu_mean"])
                                                     for b in row["length_buckets"]) + " |")
    return lines


def _runs_table(report):
    lines = ["## Runs", "", "| Run | Status | Step | Target tokens seen | Training time | "
             "Target tokens/s |", "|---|---|---:|---:|---:|---:|"]
    for entry in report["runs"]:
        lines.append(f"| {entry['system']}/seed{entry['seed']} | {entry['status']} "
                     f"| {entry['step']:,} | {entry.get('target_tokens', 0):,.0f} "
                     f"| {entry.get('train_seconds', 0) / 60:.1f} min "
                     f"| {_number(entry.get('target_tokens_per_second'), 0)} |")
    lines.append("")
    return lines


def write(root, spec):
    """Writes report.json, report.md and the plots into `root`; returns the report."""
    report = build(root, spec)
    report["plots"] = plots.write(root, report)
    runs_lib.write_json(os.path.join(root, "report.json"), report)
    path = os.path.join(root, "report.md")
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(markdown(report, sorted(report["plots"])))
    os.replace(tmp, path)
    return report
