"""tfnmt experiment: train every (system, seed) of an experiment file at one budget, score the
final checkpoints (and, with --average_checkpoints=N, the average of each run's last N) and write
the report (tfnmt/experiments/).

An experiment file (configs/experiments/*.cfg) is a flagfile: --experiment, --systems, --seeds,
the budget (--train_steps and --batch_tokens or --batch_size), and any other `train` or decoding
flag. Every `train` flag it sets is passed to each run after the system's own flagfile, so the
budget, data and validation settings are the same for every system. Decoding follows the same
rule: a decoding flag the experiment file sets decodes every system; one it leaves unset is each
system's own (its flagfile's, else the default), so that a CTC model can decode greedily against
an autoregressive baseline's beam, as its paper compares them. The report says where systems
decode differently.
"""

import copy
import dataclasses
import os

from absl import logging

from tfnmt import options as tfnmt_options
from tfnmt import progress
from tfnmt.cli import common, main
from tfnmt.cli.average import average_checkpoints
from tfnmt.cli.flags import FLAGFILES_READ, FLAGS, given, read, read_fields
from tfnmt.cli.options import TranslationOptions
from tfnmt.data import sources
from tfnmt.data.options import DataOptions
from tfnmt.errors import ConfigError, UserError
from tfnmt.evaluation import bleu, length_buckets
from tfnmt.evaluation.options import ScoringOptions
from tfnmt.experiments import options as options_lib
from tfnmt.experiments import report as report_lib
from tfnmt.experiments import report_page
from tfnmt.experiments import runs as runs_lib
from tfnmt.experiments import summary
from tfnmt.experiments.options import ExperimentOptions
from tfnmt.training import checkpoints
from tfnmt.training.options import TrainOptions

BUDGET = ("train_steps", "batch_tokens", "batch_size", "accumulate_steps")
# The stopping rule of --budget=converge, stated in its report.
STOPPING = ("best_metric", "early_stopping_patience", "validate_every", "bleu_sentences")
# Set per run, or by the experiment itself.
_NOT_FORWARDED = {"model_dir", "seed", "evaluate_at_end"}


def forwarded_flags(budget_kind):
    """The experiment's own `train` flags, as arguments (they follow the system's flagfile)."""
    from tfnmt.cli.verbs import VERBS
    train = VERBS["train"]
    # The budget always, defaults included: the report states it, so every run must get it;
    # so too the stopping rule of --budget=converge, or a system's flagfile would set its own.
    always = BUDGET + (STOPPING + ("validate_per_epoch",) if budget_kind == "converge" else ())
    # Those `train` reads in every mode: it refuses the others on its command line.
    return [FLAGS[name].serialize() for name in sorted(train.names() - _NOT_FORWARDED)
            if (FLAGS[name].present or name in always) and None in train.modes(name)]


def system_decodings(systems, forwarded):
    """{system: its decoding options}: its flagfile's decoding flags under the experiment's (as
    its `train` reads them for validation)."""
    from absl import flags
    from tfnmt.decoding.options import DecodingOptions
    names = set(tfnmt_options.names(DecodingOptions))

    def decoding_flag(arg):
        name = arg.lstrip("-").partition("=")[0]
        return name in names or (name.startswith("no") and name[2:] in names)

    decodings = {}
    for name, flagfile in systems:
        # The decoding flags alone, parsed apart: parsing every flag would reset the
        # experiment's own, and absl's logging levels with them.
        values = flags.FlagValues()
        for flag in names:
            values[flag] = copy.deepcopy(FLAGS[flag])
            values[flag].unparse()
        try:
            args = FLAGS.read_flags_from_files([f"--flagfile={flagfile}", *forwarded],
                                               force_gnu=False)
            values(["tfnmt", *filter(decoding_flag, args)])
        except flags.Error as e:
            raise ConfigError(f"--systems: {name}'s flagfile {flagfile}: {e}") from None
        decodings[name] = dataclasses.asdict(read(DecodingOptions, values))
    return decodings


