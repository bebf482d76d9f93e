"""The runs of an experiment: one (system, seed) each, in RUNS_DIR/EXPERIMENT/SYSTEM/seedN.

A run trains through the normal `tfnmt train` path (so it resumes from its own checkpoints) and
records what it has done in files beside its checkpoints, so that an experiment can be stopped
and started again at any point, and its runs spread over machines:
  run.json            written when `train` returned: the step it reached and the budget it had;
  scores.json         the test scores of the checkpoint of `step` (BLEU, chrF, by length, speed);
  test/SPLIT.hyp      that checkpoint's translations of each test split (for significance tests);
  averaged-N/         with --average_checkpoints=N: the average of the run's last N checkpoints,
                      a model directory of its own (`tfnmt average` writes it, complete or not at
                      all) scored like the run, into averaged-N/scores.json (with the steps
                      averaged) and averaged-N/test/SPLIT.hyp; it belongs to the run's newest
                      step, and is averaged again once the run has trained further.
The sources and references of each test split are kept once per experiment, in data/.

Once a run is finished, these records, its config.json and its logs/ are all the report reads,
and a finished run whose checkpoints are gone (deleted to save space, or not copied with its
records from another machine) still counts as finished at the step its records give, so the
experiment skips it. docs/results/.gitignore keeps exactly these files of the experiments
committed there.
"""

import dataclasses
import glob
import os
import shutil
import time

from absl import logging

from tfnmt import json_files
from tfnmt.errors import ConfigError, UserError

RUN_FILE, SCORES_FILE = "run.json", "scores.json"


@dataclasses.dataclass
class Run:
    system: str
    seed: int
    flagfile: str
    directory: str
    averaged: int = 0  # > 0: the average of the last `averaged` checkpoints of the run

    @property
    def name(self):
        name = f"{self.system}/seed{self.seed}"
        return f"{name} (average of the last {self.averaged})" if self.averaged else name


def plan(root, systems, seeds):
    """Every run, seed by seed (so that a first seed of every system is done first)."""
    return [Run(name, seed, flagfile, os.path.join(root, name, f"seed{seed}"))
            for seed in seeds for name, flagfile in systems]


def share(runs, index, count):
    return [run for i, run in enumerate(runs) if i % count == index]


def read_json(path, default=None):
    """A record of the experiment; a damaged one stops it with 'cannot read PATH: ...'."""
    return json_files.read(path, default)


def write_json(path, value):
    json_files.write(path, value, indent=1, sort_keys=True)


def latest_step(directory):
    """The step of the newest checkpoint of a run (0 if none)."""
    from tfnmt.training.checkpoints import list_checkpoints
    paths = list_checkpoints(directory)
    return int(paths[0].rsplit("-", 1)[1]) if paths else 0


def step(directory):
    """The step of a run (or of an average, averaged-N/): its newest checkpoint's, or, when it
    has no checkpoints left, the step its records (run.json, else scores.json) were written at."""
    found = latest_step(directory)
    if found:
        return found
    for name in (RUN_FILE, SCORES_FILE):
        record = read_json(os.path.join(directory, name))
        if record:
            return record["step"]
    return 0


def trained(run, budget):
    """Whether `train` finished this run at this budget (the experiment's spec["budget"]: its
    step budget, or its cap when the run stopped early, and its stopping rule)."""
    record = read_json(os.path.join(run.directory, RUN_FILE))
    return (bool(record) and record["budget_steps"] == budget["train_steps"]
            and record.get("budget", "steps") == budget.get("kind", "steps")
            # Records written before the whole budget was kept have the steps to go by.
            and record.get("rule", budget) == budget
            and record["step"] == step(run.directory))


def scored_checkpoint(budget):
    """Which checkpoint of a run an experiment of `budget` scores: "best" by validation BLEU
    under --budget=converge, else "last" (the end of the budget)."""
    return "best" if budget.get("kind") == "converge" else "last"


