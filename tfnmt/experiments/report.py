"""The report of an experiment, from what its runs left on disk: report.json (every number),
report.md (the table a paper prints: report_page.py) and PNG plots.

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
yet is left out of those. The p-values are kept in EXPERIMENT/pvalues.json, a cache (_PValues)
that docs/results does not keep.
"""

import contextlib
import glob
import hashlib
import json
import os

import numpy as np
import sacrebleu
from sacrebleu import significance as sacrebleu_significance
from sacrebleu.significance import PairedTest

from tfnmt.errors import UserError
from tfnmt.evaluation import bleu
from tfnmt.experiments import plots, report_page, runs as runs_lib
from tfnmt.training.callbacks import DIVERGED_FILE

TESTS = {"bootstrap": "bs", "randomization": "ar"}
PVALUES_FILE = "pvalues.json"


class _PValues:
    """The p-values a report already has (EXPERIMENT/pvalues.json), by a hash of all they depend
    on: the tests resample the whole test set 11,000 times per pair of outputs, and the report
    is written again after every run and by --report_only. A build keeps only the entries it
    used; a damaged file is computed again."""

    def __init__(self, root):
        self.path = os.path.join(root, PVALUES_FILE)
        try:
            self.found = runs_lib.read_json(self.path, {})
        except UserError:
            self.found = {}
        self.used = {}

    def pvalues(self, named, references, target_lang, tokenize):
        """_pvalues(...), computed only for inputs the file does not have."""
        inputs = [named, references, target_lang, tokenize, TESTS, sacrebleu.__version__]
        key = hashlib.sha256(json.dumps(inputs).encode()).hexdigest()
        if key not in self.found:
            self.found[key] = _pvalues(named, references, target_lang, tokenize)
        self.used[key] = self.found[key]
        return self.used[key]

    def save(self):
        runs_lib.write_json(self.path, self.used)


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


def significance(root, split, baseline, system, seeds, target_lang, tokenize, known):
    """Per seed and pooled over the seeds both systems completed (p-values through `known`, a
    _PValues)."""
    references = runs_lib.read_lines(runs_lib.data_path(root, split, "ref"))
    per_seed, pooled_base, pooled_system, identical = {}, [], [], []
    for seed in seeds:
        base = runs_lib.read_lines(runs_lib.hypotheses_path(baseline[seed], split))
        hyps = runs_lib.read_lines(runs_lib.hypotheses_path(system[seed], split))
        if base == hyps:  # p = 1 then says "the same translations", not a finding
            identical.append(seed)
        per_seed[str(seed)] = known.pvalues([("baseline", base), ("system", hyps)], references,
                                            target_lang, tokenize)
        pooled_base += base
        pooled_system += hyps
    pooled = known.pvalues([("baseline", pooled_base), ("system", pooled_system)],
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


def _results(root, spec, by_run, target_lang, known):
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
                    {s: by_run[(name, s)][0] for s in paired}, paired, target_lang,
                    spec["tokenize"], known) if paired else None
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
    known = _PValues(root)
    results = _results(root, spec, by_run, target_lang, known)
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
        report["averaged_results"] = _results(root, spec, averaged, target_lang, known)
    known.save()
    return report


def write(root, spec):
    """Writes report.json, report.md and the plots into `root`; returns the report."""
    report = build(root, spec)
    report["plots"] = plots.write(root, report)
    runs_lib.write_json(os.path.join(root, "report.json"), report)
    path = os.path.join(root, "report.md")
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(report_page.markdown(report, sorted(report["plots"])))
    os.replace(tmp, path)
    return report
