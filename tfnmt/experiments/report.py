"""The report of an experiment, from what its runs left on disk: report.json (every number),
report.md (the table a paper prints) and PNG plots.

Reads each run's TensorBoard events (train/target_tokens and train/seconds per logging interval,
validation/loss and validation/bleu), run.json, scores.json and the test translations; decodes
nothing. Significance against the baseline is sacreBLEU's own (`sacrebleu.significance`): paired
bootstrap resampling and paired approximate randomization, per seed (a system's run against the
baseline's run of the same seed) and across seeds (the outputs of the seeds both have, pooled:
the test set once per seed). A run is complete when `train` finished it at the experiment's
budget and its final checkpoint is scored; other runs are listed as partial (or not started) and
left out of the means and the tests.
"""

import glob
import os

import numpy as np
import sacrebleu
from sacrebleu.significance import PairedTest

from tfnmt.evaluation import bleu
from tfnmt.experiments import plots, runs as runs_lib

TESTS = {"bootstrap": "bs", "randomization": "ar"}


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


def collect(run, budget_steps, splits):
    """What exists of one run."""
    entry = {"system": run.system, "seed": run.seed, "directory": run.directory, "step": 0,
             "status": "not started", "validation": []}
    if not os.path.isdir(os.path.join(run.directory, "logs")):
        return entry
    entry["step"] = runs_lib.latest_step(run.directory)
    entry["validation"], totals = curves(read_scalars(run.directory))
    entry.update(totals)
    scores = runs_lib.read_json(os.path.join(run.directory, runs_lib.SCORES_FILE))
    complete = runs_lib.trained(run, budget_steps) and runs_lib.scored(run, splits)
    entry["status"] = "complete" if complete else "partial"
    if complete:
        entry["parameters"] = scores["parameters"]
        entry["tests"] = scores["tests"]
    return entry


def _pvalues(named, references, target_lang, tokenize):
    """{test: {"bleu": p, "chrf": p}} of named[1] against named[0] (the baseline)."""
    out = {}
    for test, kind in TESTS.items():
        metrics = {"BLEU": bleu.metric(target_lang=target_lang, tokenize=tokenize),
                   "chrF": sacrebleu.metrics.CHRF()}
        _, scores = PairedTest(named, metrics, [references], test_type=kind)()
        out[test] = {("bleu" if name.lower().startswith("bleu") else "chrf"): results[1].p_value
                     for name, results in scores.items() if name != "System"}
    return out


def significance(root, split, baseline, system, seeds, target_lang, tokenize):
    """Per seed and pooled over the seeds both systems completed."""
    references = runs_lib.read_lines(runs_lib.data_path(root, split, "ref"))
    per_seed, pooled_base, pooled_system = {}, [], []
    for seed in seeds:
        base = runs_lib.read_lines(runs_lib.hypotheses_path(baseline[seed], split))
        hyps = runs_lib.read_lines(runs_lib.hypotheses_path(system[seed], split))
        per_seed[str(seed)] = _pvalues([("baseline", base), ("system", hyps)], references,
                                       target_lang, tokenize)
        pooled_base += base
        pooled_system += hyps
    pooled = _pvalues([("baseline", pooled_base), ("system", pooled_system)],
                      references * len(seeds), target_lang, tokenize) if seeds else None
    return {"pooled": pooled, "per_seed": per_seed}


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


def build(root, spec):
    """report.json's content. spec: experiment, systems [(name, flagfile)], seeds, budget
    {train_steps, ...}, test_splits, decoding, target_lang, tokenize."""
    budget_steps = spec["budget"]["train_steps"]
    runs = runs_lib.plan(root, spec["systems"], spec["seeds"])
    entries = [collect(run, budget_steps, spec["test_splits"]) for run in runs]
    by_run = {(e["system"], e["seed"]): (run, e) for run, e in zip(runs, entries)}
    names = [name for name, _ in spec["systems"]]
    baseline = names[0]
    target_lang = _target_lang(runs, spec["target_lang"])
    splits = spec["test_splits"]
    results = {}
    for split in splits:
        results[split] = {}
        for name in names:
            done = [(seed, by_run[(name, seed)]) for seed in spec["seeds"]
                    if split in by_run[(name, seed)][1].get("tests", {})]
            tests = [e["tests"][split] for _, (_, e) in done]
            row = {"runs": len(done), "seeds": [seed for seed, _ in done]}
            for metric in ("bleu", "chrf", "sentences_per_second"):
                row[f"{metric}_mean"], row[f"{metric}_std"] = _mean_std([t[metric] for t in tests])
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
            results[split][name] = row
    signatures = {}
    for entry in entries:
        for split, test in entry.get("tests", {}).items():
            signatures.setdefault(split, {"bleu": test["bleu_signature"],
                                          "chrf": test["chrf_signature"]})
    return {"experiment": spec["experiment"], "baseline": baseline,
            "systems": [{"name": n, "flagfile": f} for n, f in spec["systems"]],
            "seeds": spec["seeds"], "budget": spec["budget"], "decoding": spec["decoding"],
            "test_splits": splits, "signatures": signatures,
            "significance_tests": {"bootstrap": "sacrebleu.significance paired bootstrap "
                                   "resampling, 1000 resamples",
                                   "randomization": "sacrebleu.significance paired approximate "
                                   "randomization, 10000 trials"},
            "runs": entries, "results": results}


