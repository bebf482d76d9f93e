"""What `tfnmt experiment` compares and how: its options, declared once (the flags are generated
from them, cli/flags.py), and the parsing of the ones that hold lists."""

import dataclasses
import os
import re

from tfnmt.errors import ConfigError
from tfnmt.options import find_relative, not_found_from, option

BUDGETS = ("steps", "converge")


@dataclasses.dataclass(frozen=True)
class ExperimentOptions:
    experiment: str = option(
        '', 'Name of the experiment: its runs and report go to --runs_dir/NAME.')
    systems: str = option(
        '', 'The systems compared, NAME=FLAGFILE,NAME=FLAGFILE,...: each a `train` flagfile; the '
        'first is the baseline of the significance tests.')
    seeds: str = option(
        '1,2', 'Seeds: every system trains once per seed (--seed), with the same data order for '
        'the same seed.')
    runs_dir: str = option('runs', 'Where experiments keep their runs and reports.')
    budget: str = option(
        'steps', 'steps: every run trains --train_steps steps and its final checkpoint is '
        'scored. converge: every run stops early on validation BLEU (the experiment file sets '
        '--best_metric=bleu and --early_stopping_patience, one rule for every system), '
        '--train_steps is the cap, and each run\'s best checkpoint by validation BLEU is scored.',
        choices=BUDGETS)
    test_splits: str = option(
        '', "Splits scored with the final checkpoints, comma-separated ('' = the data's test "
        "split).")
    average_checkpoints: int = option(
        0, "Also score the average of each run's last N checkpoints (as `tfnmt average` writes "
        "it, into RUN/averaged-N/), reported beside the final ones (0 = the final checkpoint "
        "only).", bounds='>= 0')
    warm_start: bool = option(
        False, "Every system after the baseline starts from the weights of the baseline's run "
        "of its seed (--init_from its scored checkpoint: the best under --budget=converge, else "
        "the last), which must be trained first, then trains under the same budget: paper "
        "002's protocol.")
    shard: str = option(
        '1/1', 'Train and score only share I of N of the runs (I/N, 1 <= I <= N), e.g. one share '
        'per machine; then `--report_only` collects what exists.')
    report_only: bool = option(
        False, 'Train and score nothing: rebuild the report from the runs as they are, partial '
        'ones marked.')
    summary: bool = option(
        False, 'Train and score nothing: write --runs_dir/summary.md, every experiment there at '
        'a glance, from their report.json files (no --experiment or --systems needed).')


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def systems(text, start_dirs=()):
    """'A=a.cfg,B=b.cfg' -> [(name, flagfile)], the baseline first; the flagfiles must exist,
    from the current directory or, as a nested --flagfile, from `start_dirs` (the directories of
    the flagfiles that were read) or above (tfnmt/options.py find_relative)."""
    out = []
    for item in (part.strip() for part in text.split(",")):
        name, sep, path = item.partition("=")
        if not sep or not _NAME.match(name) or not path:
            raise ConfigError(f"--systems={text!r}: give NAME=FLAGFILE,NAME=FLAGFILE,... (names "
                              "of letters, digits, . _ + -)")
        found = find_relative(path, start_dirs)
        if found is None or not os.path.isfile(found):
            where = f"{path} does not exist" if found or os.path.isabs(path) else (
                f"{path} is {not_found_from(path, start_dirs)}")
            raise ConfigError(f"--systems: {name}'s flagfile {where}")
        out.append((name, found))
    names = [name for name, _ in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"--systems={text!r}: a system name is given twice")
    if len(out) < 2:
        raise ConfigError(f"--systems={text!r}: compare at least two systems (a baseline first)")
    return out


def seeds(text):
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or any(v < 0 for v in values) or len(set(values)) != len(values):
        raise ConfigError(f"--seeds={text!r}: give distinct non-negative integers such as 1,2")
    return values


def shard(text):
    """'2/3' -> (1, 3): a 0-based index and the number of shares."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise ConfigError(f"--shard={text!r}: give I/N with 1 <= I <= N, e.g. 1/2")
    return int(match.group(1)) - 1, int(match.group(2))
