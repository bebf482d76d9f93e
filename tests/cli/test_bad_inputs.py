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
