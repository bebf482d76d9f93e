"""The fault battery: interrupted and failing runs report one line and lose nothing.

Killed training (kill -9, again and again), a full disk while saving or exporting (a writer that
raises), paths that cannot be written, and `translate` interrupted or failing mid-file."""

import errno
import glob
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from conftest import events, run_cli, synthetic_pairs, tiny_train_flags
from tfnmt.decoding.backend import Backend
from tfnmt.models import catalog
from tfnmt.serving.client import ServerError
from tfnmt.training import checkpoints


def _error(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    return err[-1]


def _full_disk(path="ckpt"):
    return tf.errors.ResourceExhaustedError(None, None, f"{path}; No space left on device")


def _restorable(path):
    """Reads every tensor of a checkpoint; returns its optimizer step."""
    reader = tf.train.load_checkpoint(path)
    for key, dtype in reader.get_variable_to_dtype_map().items():
        if dtype != tf.variant:  # the training stream's state: tf.data reads it
            reader.get_tensor(key)
    return int(reader.get_tensor("optimizer/iteration/.ATTRIBUTES/VARIABLE_VALUE"))


# --- translate: the output path first, then lines written in order as they are known ----------

@pytest.fixture
def file_in_the_way(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("")
    return path


@pytest.mark.parametrize("backend", [["--model_dir=/nonexistent"], ["--saved_model=/nonexistent"],
                                     ["--server=http://127.0.0.1:9", "--served_model=m", "--server_retries=0"]])
def test_a_bad_output_path_fails_before_the_model_is_loaded(backend, tmp_path, file_in_the_way, capsys):
    source = tmp_path / "in.txt"
    source.write_text("the dog\n")
    # Nothing named /nonexistent is ever read: the error is about --output, not the model.
    for output, problem in [(file_in_the_way / "out.txt", "is a file, not a directory"),
                            (tmp_path / "missing" / "out.txt", "does not exist"),
                            (tmp_path, "is a directory")]:
        assert run_cli("translate", *backend, f"--input={source}", f"--output={output}") == 2
        line = _error(capsys)
        assert line.startswith("tfnmt translate: error: --output=") and problem in line, line
    assert not (tmp_path / "missing").exists()


def test_evaluate_checks_its_output_path_first(file_in_the_way, capsys):
    assert run_cli("evaluate", "--model_dir=/nonexistent", f"--output={file_in_the_way}/hyp.txt") == 2
    assert "is a file, not a directory" in _error(capsys)


class _FailingTranslator(Backend):
    """Upper-cases its input; the `fail_at`-th call raises `error`."""

    def __init__(self, fail_at, error):
        self.fail_at, self.error, self.calls = fail_at, error, 0

    def translate(self, text):
        self.calls += 1
        if self.calls == self.fail_at:
            raise self.error
        return {"translations": tf.strings.upper(text), "scores": tf.zeros(tf.shape(text))}


def _window_lines():
    # --decode_batch_size=2 sorts within windows of 16 lines; the second window's first line is
    # its longest, so no line of it can be written before the whole window is translated.
    first = [f"line {i} " + "x" * (i % 5) for i in range(16)]
    second = [f"line {16 + i} " + "y" * (20 - i) for i in range(16)]
    return first + second + ["z"] * 8


@pytest.mark.parametrize("error, code", [(ServerError("the server went away"), 2),
                                         (KeyboardInterrupt(), 130)])
def test_a_translation_failing_mid_file_leaves_the_lines_before_in_order(
        error, code, tmp_path, monkeypatch, caplog):
    from tfnmt.cli import common
    lines = _window_lines()
    source, out = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join(lines) + "\n")
    failing = _FailingTranslator(fail_at=10, error=error)  # in the second window
    monkeypatch.setattr(common, "open_backend", lambda source: (None, failing))
    assert run_cli("translate", "--saved_model=unused", f"--input={source}", f"--output={out}",
                   "--decode_batch_size=2") == code
    assert out.read_text() == "".join(line.upper() + "\n" for line in lines[:16])
    assert f"{out} holds the first 16 of 40 translations" in caplog.text


def test_a_translation_succeeding_writes_every_line_in_order(tmp_path, monkeypatch):
    from tfnmt.cli import common
    lines = _window_lines()
    source, out = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(common, "open_backend", lambda source: (None, _FailingTranslator(0, None)))
    assert run_cli("translate", "--saved_model=unused", f"--input={source}", f"--output={out}",
                   "--decode_batch_size=3") == 0
    assert out.read_text() == "".join(line.upper() + "\n" for line in lines)


def test_a_full_disk_while_translating_is_one_line(tmp_path, monkeypatch, capsys):
    from tfnmt.cli import common
    (tmp_path / "in.txt").write_text("a\nb\n")
    monkeypatch.setattr(common, "open_backend", lambda source: (None, _FailingTranslator(0, None)))
    # Every write to /dev/full fails with ENOSPC.
    assert run_cli("translate", "--saved_model=unused", f"--input={tmp_path / 'in.txt'}",
                   "--output=/dev/full") == 2
    assert _error(capsys) == ("tfnmt translate: error: cannot write /dev/full: no space left on "
                              "device; free some space or choose another --output")


class _ClosedPipe:
    """stdout after its reader (`| head -2`) has gone: every write fails with EPIPE."""

    def write(self, text):
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    def flush(self):
        pass


def test_a_closed_stdout_ends_translate_quietly_while_a_full_disk_is_an_error(
        tmp_path, monkeypatch, capsys):
    # `translate | head -2` ended with "error: cannot write stdout: Broken pipe; free some space".
    from tfnmt.cli import common
    (tmp_path / "in.txt").write_text("a\nb\n")
    monkeypatch.setattr(common, "open_backend", lambda source: (None, _FailingTranslator(0, None)))
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert run_cli("translate", "--saved_model=unused", f"--input={tmp_path / 'in.txt'}") == 141
    assert capsys.readouterr().err == ""
    assert run_cli("translate", "--saved_model=unused", f"--input={tmp_path / 'in.txt'}",
                   "--output=/dev/full") == 2
    assert "no space left on device" in _error(capsys)


@pytest.mark.slow
def test_ctrl_c_during_translate_leaves_a_prefix_of_complete_lines(trained_model, tmp_path):
    sentences = [source for source, _ in synthetic_pairs(3000, seed=7)]
    source, out = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join(sentences) + "\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "tfnmt", "translate", f"--model_dir={trained_model}",
         f"--input={source}", f"--output={out}", "--decode_batch_size=1", "--beam_size=1"],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
        # A suite started in the background (`cmd &`) ignores SIGINT, and so would the child.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 240
    while time.time() < deadline and process.poll() is None and \
            (not out.exists() or out.read_text().count("\n") < 20):
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    stderr = process.communicate(timeout=60)[1]
    assert process.returncode == 130, stderr[-2000:]
    assert "tfnmt translate: interrupted" in stderr and "Traceback" not in stderr
    text = out.read_text()
    assert text.endswith("\n")
    written = text.splitlines()
    assert 20 <= len(written) < len(sentences)
    assert f"holds the first {len(written)} of {len(sentences)} translations" in stderr
    # The same lines, translated one by one in-process, are exactly what was written.
    (tmp_path / "prefix.txt").write_text("\n".join(sentences[:len(written)]) + "\n")
    assert run_cli("translate", f"--model_dir={trained_model}", f"--input={tmp_path / 'prefix.txt'}",
                   f"--output={tmp_path / 'expected.txt'}", "--decode_batch_size=1",
                   "--beam_size=1") == 0
    assert written == (tmp_path / "expected.txt").read_text().splitlines()