def spec_from_flags(o):
    """The experiment's spec from its ExperimentOptions `o` and the budget, data, scoring and
    decoding options the flags give."""
    train = read_fields(TrainOptions, (*BUDGET, *STOPPING, "validate_per_epoch", "keep_checkpoints",
                                       "bleu_tokenize"))
    data, scoring = read(DataOptions), read(ScoringOptions)
    check_budget(o, train, given(TrainOptions))
    budget = {name: train[name] for name in BUDGET}
    if o.budget == "converge":
        # Only then: the reports of fixed budgets stay as they were written.
        budget.update({"kind": "converge", **{name: train[name] for name in STOPPING}})
    edges = length_buckets.parse_edges(scoring.length_buckets) if scoring.length_buckets else None
    systems = options_lib.systems(
        o.systems, list(dict.fromkeys(os.path.dirname(os.path.abspath(f)) for f in FLAGFILES_READ)))
    decodings = system_decodings(systems, forwarded_flags(o.budget))
    decoding = decodings[systems[0][0]]
    decode_batch_size = read(TranslationOptions).decode_batch_size
    return {
        "experiment": o.experiment,
        "systems": systems,
        "seeds": options_lib.seeds(o.seeds),
        "budget": budget,
        "test_splits": ([s.strip() for s in o.test_splits.split(",") if s.strip()]
                        or [sources.default_splits(common.data_spec(data))[2]]),
        "average_checkpoints": o.average_checkpoints,
        "warm_start": o.warm_start,
        "decoding": decoding,
        # The baseline's decoding, and where another system's differs.
        "system_decoding": {name: {k: v for k, v in d.items() if v != decoding[k]}
                            for name, d in decodings.items() if d != decoding},
        "decodings": decodings,
        "target_lang": data.target_lang,
        "tokenize": train["bleu_tokenize"],
        "scoring": {"decode_batch_size": decode_batch_size,
                    "test_limit": data.test_limit, "length_edges": edges,
                    "tokenize": train["bleu_tokenize"], "manual_dir": data.manual_dir,
                    "tfds_data_dir": data.tfds_data_dir},
    }


def check_budget(o, train, set_by_user):
    """One budget for every system, set by the experiment file (`set_by_user`: the TrainOptions
    fields it sets), and checkpoints enough to average."""
    if not o.experiment:
        raise ConfigError("--experiment is required: the name of the experiment")
    if "train_steps" not in set_by_user or not {"batch_tokens", "batch_size"} & set_by_user:
        raise ConfigError("an experiment has one budget for every system: set --train_steps and "
                          "--batch_tokens (or --batch_size) in it")
    if (train["batch_tokens"] > 0) == (train["batch_size"] > 0):
        raise ConfigError(f"an experiment's batches are either --batch_tokens or --batch_size, "
                          f"the other 0, not --batch_tokens={train['batch_tokens']} and "
                          f"--batch_size={train['batch_size']}")
    if o.budget == "converge":
        missing = [f"--{name}" for name in ("best_metric", "early_stopping_patience")
                   if name not in set_by_user]
        if missing or train["best_metric"] != "bleu" or not train["early_stopping_patience"]:
            raise ConfigError("--budget=converge stops every system by one rule: set "
                              "--best_metric=bleu and --early_stopping_patience=N (N > 0) in the "
                              "experiment file; --train_steps is the cap")
        if train["validate_per_epoch"]:
            raise ConfigError("--budget=converge validates every --validate_every steps: drop "
                              "--validate_per_epoch from the experiment file")
        if o.average_checkpoints:
            raise ConfigError("--budget=converge scores each run's best checkpoint: "
                              "--average_checkpoints is for the final ones of --budget=steps")
    if o.average_checkpoints > train["keep_checkpoints"]:
        raise ConfigError(f"--average_checkpoints={o.average_checkpoints}: the runs keep only "
                          f"their last --keep_checkpoints={train['keep_checkpoints']} "
                          "checkpoints: set --keep_checkpoints to as many or more in the "
                          "experiment file")


def _time_left(timed, rest, budget):
    """'; about 1h20m left (...)': the runs of `rest` still to train, at the mean time of those
    this command trained (a resumed run takes less: the estimate errs long)."""
    if not timed:
        return ""
    left = sum(not runs_lib.trained(run, budget) for run in rest)
    each = sum(timed) / len(timed)
    return (f"; about {progress.duration(each * left)} left ({left} run{'s' * (left != 1)} to "
            f"train, {progress.duration(each)} each so far)")