def train(run, forwarded, budget, command, init_from=""):
    """Trains (or resumes) one run through `tfnmt train`: the system's flagfile, then the
    experiment's own flags (the budget, data, decoding: equal for every system), then its seed
    and directory, and `init_from` (a checkpoint to warm start from) if given. command: the
    CLI's entry point (argv -> exit status)."""
    import keras
    if latest_step(run.directory) == 0 and read_json(os.path.join(run.directory, RUN_FILE)):
        # Training from scratch would overwrite the records of the steps already done.
        raise ConfigError(f"{run.directory} holds the records of a run finished at another "
                          "budget but no checkpoint to go on from: give it its own --runs_dir, "
                          "or remove that directory to train it again")
    args = ["tfnmt", "train", f"--flagfile={run.flagfile}", *forwarded,
            f"--model_dir={run.directory}", f"--seed={run.seed}", "--evaluate_at_end=false",
            *([f"--init_from={init_from}"] if init_from else [])]
    logging.info("experiment: training %s (%s)", run.name, run.directory)
    status = command(args)
    keras.backend.clear_session()  # which collects the garbage too (free_memory=True)
    if status != 0:
        raise UserError("training did not finish (the line above says why)")
    os.makedirs(run.directory, exist_ok=True)
    record = {"system": run.system, "seed": run.seed, "flagfile": run.flagfile,
              "budget_steps": budget["train_steps"], "step": latest_step(run.directory),
              "rule": budget}
    if budget.get("kind") == "converge":
        record["budget"] = "converge"
    if init_from:
        record["init_from"] = init_from
    write_json(os.path.join(run.directory, RUN_FILE), record)


def scored(run, splits, checkpoint="last"):
    """Whether a run at its newest step is scored on every split of `splits`, on its
    `checkpoint` ("last" or "best", `scored_checkpoint`)."""
    scores = read_json(os.path.join(run.directory, SCORES_FILE))
    return (scores is not None and scores["step"] == step(run.directory)
            and scores.get("scored", "last") == checkpoint
            and all(split in scores["tests"] for split in splits))


def averaged(run, num):
    """The average of the run's last `num` checkpoints, as a run of its own (RUN/averaged-N)."""
    return dataclasses.replace(run, directory=os.path.join(run.directory, f"averaged-{num}"),
                               averaged=num)


def averaged_scored(run, num, splits):
    """Whether the average of the run's newest `num` checkpoints is scored on every split."""
    average = averaged(run, num)
    return step(average.directory) == step(run.directory) and scored(average, splits)


def average(run, num, average_checkpoints):
    """Writes the average of the run's last `num` checkpoints unless it is there for the run's
    newest step (the average of an older step, the run trained further since, is replaced);
    returns it as a run and the steps it averages. average_checkpoints: `tfnmt average`'s
    (model_dir, output_dir, num, which) -> (checkpoint, paths averaged)."""
    from tfnmt.training import checkpoints
    target = averaged(run, num)
    if latest_step(target.directory) != latest_step(run.directory):
        # A run is scored by one process at a time: what a killed one left is not in use.
        parent, base = os.path.split(target.directory)
        for leftover in [target.directory] + glob.glob(os.path.join(parent, f".{base}.staging-*")):
            shutil.rmtree(leftover, ignore_errors=True)
        logging.info("experiment: averaging the last %d checkpoints of %s", num, run.name)
        # The last, not the best: the experiment compares systems at the end of one budget,
        # and the best are picked with the validation data.
        average_checkpoints(run.directory, target.directory, num, "last")
    # The checkpoints `tfnmt average` took: the run has not changed since (same newest step).
    paths = checkpoints.list_checkpoints(run.directory, "last")[:num]
    return target, sorted(int(path.rsplit("-", 1)[1]) for path in paths)


def hypotheses_path(run, split):
    return os.path.join(run.directory, "test", f"{split}.hyp")


def data_path(root, split, side):
    return os.path.join(root, "data", f"{split}.{side}")


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def write_lines(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(line.replace("\n", " ") + "\n" for line in lines))
    os.replace(tmp, path)


def _test_data(root, spec, split, limit):
    """(sources, references) of a test split; kept in ROOT/data, and every run of the experiment
    must be scored on the same ones."""
    from tfnmt.data import sources as sources_lib
    source_lines, references = sources_lib.references(spec, split, limit)
    paths = data_path(root, split, "src"), data_path(root, split, "ref")
    if os.path.isfile(paths[1]):
        if read_lines(paths[0]) != source_lines or read_lines(paths[1]) != references:
            raise ConfigError(f"the {split} split of {spec.source} differs from the one this "
                              f"experiment's other runs were scored on ({paths[1]}): give every "
                              "system the same data (and --test_limit)")
    else:
        write_lines(paths[0], source_lines)
        write_lines(paths[1], references)
    return source_lines, references


