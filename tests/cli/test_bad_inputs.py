"""Paths and files a careless user gives end in one line `tfnmt VERB: error: ...`, exit 2 (or
130 for Ctrl-C), never a traceback: a model directory that cannot be written, a damaged
SavedModel, Ctrl-C while translate loads, and no TensorFlow C++ line leaks to stderr."""

import os

import pytest

from conftest import TINY_MODEL_FLAGS, run_cli


def _error(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err), err
    return err[-1]


@pytest.mark.parametrize("verb", ["train", "vocab"])
@pytest.mark.parametrize("case", ["a file", "under a file", "not writable", "parent not writable"])
def test_a_model_dir_that_cannot_be_written_is_one_line(verb, case, tmp_path, monkeypatch, capsys):
    # Before: FileExistsError, NotADirectoryError or PermissionError (config.json.tmp, spm.model.tmp)
    # tracebacks, after the vocabulary's data was read.
    (tmp_path / "a-file").write_text("")
    locked = tmp_path / "locked"
    locked.mkdir()
    model_dir, problem = {
        "a file": (tmp_path / "a-file", f"{tmp_path}/a-file is a file, not a directory"),
        "under a file": (tmp_path / "a-file" / "m", f"{tmp_path}/a-file is a file, not a directory"),
        "not writable": (locked, f"{locked} is not writable"),
        "parent not writable": (locked / "m", f"{locked} is not writable"),
    }[case]
    # Root, who runs the tests, writes into any directory but a read-only mount's.
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path) == str(locked)
                        else real_access(path, mode))
    assert run_cli(verb, f"--model_dir={model_dir}", "--data=text:/nonexistent",
                   *(TINY_MODEL_FLAGS if verb == "train" else [])) == 2
    assert _error(capsys) == (f"tfnmt {verb}: error: --model_dir={model_dir}: {problem}; choose "
                              "another --model_dir")


@pytest.fixture(scope="module")
def small_saved_model(tmp_path_factory):
    """A SavedModel of a trivial module: its files are damaged before anything reads them."""
    import tensorflow as tf
    module = tf.Module()
    module.v = tf.Variable([1.0] * 64)
    module.f = tf.function(lambda text: {"translations": text},
                           input_signature=[tf.TensorSpec([None], tf.string)])
    path = str(tmp_path_factory.mktemp("export") / "1")
    tf.saved_model.save(module, path, signatures={"serving_default": module.f})
    return path


@pytest.mark.parametrize("damage, reason", [
    ("empty", "saved_model.pb is empty"),
    ("truncated", "saved_model.pb cannot be parsed: "),
    ("variables cut short", ""),
])
def test_a_damaged_saved_model_is_one_line(damage, reason, small_saved_model, tmp_path, capsys):
    import shutil
    path = str(tmp_path / "1")
    shutil.copytree(small_saved_model, path)
    if damage == "variables cut short":
        target = os.path.join(path, "variables", "variables.data-00000-of-00001")
    else:
        target = os.path.join(path, "saved_model.pb")
    with open(target, "r+b") as f:
        f.truncate(0 if damage == "empty" else os.path.getsize(target) // 2)
    (tmp_path / "in.txt").write_text("the dog\n")
    # Before: ValueError "... 0 MetaGraphs", OSError "Cannot parse file" tracebacks.
    assert run_cli("translate", f"--saved_model={path}", f"--input={tmp_path / 'in.txt'}") == 2
    line = _error(capsys)
    assert line.startswith(f"tfnmt translate: error: cannot load the SavedModel in {path}: {reason}")
    assert line.endswith("; export the model again")


_HOLD_IMPORT = '''
import builtins, os, time
_import = builtins.__import__

def _held(name, *args, **kwargs):
    if name == "tensorflow" and not os.path.exists(os.environ["HELD_MARK"]):
        open(os.environ["HELD_MARK"], "w").close()
        time.sleep(60)
    return _import(name, *args, **kwargs)
builtins.__import__ = _held
'''


def test_ctrl_c_while_translate_loads_is_one_line(tmp_path):
    import signal
    import subprocess
    import sys
    import time
    # The command is held where it first imports TensorFlow (a sitecustomize of this test), so
    # that Ctrl-C lands while it loads, as in the first seconds of a real run.
    (tmp_path / "sitecustomize.py").write_text(_HOLD_IMPORT)
    mark = tmp_path / "importing"
    env = dict(os.environ, HELD_MARK=str(mark), TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    process = subprocess.Popen(
        [sys.executable, "-m", "tfnmt", "translate", "--model_dir=/nonexistent"], env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        # A suite started in the background (`cmd &`) ignores SIGINT, and so would the child.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 60
    while not mark.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    stderr = process.communicate(timeout=60)[1]
    # Before: a KeyboardInterrupt traceback from within TensorFlow's import, status -2.
    assert process.returncode == 130 and stderr.splitlines() == ["tfnmt translate: interrupted"], stderr