# --- export and average: paths that cannot be written, a full disk ---------------------------

@pytest.mark.parametrize("verb, flag", [("export", "export_dir"), ("average", "output_dir")])
def test_export_and_average_into_a_path_under_a_file_fail_in_one_line(
        verb, flag, trained_model, file_in_the_way, capsys):
    # A read-only directory does not stop root, who runs the tests; a file in the way does.
    for model_dir in ("/nonexistent", trained_model):  # refused before the model is read
        assert run_cli(verb, f"--model_dir={model_dir}", f"--{flag}={file_in_the_way}/sub") == 2
        line = _error(capsys)
        assert line.startswith(f"tfnmt {verb}: error: --{flag}={file_in_the_way}/sub: "
                               f"{file_in_the_way} is a file, not a directory"), line


def test_full_disk_during_export_leaves_no_partial_version(trained_model, tmp_path, monkeypatch, capsys):
    base = tmp_path / "export"
    (base / "tiny" / "1").mkdir(parents=True)
    (base / "tiny" / "1" / "saved_model.pb").write_text("the version being served")

    def save(obj, path, signatures=None):
        os.makedirs(os.path.join(path, "variables"))
        with open(os.path.join(path, "saved_model.pb"), "wb") as f:
            f.write(b"half")
        raise _full_disk(os.path.join(path, "variables"))
    monkeypatch.setattr(tf.saved_model, "save", save)
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={base}",
                   "--export_name=tiny") == 2
    line = _error(capsys)
    assert line == (f"tfnmt export: error: cannot write {base}/tiny/2: no space left on device; "
                    "free some space or choose another --export_dir")
    assert os.listdir(base / "tiny") == ["1"]
    assert (base / "tiny" / "1" / "saved_model.pb").read_text() == "the version being served"


