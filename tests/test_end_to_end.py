"""The foundation's acceptance runs on real Multi30k and in separate processes."""

import os
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from conftest import REPO, run_cli_subprocess, tiny_train_flags


@pytest.fixture(scope="module")
def quickstart(multi30k_dir, tmp_path_factory):
    """configs/quickstart.cfg, shortened to 200 steps, on the first 2,000 Multi30k pairs."""
    root = tmp_path_factory.mktemp("quickstart")
    model_dir = str(root / "model")
    env = dict(os.environ, TFNMT_MULTI30K_DIR=multi30k_dir)
    result = run_cli_subprocess(
        "train", f"--flagfile={os.path.join(REPO, 'configs', 'quickstart.cfg')}",
        f"--model_dir={model_dir}", f"--tfds_data_dir={root / 'tfds'}", "--train_steps=200",
        "--validate_every=100", "--save_every=100", "--evaluate_at_end=true", "--test_limit=30",
        timeout=900, env=env, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    return model_dir, result, env, root


def test_quickstart_trains_with_falling_validation_loss(quickstart):
    model_dir, result, _, _ = quickstart
    losses = [float(line.split("validation at step")[1].split("loss")[1].split()[0])
              for line in result.stderr.splitlines() if "validation at step" in line]
    assert len(losses) == 2 and losses[1] < losses[0], losses
    assert "BLEU signature: nrefs:1|case:mixed" in result.stdout


def test_exported_model_in_a_fresh_process_equals_checkpoint_translation(quickstart, multi30k_dir):
    model_dir, _, env, root = quickstart
    export = run_cli_subprocess("export", f"--model_dir={model_dir}", f"--export_dir={root / 'export'}",
                                "--beam_size=4", check=True, env=env)
    saved = export.stdout.strip().splitlines()[-1]
    assert saved.endswith(os.path.join("transformer", "1"))
    source = os.path.join(multi30k_dir, "test_2016_flickr.en")
    sentences = open(source, encoding="utf-8").read().splitlines()[:40]
    (root / "in.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    from_checkpoint = run_cli_subprocess("translate", f"--model_dir={model_dir}", "--beam_size=4",
                                         f"--input={root / 'in.txt'}", check=True, env=env)
    from_export = run_cli_subprocess("translate", f"--saved_model={saved}",
                                     f"--input={root / 'in.txt'}", check=True, env=env)
    assert len(from_checkpoint.stdout.splitlines()) == 40
    assert from_export.stdout == from_checkpoint.stdout


def test_killed_training_resumes_from_the_last_checkpoint(corpus, tmp_path):
    model_dir = str(tmp_path / "m")
    flags = tiny_train_flags(corpus, model_dir, steps=400)
    flags = [f for f in flags if not f.startswith(("--save_every", "--validate_every"))]
    flags += ["--save_every=10", "--validate_every=1000", "--bleu_sentences=0"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    process = subprocess.Popen([sys.executable, "-m", "tfnmt", "train", *flags], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = os.path.join(model_dir, "ckpt", "checkpoint")
    deadline = time.time() + 240
    while time.time() < deadline and not (os.path.exists(state) and "ckpt-30" in open(state).read()):
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert os.path.exists(state), "no checkpoint was written before the kill"
    # The last checkpoint is the one the state file records: a kill between writing ckpt-N's
    # files and updating the state leaves ckpt-N behind, and training resumes before it.
    saved_step = int(tf.train.get_checkpoint_state(os.path.dirname(state)).model_checkpoint_path
                     .rsplit("-", 1)[1])
    assert 30 <= saved_step < 400
    flags = [f for f in flags if not f.startswith("--train_steps")] + [f"--train_steps={saved_step + 20}"]
    resumed = run_cli_subprocess("train", *flags, check=True)
    assert f"at step {saved_step} " in resumed.stderr
    assert f"saved {model_dir}/ckpt/ckpt-{saved_step + 20}" in resumed.stderr
