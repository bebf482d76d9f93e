"""Bad input to `tfnmt translate`, the same battery for every backend: a checkpoint, a
SavedModel, a TFLite flatbuffer and a served model. Nothing crashes, every input line gets
exactly one output line in its place, and each odd line is named FILE:LINE on stderr."""

import os

import pytest

from conftest import REPO, run_cli
from tfnmt.serving import server as server_lib

# Line 2 empty, 3 blank, 4 not UTF-8, 5 longer than the server's --max_sentence_chars=200.
LINES = [b"the red dog sees a bird", b"", b"   ", b"a bad \xff byte cat", b"the big dog " * 25,
         b"the old man runs"]


@pytest.fixture(scope="module")
def backends(trained_model, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("exports"))
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={base}",
                   "--beam_size=1", "--export_name=sm") == 0
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={base}",
                   "--beam_size=1", "--export_name=lite", "--format=tflite") == 0
    process, url = server_lib.spawn(
        [f"--export_dir={base}", "--rest_api_port=0", "--max_sentence_chars=200"],
        env=dict(os.environ, PYTHONPATH=REPO))
    yield {"checkpoint": [f"--model_dir={trained_model}", "--beam_size=1"],
           "saved_model": [f"--saved_model={base}/sm/1"],
           "tflite": [f"--saved_model={base}/lite/1"],
           "server": [f"--server={url}", "--served_model=sm"]}
    server_lib.stop(process)


BACKENDS = ["checkpoint", "saved_model", "tflite", "server"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_line_gets_one_output_line_and_odd_lines_are_named(backends, backend, tmp_path, caplog):
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_bytes(b"\n".join(LINES) + b"\n")
    assert run_cli("translate", *backends[backend], f"--input={source}", f"--output={output}") == 0
    lines = output.read_text(encoding="utf-8").split("\n")
    assert len(lines) == len(LINES) + 1 and lines[-1] == ""
    assert [bool(line) for line in lines[:-1]] == [True, False, False, True, True, True], lines
    for number, what in ((2, "empty line"), (3, "empty line"), (4, "not valid UTF-8")):
        assert f"{source}:{number}: {what}" in caplog.text, (number, caplog.text)
    if backend == "server":
        assert f"{source}:5: 300 characters; only the first 200 are translated" in caplog.text


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("problem", ["missing", "directory"])
def test_an_unreadable_input_is_one_line_and_writes_nothing(backends, backend, problem, tmp_path,
                                                             capsys, monkeypatch):
    from tfnmt.cli import common

    def never(*_):  # a model takes seconds to load; a missing input is refused before
        raise AssertionError("the model was opened before the input was read")
    monkeypatch.setattr(common, "open_translator", never)
    source = tmp_path / "missing.txt" if problem == "missing" else tmp_path
    output = tmp_path / "out.txt"
    assert run_cli("translate", *backends[backend], f"--input={source}", f"--output={output}") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tfnmt translate: error: "), err
    assert str(source) in err[0]
    assert not output.exists() or output.read_text() == ""
