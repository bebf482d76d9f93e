"""The tiny experiment of tests/experiments/ (2 systems x 2 seeds, a few steps on the synthetic
corpus): its files, and readers of what its runs leave. Each test file that trains it builds its
own (a module fixture), so that the files can run on different test workers."""

import json
import os

from conftest import TINY_MODEL_FLAGS

STEPS = 10


def write(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


def tiny_experiment(corpus, base):
    """Writes the tiny experiment's file and its systems' flagfiles under `base` (a pathlib
    directory); returns (the experiment file, where its runs go)."""
    small = write(base / "small.cfg", TINY_MODEL_FLAGS)
    # Another system: a narrower feed-forward layer (a flagfile may include another), with
    # decoding flags of its own that the experiment file does not set: sampling from a flat
    # distribution, at most 3 tokens (greedy, these tiny models translate most test sentences
    # into an empty line).
    narrow = write(base / "narrow.cfg", [f"--flagfile={small}", "--ffn_dim=16",
                                         "--learning_rate=1e-2", "--sampling=true",
                                         "--sampling_temperature=1000", "--max_decode_length=3"])
    config = write(base / "tiny.cfg", [
        "--experiment=tiny", f"--runs_dir={base / 'runs'}",
        f"--systems=small={small},narrow={narrow}", "--seeds=1,2",
        f"--train_steps={STEPS}", "--batch_tokens=256", "--batch_size=0",
        f"--data=text:{corpus}", "--source_lang=en", "--target_lang=de",
        "--max_source_length=20", "--max_target_length=20", "--warmup_steps=0",
        "--log_every=5", "--validate_every=5", "--save_every=5", "--bleu_sentences=10",
        "--beam_size=1", "--test_limit=20", "--length_buckets=3,5"])
    return config, str(base / "runs" / "tiny")


def complete(root):
    """Whether the report in `root` says every run of the experiment is complete (trained and
    scored by an earlier test of the module). A rerun would train and score nothing (the first
    test of test_experiment.py checks that) but would write the whole report again: its
    significance tests and plots are most of a rerun's seconds."""
    path = os.path.join(root, "report.json")
    return os.path.isfile(path) and all(r["status"] == "complete" for r in report(root)["runs"])


def steps(root, run):
    from tfnmt.experiments.runs import latest_step
    return latest_step(os.path.join(root, run))


def report(root):
    with open(os.path.join(root, "report.json")) as f:
        return json.load(f)