def _data_spec(config, settings):
    from tfnmt.data import sources as sources_lib
    data = config["data"]
    return sources_lib.DataSpec(data["data"], data["source_lang"], data["target_lang"],
                                settings["manual_dir"], settings["tfds_data_dir"])


def restore_test_data(root, runs, settings):
    """Writes ROOT/data again where it is missing, from the data of the first scored run: the
    records of finished runs are kept without it (docs/results/.gitignore), and the report's
    significance tests need the references."""
    from tfnmt import model_dir as model_dir_lib
    missing = [split for split in settings["test_splits"]
               if not os.path.isfile(data_path(root, split, "ref"))]
    scored_runs = [run for run in runs if os.path.isfile(os.path.join(run.directory, SCORES_FILE))
                   and os.path.isfile(model_dir_lib.config_path(run.directory))]
    if not missing or not scored_runs:
        return
    spec = _data_spec(model_dir_lib.read_config(scored_runs[0].directory), settings)
    for split in missing:
        _test_data(root, spec, split, settings["test_limit"])


def score(run, root, settings, record=None):
    """Scores a run's checkpoint on each test split (settings["checkpoint"]: "last", the newest,
    or "best" by validation BLEU); writes scores.json (with `record`'s items; "step" is the
    run's newest, "checkpoint_step" the one scored) and the translations. settings:
    test_splits, test_limit, decode_options, decode_batch_size, length_edges, tokenize,
    manual_dir, tfds_data_dir, checkpoint."""
    import keras
    from tfnmt import model_dir as model_dir_lib
    from tfnmt.decoding.options import DecodingOptions
    from tfnmt.decoding.batches import translate_sentences
    from tfnmt.decoding.translator import Translator
    from tfnmt.evaluation import bleu, length_buckets
    from tfnmt.training import checkpoints

    keras.mixed_precision.set_global_policy("float32")
    config, model, source_vocab, target_vocab = model_dir_lib.load(run.directory)
    path = checkpoints.restore(model, run.directory, settings.get("checkpoint", "last"))
    translator = Translator(model, source_vocab, target_vocab,
                            options=DecodingOptions.from_record(settings["decode_options"]))
    spec = _data_spec(config, settings)
    splits = settings["test_splits"]
    scoring = {"target_lang": spec.target_lang, "tokenize": settings["tokenize"]}
    result = {"step": latest_step(run.directory), "checkpoint": os.path.basename(path),
              "checkpoint_step": int(path.rsplit("-", 1)[1]),
              "scored": settings.get("checkpoint", "last"),
              "parameters": int(model.count_params()), "tests": {}, **(record or {})}
    for split in splits:
        source_lines, references = _test_data(root, spec, split, settings["test_limit"])
        # One batch first, so that tracing the decoder is not counted as decoding time.
        translate_sentences(translator, source_lines[:settings["decode_batch_size"]],
                            settings["decode_batch_size"])
        start = time.time()
        hypotheses = translate_sentences(translator, source_lines, settings["decode_batch_size"])
        seconds = max(time.time() - start, 1e-9)
        write_lines(hypotheses_path(run, split), hypotheses)
        scores = bleu.score(hypotheses, references, **scoring)
        test = {"bleu": scores["bleu"], "chrf": scores["chrf"],
                "bleu_moses_lc": scores["bleu_moses_lc"],
                "bleu_signature": scores["bleu_signature"],
                "chrf_signature": scores["chrf_signature"], "sentences": len(hypotheses),
                "decode_seconds": seconds, "sentences_per_second": len(hypotheses) / seconds}
        if settings["length_edges"]:
            test["length_buckets"], _ = length_buckets.bucket_scores(
                source_lines, hypotheses, references, settings["length_edges"], **scoring)
        result["tests"][split] = test
        logging.info("experiment: %s %s: BLEU %.2f  chrF %.2f  (%.1f sentences/s)", run.name,
                     split, test["bleu"], test["chrf"], test["sentences_per_second"])
    write_json(os.path.join(run.directory, SCORES_FILE), result)
    keras.backend.clear_session()  # which collects the garbage too (free_memory=True)
    return result