def test_full_disk_during_tflite_export_leaves_no_partial_version(trained_model, tmp_path, monkeypatch, capsys):
    from tfnmt.exporters import tflite
    monkeypatch.setattr(tflite, "convert", lambda translator, quantize, *_: b"flatbuffer")

    def copy(source, target):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(tflite.shutil, "copy", copy)
    base = tmp_path / "export"
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={base}",
                   "--export_name=tiny", "--format=tflite") == 2
    assert "cannot write" in _error(capsys)
    assert os.listdir(base / "tiny") == []


def test_full_disk_during_average_leaves_no_output_dir(trained_model, tmp_path, monkeypatch, capsys):
    def save(self, checkpoint_number=None, options=None):
        os.makedirs(os.path.join(self.directory, "ckpt-80_temp"))
        raise _full_disk(self.directory)
    monkeypatch.setattr(tf.train.CheckpointManager, "save", save)
    out = tmp_path / "avg"
    assert run_cli("average", f"--model_dir={trained_model}", f"--output_dir={out}") == 2
    assert _error(capsys) == (f"tfnmt average: error: cannot write {out}: no space left on "
                              "device; free some space or choose another --output_dir")
    assert os.listdir(tmp_path) == []


# --- training: a full disk, corrupt and killed saves ------------------------------------------