def run():
    o = read(ExperimentOptions)
    if o.summary:
        logging.info("experiment: wrote %s", summary.write(o.runs_dir))
        return 0
    spec = spec_from_flags(o)
    index, count = options_lib.shard(o.shard)
    bleu.metric(target_lang=spec["target_lang"], tokenize=spec["tokenize"])
    root = os.path.join(o.runs_dir, o.experiment)
    common.check_output_dir(root, "runs_dir")
    os.makedirs(root, exist_ok=True)
    budget = spec["budget"]
    # Read now: each run's `train` parses the flags anew.
    forwarded = forwarded_flags(o.budget)
    scoring = dict(spec["scoring"], test_splits=spec["test_splits"],
                   checkpoint=runs_lib.scored_checkpoint(budget))
    mine = runs_lib.share(runs_lib.plan(root, spec["systems"], spec["seeds"]), index, count)
    failed = []
    timed = []  # seconds of each run trained by this command, scoring included
    if not o.report_only:
        for position, run in enumerate(mine, start=1):
            start = progress.now()
            # A run that fails (bad settings, a diverged loss) must not stop an experiment left
            # to run for days: the others go on, and the command ends with an error.
            try:
                if runs_lib.trained(run, budget):
                    logging.info("experiment: %s is trained (%d of %d): skipped", run.name,
                                 position, len(mine))
                    start = None
                else:
                    logging.info("experiment: run %d of %d: %s%s", position, len(mine),
                                 run.name, _time_left(timed, mine[position - 1:], budget))
                    runs_lib.train(run, forwarded, budget, main.main,
                                   _warm_start(run, root, spec))
                own = dict(scoring, decode_options=spec["decodings"][run.system])
                if not runs_lib.scored(run, spec["test_splits"], scoring["checkpoint"]):
                    runs_lib.score(run, root, own)
                num = spec["average_checkpoints"]
                if num and not runs_lib.averaged_scored(run, num, spec["test_splits"]):
                    averaged, steps = runs_lib.average(run, num, average_checkpoints)
                    runs_lib.score(averaged, root, own, {"averaged_steps": steps})
            except UserError as e:  # a diverged run (DivergedError) among them
                logging.error("experiment: %s failed: %s; going on with the other runs",
                              run.name, e)
                failed.append(run.name)
                start = None  # a failed run's time says nothing of a run's
            if start is not None:
                timed.append(progress.now() - start)
    runs_lib.restore_test_data(root, runs_lib.plan(root, spec["systems"], spec["seeds"]), scoring)
    _print_summary(root, report_lib.write(root, spec))
    if failed:
        raise UserError(f"{len(failed)} run(s) failed: {', '.join(failed)} (the lines above say "
                        "why); run the same command again once fixed: the others are kept")


def _warm_start(run, root, spec):
    """With --warm_start, the checkpoint a run of a system after the baseline starts from: the
    scored one of the baseline's run of its seed; else ''."""
    baseline = spec["systems"][0]
    if not spec["warm_start"] or run.system == baseline[0]:
        return ""
    start = runs_lib.plan(root, [baseline], [run.seed])[0]
    if not runs_lib.trained(start, spec["budget"]):
        raise UserError(f"--warm_start: {run.name} starts from {start.name}, which is not "
                        "trained yet: train it first (its --shard, or the whole file in one "
                        "command, which trains each seed's baseline first)")
    return checkpoints.resolve(start.directory, runs_lib.scored_checkpoint(spec["budget"]))


def _print_summary(root, report):
    """Where the report is, and each system's mean BLEU on each split."""
    done = sum(entry["status"] == "complete" for entry in report["runs"])
    print(f"{os.path.join(root, 'report.md')}: {done} of {len(report['runs'])} runs complete")
    for split in report["test_splits"]:
        if split in report["signatures"]:
            print(f"  {split} BLEU signature: {report['signatures'][split]['bleu']}")
        rows = [(name, row) for name, row in report["results"][split].items()]
        rows += [(f"{name} ({report_page.averaged_label(report)})", row)
                 for name, row in report.get("averaged_results", {}).get(split, {}).items()]
        for name, row in rows:
            if row["bleu_mean"] is not None:
                print(f"  {split} {name}: BLEU {row['bleu_mean']:.2f} ± {row['bleu_std']:.2f} "
                      f"({row['runs']} runs)")
