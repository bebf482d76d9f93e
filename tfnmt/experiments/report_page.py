"""report.md, the tables a paper prints, from report.json's numbers (report.py builds them):
the budget and the tests, per test split the systems' means, each seed's scores against the
baseline's with p-values, BLEU by source length, then every run's status and speed.
"""

from tfnmt.evaluation import bleu
from tfnmt.experiments import runs as runs_lib

# What report.md says of the tests (and report.py's `_ties_count_as_extreme` does).
NULL_HYPOTHESIS = ("the system and the baseline are equally good: their difference in score on "
                   "this test set is what chance alone gives")
TIES = ("a p-value counts the resamples whose difference is at least as large as the real one "
        "(ties included; Noreen 1989, Riezler and Maxwell 2005), plus one, over the resamples "
        "plus one: two identical outputs get p = 1")


def averaged_label(report):
    return f"average of the last {report['average_checkpoints']}"


def number(value, digits=2, sign=False):
    """A figure of a table: '-' where there is none."""
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


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
                f"| {number(row['bleu_mean'])} ± {number(row['bleu_std'])} "
                f"| {number(row['chrf_mean'])} ± {number(row['chrf_std'])} "
                f"| {p_bleu} | {p_chrf} | {number(row.get('bleu_moses_lc_mean'))} "
                f"| {number(row['target_tokens_per_second_mean'], 0)} "
                f"| {number(row['sentences_per_second_mean'], 1)} "
                f"| {number(row['decode_speedup'])}{'x' if row['decode_speedup'] else ''} "
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
            lines.append(f"| {name} | " + " | ".join(number(b["bleu_mean"])
                                                     for b in row["length_buckets"]) + " |")
    return lines


def _runs_table(report):
    lines = ["## Runs", "", "| Run | Status | Step | Target tokens seen | Training time | "
             "Target tokens/s |", "|---|---|---:|---:|---:|---:|"]
    for entry in report["runs"]:
        lines.append(f"| {entry['system']}/seed{entry['seed']} | {entry['status']} "
                     f"| {entry['step']:,} | {entry.get('target_tokens', 0):,.0f} "
                     f"| {entry.get('train_seconds', 0) / 60:.1f} min "
                     f"| {number(entry.get('target_tokens_per_second'), 0)} |")
    lines.append("")
    return lines