@pytest.mark.slow
def test_full_disk_during_a_checkpoint_save_stops_training_and_loses_nothing(
        corpus, tmp_path, monkeypatch, capsys):
    model_dir = str(tmp_path / "m")
    real_save, calls = tf.train.CheckpointManager.save, []

    def save(self, checkpoint_number=None, options=None):
        calls.append(checkpoint_number)
        if len(calls) < 2:
            return real_save(self, checkpoint_number=checkpoint_number, options=options)
        # What a save killed by ENOSPC leaves: part of its temporary shard.
        os.makedirs(os.path.join(self.directory, f"ckpt-{checkpoint_number}_temp"))
        with open(os.path.join(self.directory, f"ckpt-{checkpoint_number}_temp",
                               "part-00000-of-00001.data-00000-of-00001"), "wb") as f:
            f.write(b"half")
        raise _full_disk(os.path.join(self.directory, f"ckpt-{checkpoint_number}_temp"))
    monkeypatch.setattr(tf.train.CheckpointManager, "save", save)
    flags = tiny_train_flags(corpus, model_dir, steps=4)  # saves at 2 and 4
    assert run_cli("train", *flags) == 2
    line = _error(capsys)
    assert line == (f"tfnmt train: error: cannot write {model_dir}/ckpt/ckpt-4: no space left on "
                    f"device; free some space, then run the same command again: training resumes "
                    f"from {model_dir}/ckpt/ckpt-2")
    assert sorted(os.listdir(os.path.join(model_dir, "ckpt"))) == [
        "checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]
    assert [_restorable(p) for p in checkpoints.list_checkpoints(model_dir)] == [2]
    monkeypatch.setattr(tf.train.CheckpointManager, "save", real_save)
    assert run_cli("train", *flags) == 0
    assert [_restorable(p) for p in checkpoints.list_checkpoints(model_dir)] == [4, 2]


def test_full_disk_while_keeping_a_best_checkpoint_keeps_the_previous_best(tmp_path, monkeypatch):
    from tfnmt.errors import OutputError
    model_dir = str(tmp_path / "m")
    config = {"model": "transformer", "hparams": dict(encoder_layers=1, decoder_layers=1, d_model=8,
                                                      ffn_dim=8, num_heads=2),
              "source_vocab_size": 20, "target_vocab_size": 20}
    model = catalog.build(config)
    manager = checkpoints.Checkpoints(model_dir, checkpoints.trackables(model))
    assert manager.offer_best(1, {"loss": 3.0})

    def write_json(path, value):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(checkpoints.state, "write_json", write_json)  # after best/ckpt-2 is written
    with pytest.raises(OutputError, match=r"cannot write .*/best/ckpt-2: no space left on device"):
        manager.offer_best(2, {"loss": 2.0})
    assert checkpoints.read_best_index(model_dir) == [{"step": 1, "loss": 3.0, "path": "ckpt-1"}]
    assert sorted(os.listdir(os.path.join(model_dir, "best"))) == [
        "best.json", "ckpt-1.data-00000-of-00001", "ckpt-1.index"]
    checkpoints.restore_model(model, checkpoints.resolve(model_dir, "best"))


def test_no_checkpoint_file_is_deleted_while_the_state_file_lists_it(tmp_path, monkeypatch):
    # Whatever instant a kill strikes, the `checkpoint` state file names only whole checkpoints:
    # an old checkpoint leaves the state file before its files are deleted.
    from tensorflow.python.lib.io import file_io
    model_dir = str(tmp_path)
    delete = file_io._pywrap_file_io.DeleteFile
    deleted = []

    def checked_delete(path):
        name = os.fsdecode(path)
        listed = checkpoints.list_checkpoints(model_dir)
        assert not any(name.startswith(prefix + ".") for prefix in listed), (name, listed)
        deleted.append(name)
        return delete(path)

    monkeypatch.setattr(file_io._pywrap_file_io, "DeleteFile", checked_delete)
    saver = checkpoints.Checkpoints(model_dir, {"v": tf.Variable(0.0)}, keep_last=2)
    for step in range(1, 5):
        saver.save(step)
    assert [os.path.basename(p) for p in checkpoints.list_checkpoints(model_dir)] == \
        ["ckpt-4", "ckpt-3"]
    assert sorted({os.path.basename(n).split(".")[0] for n in deleted}) == ["ckpt-1", "ckpt-2"]
    assert sorted(os.listdir(os.path.join(model_dir, "ckpt"))) == sorted(
        ["checkpoint"] + [f"ckpt-{n}{ext}" for n in (3, 4)
                          for ext in (".index", ".data-00000-of-00001")])


def test_a_relative_model_dir_keeps_a_state_file_that_resumes(tmp_path, monkeypatch):
    # Every config names a relative --model_dir (runs/...); dropping the old checkpoints once
    # listed the others as runs/m/ckpt/../../../ckpt-N, and nothing resumed, scored or was deleted.
    monkeypatch.chdir(tmp_path)
    value = tf.Variable(0.0)
    saver = checkpoints.Checkpoints("runs/m", {"v": value}, keep_last=2)
    for step in range(1, 5):
        value.assign(float(step))
        saver.save(step)
    assert checkpoints.list_checkpoints("runs/m") == ["runs/m/ckpt/ckpt-4", "runs/m/ckpt/ckpt-3"]
    assert tf.train.latest_checkpoint("runs/m/ckpt") == "runs/m/ckpt/ckpt-4"
    with open("runs/m/ckpt/checkpoint") as f:
        assert [line.split('"')[1] for line in f if "_path" in line] == ["ckpt-4", "ckpt-3", "ckpt-4"]
    assert sorted(os.listdir("runs/m/ckpt")) == sorted(
        ["checkpoint"] + [f"ckpt-{n}{ext}" for n in (3, 4) for ext in (".index", ".data-00000-of-00001")])
    restored = tf.Variable(0.0)
    assert checkpoints.Checkpoints("runs/m", {"v": restored}).restore_latest() == "runs/m/ckpt/ckpt-4"
    assert restored.numpy() == 4.0


def test_a_state_file_written_wrong_by_older_code_is_read_and_repaired(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    value = tf.Variable(0.0)
    saver = checkpoints.Checkpoints("runs/m", {"v": value}, keep_last=5)
    for step in (1, 2):
        value.assign(float(step))
        saver.save(step)
    with open("runs/m/ckpt/checkpoint", "w") as f:  # as the old code left it
        f.write('model_checkpoint_path: "../../../ckpt-2"\n'
                'all_model_checkpoint_paths: "../../../ckpt-1"\n'
                'all_model_checkpoint_paths: "../../../ckpt-2"\n'
                f'all_model_checkpoint_timestamps: {time.time() - 2}\n'
                f'all_model_checkpoint_timestamps: {time.time() - 1}\n'
                f'last_preserved_timestamp: {time.time() - 3}\n')
    assert tf.train.latest_checkpoint("runs/m/ckpt") is None
    assert checkpoints.list_checkpoints("runs/m") == ["runs/m/ckpt/ckpt-2", "runs/m/ckpt/ckpt-1"]
    assert checkpoints.resolve("runs/m") == "runs/m/ckpt/ckpt-2"
    restored = tf.Variable(0.0)
    assert checkpoints.Checkpoints("runs/m", {"v": restored}).restore_latest() == "runs/m/ckpt/ckpt-2"
    assert restored.numpy() == 2.0
    assert tf.train.latest_checkpoint("runs/m/ckpt") == "runs/m/ckpt/ckpt-2"  # rewritten


@pytest.mark.slow
def test_killed_training_resumes_from_the_last_checkpoint_again_and_again(corpus, tmp_path, caplog):
    """kill -9 at random points of a run that saves every step, twice; every checkpoint
    left is restorable, and the run then resumes and completes with the right step count."""
    model_dir = str(tmp_path / "m")

    def flags(steps):
        kept = [f for f in tiny_train_flags(corpus, model_dir, steps=steps)
                if not f.startswith(("--save_every", "--validate_every"))]
        return kept + ["--save_every=1", "--validate_every=1000", "--keep_checkpoints=3"]
    steps = 120  # far more than the killed runs reach
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    state = os.path.join(model_dir, "ckpt", "checkpoint")
    rng = random.Random(0)
    saved = [0]
    for kill in range(2):
        process = subprocess.Popen([sys.executable, "-m", "tfnmt", "train", *flags(steps)], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 240
        while time.time() < deadline and process.poll() is None and \
                checkpoints.list_checkpoints(model_dir)[:1] in ([], [f"{model_dir}/ckpt/ckpt-{saved[-1]}"]):
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.5))  # somewhere in the saves that follow, one per step
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert os.path.exists(state), "no checkpoint was written before the kill"
        # The checkpoints the state file lists are whole, at the step their name says.
        listed = checkpoints.list_checkpoints(model_dir)
        assert [_restorable(p) for p in listed] == [int(p.rsplit("-", 1)[1]) for p in listed]
        saved.append(_restorable(listed[0]))
        assert saved[-1] > saved[-2] and saved[-1] < steps
    # A kill between writing ckpt-N's files and updating the state file leaves ckpt-N behind,
    # listed nowhere; training resumes from the state file's newest. Its budget ends 3 steps
    # later (the steps up to 120 would only repeat what the killed runs did).
    (tmp_path / "m" / "ckpt" / "ckpt-999_temp").mkdir()  # as a kill mid-save leaves it
    end = saved[-1] + 3
    assert run_cli("train", *flags(end)) == 0
    assert f"resuming from {model_dir}/ckpt/ckpt-{saved[-1]} at step {saved[-1]} " in caplog.text
    assert not glob.glob(os.path.join(model_dir, "ckpt", "*_temp*"))
    listed = checkpoints.list_checkpoints(model_dir)
    assert [_restorable(p) for p in listed] == [end, end - 1, end - 2]
    assert events(model_dir, "train/loss")[-1][0] == end