def _number(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def _p(value):
    return "-" if value is None else f"{value:.4f}"


def _budget_text(budget):
    size = (f"{budget['batch_tokens']:,} tokens" if budget.get("batch_tokens")
            else f"{budget.get('batch_size')} sentences")
    accumulate = budget.get("accumulate_steps", 1)
    per_step = f"{accumulate} batches of {size}" if accumulate > 1 else f"batches of {size}"
    return f"{budget['train_steps']:,} steps, {per_step} (equal for every system)"


def markdown(report, plot_files):
    lines = [f"# Experiment `{report['experiment']}`", "",
             f"- Budget: {_budget_text(report['budget'])}.",
             f"- Seeds: {', '.join(str(s) for s in report['seeds'])}; baseline: "
             f"**{report['baseline']}**.",
             f"- Decoding: {', '.join(f'{k} {v}' for k, v in report['decoding'].items())}.",
             "- p-values against the baseline: sacreBLEU's paired bootstrap resampling (bs, 1000 "
             "resamples) and paired approximate randomization (ar, 10000 trials), on the "
             "translations of the seeds both systems completed, pooled; per seed below.", ""]
    partial = [r for r in report["runs"] if r["status"] != "complete"]
    if partial:
        lines += ["**Partial experiment**: these runs are not complete and are left out of the "
                  "tables: " + ", ".join(f"{r['system']}/seed{r['seed']} ({r['status']}, step "
                                         f"{r['step']:,} of {report['budget']['train_steps']:,})"
                                         for r in partial) + ".", ""]
    for split in report["test_splits"]:
        rows = report["results"][split]
        lines += [f"## {split}", "",
                  "| System | Parameters | BLEU (mean ± std) | chrF (mean ± std) | p BLEU (bs / ar) "
                  "| p chrF (bs / ar) | Train target tokens/s | Decode sentences/s | Runs |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, row in rows.items():
            pooled = (row.get("significance") or {}).get("pooled")
            p_bleu = p_chrf = "baseline" if name == report["baseline"] else "-"
            if pooled:
                p_bleu = f"{_p(pooled['bootstrap']['bleu'])} / {_p(pooled['randomization']['bleu'])}"
                p_chrf = f"{_p(pooled['bootstrap']['chrf'])} / {_p(pooled['randomization']['chrf'])}"
            parameters = "-" if row["parameters"] is None else f"{row['parameters']:,}"
            lines.append(
                f"| {name} | {parameters} "
                f"| {_number(row['bleu_mean'])} ± {_number(row['bleu_std'])} "
                f"| {_number(row['chrf_mean'])} ± {_number(row['chrf_std'])} | {p_bleu} | {p_chrf} "
                f"| {_number(row['target_tokens_per_second_mean'], 0)} "
                f"| {_number(row['sentences_per_second_mean'], 1)} | {row['runs']} |")
        signature = report["signatures"].get(split)
        if signature:
            lines += ["", f"BLEU signature: `{signature['bleu']}`  ",
                      f"chrF signature: `{signature['chrf']}`"]
        lines += ["", "Per seed:", "", "| System | Seed | Step | BLEU | chrF | p BLEU (bs / ar) "
                  "| p chrF (bs / ar) |", "|---|---:|---:|---:|---:|---:|---:|"]
        for entry in report["runs"]:
            test = entry.get("tests", {}).get(split)
            if test is None:
                continue
            seed_p = ((report["results"][split][entry["system"]].get("significance") or {})
                      .get("per_seed", {}).get(str(entry["seed"])))
            p_bleu = p_chrf = "-"
            if seed_p:
                p_bleu = f"{_p(seed_p['bootstrap']['bleu'])} / {_p(seed_p['randomization']['bleu'])}"
                p_chrf = f"{_p(seed_p['bootstrap']['chrf'])} / {_p(seed_p['randomization']['chrf'])}"
            lines.append(f"| {entry['system']} | {entry['seed']} | {entry['step']:,} "
                         f"| {test['bleu']:.2f} | {test['chrf']:.2f} | {p_bleu} | {p_chrf} |")
        buckets = [row.get("length_buckets") for row in rows.values() if row.get("length_buckets")]
        if buckets:
            labels = [b["bucket"] for b in buckets[0]]
            lines += ["", "BLEU by source length (words; mean over seeds):", "",
                      "| System | " + " | ".join(f"{label} ({b['sentences']})"
                                                 for label, b in zip(labels, buckets[0])) + " |",
                      "|---|" + "---:|" * len(labels)]
            for name, row in rows.items():
                if row.get("length_buckets"):
                    lines.append(f"| {name} | " + " | ".join(_number(b["bleu_mean"])
                                                          for b in row["length_buckets"]) + " |")
        lines.append("")
    lines += ["## Runs", "", "| Run | Status | Step | Target tokens seen | Training time | "
              "Target tokens/s |", "|---|---|---:|---:|---:|---:|"]
    for entry in report["runs"]:
        lines.append(f"| {entry['system']}/seed{entry['seed']} | {entry['status']} "
                     f"| {entry['step']:,} | {entry.get('target_tokens', 0):,.0f} "
                     f"| {entry.get('train_seconds', 0) / 60:.1f} min "
                     f"| {_number(entry.get('target_tokens_per_second'), 0)} |")
    lines.append("")
    if plot_files:
        lines += ["## Plots", ""] + [f"![{name}]({name})" for name in plot_files] + [""]
    return "\n".join(lines)


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
