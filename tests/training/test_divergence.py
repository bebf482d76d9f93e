"""A run whose loss becomes NaN or infinite ends in one line (exit 2) naming the step and the last
good checkpoint, keeps the checkpoints written before and writes none of the diverged weights."""

import os

import pytest

from conftest import run_cli, tiny_train_flags
from tfnmt import json_files
from tfnmt.training import checkpoints
from tfnmt.training.callbacks import DIVERGED_FILE


def _diverging(corpus, model_dir, steps=6):
    flags = [f for f in tiny_train_flags(corpus, model_dir, steps=steps)
             if not f.startswith(("--learning_rate", "--warmup_steps", "--save_every"))]
    return [*flags, "--learning_rate=1e30", "--warmup_steps=0", "--save_every=1"]


def _steps(model_dir):
    return sorted(int(p.rsplit("-", 1)[1]) for p in checkpoints.list_checkpoints(model_dir))


@pytest.mark.slow
def test_a_diverged_run_is_one_line_and_keeps_only_the_checkpoints_before(corpus, tmp_path, capfd):
    model_dir = str(tmp_path / "m")
    # In-process (a child would pay ~8 s to import TensorFlow for nothing the test looks at):
    # capfd takes what is written to file descriptor 2 as a child's stderr would hold it.
    code = run_cli("train", *_diverging(corpus, model_dir))
    stderr = capfd.readouterr().err
    assert code == 2, stderr[-2000:]
    last = stderr.strip().splitlines()[-1]
    assert "Traceback" not in stderr
    assert last.startswith("tfnmt train: error: training loss is "), last
    step = int(last.split(" at step ")[1].split(";")[0])
    kept = _steps(model_dir)
    # Every step before the diverged one was saved (--save_every=1), none from it on.
    assert kept and max(kept) == step - 1, (kept, last)
    assert f"the last good checkpoint is {checkpoints.list_checkpoints(model_dir)[0]}" in last
    assert "--learning_rate" in last


@pytest.mark.slow
def test_a_run_that_diverges_before_any_save_says_so(corpus, tmp_path, capsys):
    model_dir = str(tmp_path / "m")
    flags = [f for f in _diverging(corpus, model_dir) if f != "--save_every=1"]
    assert run_cli("train", *flags, "--save_every=100") == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "no checkpoint was written before it" in last, last
    assert not os.path.isdir(os.path.join(model_dir, "ckpt")) or not _steps(model_dir)
    record = json_files.read(os.path.join(model_dir, DIVERGED_FILE))
    assert record["last_checkpoint"] is None and record["step"] >= 1
    # The same run with a sane learning rate: a new attempt, whose record it is.
    sane = [f if f != "--learning_rate=1e30" else "--learning_rate=1e-3" for f in flags]
    assert run_cli("train", *sane, "--save_every=100", "--train_steps=1") == 0
    assert not os.path.exists(os.path.join(model_dir, DIVERGED_FILE))
