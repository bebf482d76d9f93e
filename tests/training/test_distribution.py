"""Data-parallel training on tf.distribute: MirroredStrategy in-process, and two
MultiWorkerMirroredStrategy worker processes on 127.0.0.1 (lockstep weights, chief-only writes,
a killed worker and the documented recovery from the chief's newest checkpoint)."""

import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO, run_cli, tiny_train_flags
from tfnmt.training import checkpoints


def _flags(corpus, model_dir, steps, *extra):
    return [*tiny_train_flags(corpus, model_dir, steps), *extra]


def _weights(model_dir):
    reader = tf.train.load_checkpoint(checkpoints.resolve(model_dir))
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
            if k.startswith("model/") or k.startswith("data_position")}


@pytest.mark.slow
def test_mirrored_trains_the_same_batches_as_one_device(corpus, tmp_path):
    # One CPU: a single replica, but the whole tf.distribute path (scope, distributed dataset,
    # replica-context loss and data position) instead of the plain one.
    plain, mirrored = str(tmp_path / "plain"), str(tmp_path / "mirrored")
    assert run_cli("train", *_flags(corpus, plain, 8)) == 0
    assert run_cli("train", *_flags(corpus, mirrored, 8), "--distribution=mirrored") == 0
    a, b = _weights(plain), _weights(mirrored)
    assert a.keys() == b.keys() and len(a) > 10
    np.testing.assert_array_equal(a["data_position/.ATTRIBUTES/VARIABLE_VALUE"],
                                  b["data_position/.ATTRIBUTES/VARIABLE_VALUE"])
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-4, atol=1e-6, err_msg=key)


def test_multi_worker_needs_tf_config(corpus, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert run_cli("train", *_flags(corpus, str(tmp_path / "m"), 4), "--distribution=multi_worker") == 2
    assert "needs TF_CONFIG" in capsys.readouterr().err


# --- two worker processes ------------------------------------------------------------------------

def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _start_workers(flags, log_dir, tag):
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    workers = []
    for index in range(2):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO,
                   TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}))
        log = open(os.path.join(log_dir, f"{tag}-worker{index}.log"), "w")
        # --verbosity=1: every checkpoint saved is logged (the test counts them).
        workers.append((subprocess.Popen([sys.executable, "-m", "tfnmt", "train", *flags,
                                          "--distribution=multi_worker", "--verbosity=1"],
                                         stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO), log))
    return workers


def _finish(workers, timeout):
    codes = []
    deadline = time.time() + timeout
    for process, log in workers:
        try:
            codes.append(process.wait(timeout=max(1, deadline - time.time())))
        except subprocess.TimeoutExpired:
            process.kill()
            codes.append(process.wait())
        log.close()
    return codes


def _read(log_dir, tag, index):
    with open(os.path.join(log_dir, f"{tag}-worker{index}.log")) as f:
        return f.read()


@pytest.fixture(scope="module")
def killed_and_resumed(corpus, tmp_path_factory):
    """Two workers train; worker 1 is killed once the chief has saved; then both are restarted
    with the same flags (a lower step budget, so that the test ends soon)."""
    root = tmp_path_factory.mktemp("multi_worker")
    model_dir, logs = str(root / "model"), str(root)
    vocab_flags = [f for f in _flags(corpus, model_dir, 1)
                   if f.startswith(("--model_dir", "--data", "--source_lang", "--target_lang", "--vocab"))]
    assert run_cli("vocab", *vocab_flags) == 0
    first = _start_workers(_flags(corpus, model_dir, 10_000, "--save_every=2", "--log_every=2",
                                  "--validate_every=10000", "--evaluate_at_end=false"), logs, "first")
    deadline = time.time() + 150
    while not glob.glob(os.path.join(model_dir, "ckpt", "ckpt-4.index")):
        assert time.time() < deadline and first[0][0].poll() is None, _read(logs, "first", 0)[-3000:]
        time.sleep(0.2)
    first[1][0].send_signal(signal.SIGKILL)
    killed_at = time.time()
    codes = _finish(first, timeout=90)
    chief_failed_after = time.time() - killed_at
    last = checkpoints.resolve(model_dir)
    last_step = int(last.rsplit("-", 1)[1])
    resumed = _start_workers(_flags(corpus, model_dir, last_step + 4, "--save_every=2",
                                    "--log_every=2", "--evaluate_at_end=false"), logs, "resumed")
    resumed_codes = _finish(resumed, timeout=150)
    return dict(model_dir=model_dir, codes=codes, chief_failed_after=chief_failed_after,
                last=last, last_step=last_step, resumed_codes=resumed_codes,
                first=[_read(logs, "first", i) for i in range(2)],
                resumed=[_read(logs, "resumed", i) for i in range(2)])


@pytest.mark.slow
def test_two_workers_train_in_lockstep_and_only_the_chief_writes(killed_and_resumed):
    run = killed_and_resumed
    assert run["resumed_codes"] == [0, 0], run["resumed"][0][-3000:] + run["resumed"][1][-3000:]
    chief, worker = run["resumed"]
    assert "2 replica(s) (multi_worker; this is worker 0 (chief))" in chief
    assert "this is worker 1)" in worker
    fingerprints = [re.findall(r"finished at step (\d+); weights fingerprint (\w+)", log)
                    for log in run["resumed"]]
    assert fingerprints[0] == fingerprints[1] == [(str(run["last_step"] + 4), fingerprints[0][0][1])]
    # The same global loss and token count on both workers at every logged step.
    losses = [re.findall(r"step (\d+)  loss (\S+)", log) for log in run["first"] + run["resumed"]]
    logged = min(len(losses[0]), len(losses[1]))
    assert logged >= 2 and losses[0][:logged] == losses[1][:logged]
    assert losses[2] == losses[3] and len(losses[2]) == 2
    # Only the chief wrote to the model directory; the other worker saved to scratch directories.
    saved = [re.findall(r"saved (\S+)", log) for log in run["resumed"]]
    assert all(p.startswith(run["model_dir"]) for p in saved[0]) and len(saved[0]) == 2
    assert saved[1] and not any(p.startswith(run["model_dir"]) for p in saved[1])
    assert not any(os.path.exists(p + ".index") for p in saved[1])
    step = checkpoints.resolve(run["model_dir"])
    assert step.endswith(f"ckpt-{run['last_step'] + 4}")


def test_a_killed_worker_fails_the_job_and_a_restart_resumes_from_the_chief_checkpoint(killed_and_resumed):
    run = killed_and_resumed
    # The surviving chief stops with one line that says what to do, within seconds.
    assert run["codes"][0] == 2 and run["codes"][1] == -signal.SIGKILL
    assert "a worker of the multi-worker job failed" in run["first"][0]
    assert "restart every worker" in run["first"][0]
    assert run["chief_failed_after"] < 60
    assert run["last_step"] >= 4
    # Both restarted workers resume from the chief's newest checkpoint and finish the budget.
    for log in run["resumed"]:
        assert f"resuming from {run['last']} at step {run['last_step']}" in log
        assert f"step {run['last_step'] + 2}  loss" in log
    reader = tf.train.load_checkpoint(checkpoints.resolve(run["model_dir"]))
    assert reader.get_tensor("optimizer/iteration/.ATTRIBUTES/VARIABLE_VALUE") == run["last_step"] + 4
