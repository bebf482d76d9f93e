"""`tfnmt translate --target_prefix=FILE` and `--interactive` (cli/translate.py): prefixes as the
Python API continues them, the one-line refusals, and answers line by line through a pipe, each
line named by its own number. (A server without the `prefix` signature: tests/test_api.py.)"""

import io
import os
import queue
import subprocess
import sys
import threading

import pytest

from conftest import REPO, run_cli
from tfnmt import Translator

SOURCES = ["the red dog sees a bird", "a cat", "", "the old man runs"]
PREFIXES = ["Vogel", "", "Haus", "Mann "]


def _error(capsys):
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    base = tmp_path_factory.mktemp("prefix_files")
    source, prefixes = base / "in.txt", base / "prefixes.txt"
    source.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    prefixes.write_text("\n".join(PREFIXES) + "\n", encoding="utf-8")
    return str(source), str(prefixes)


@pytest.fixture(scope="module")
def greedy(trained_model):
    """The Python API's greedy translations (what --beam_size=1 must write) of the lines the
    tests below give the command: one Translator, loaded and traced once for them all."""
    translator, known = Translator.from_model_dir(trained_model, beam_size=1), {}

    def translate(sentences):
        if tuple(sentences) not in known:
            known[tuple(sentences)] = [t.text for t in translator.translate(sentences)]
        return known[tuple(sentences)]
    return translate


@pytest.mark.slow
def test_each_line_continues_its_prefix_as_the_api_does(trained_model, files, tmp_path):
    source, prefixes = files
    output = tmp_path / "out.txt"
    assert run_cli("translate", f"--model_dir={trained_model}", "--beam_size=2",
                   f"--input={source}", f"--target_prefix={prefixes}", f"--output={output}") == 0
    expected = Translator.from_model_dir(trained_model, beam_size=2).translate(
        SOURCES, target_prefix=PREFIXES)
    lines = output.read_text(encoding="utf-8").splitlines()
    assert lines == [t.text for t in expected]
    assert all(line.startswith(prefix) for line, prefix in zip(lines, PREFIXES))


def test_what_a_prefix_cannot_go_with_is_one_line(trained_model, files, tmp_path, capsys):
    """(A CTC model's refusal: tests/decoding/test_prefix.py.)"""
    source, prefixes = files
    short = tmp_path / "short.txt"
    short.write_text("Vogel\n", encoding="utf-8")
    model = [f"--model_dir={trained_model}", f"--input={source}"]
    assert run_cli("translate", *model, f"--target_prefix={short}") == 2
    assert _error(capsys) == (f"tfnmt translate: error: --target_prefix={short}: 1 lines for the "
                              f"4 lines of {source}; give one prefix per input line (an empty "
                              "line for none)")
    assert run_cli("translate", *model, f"--target_prefix={prefixes}", "--n_best=2") == 2
    assert _error(capsys) == ("tfnmt translate: error: --target_prefix: of the best translation "
                              "only; not with --n_best or --alignments")


@pytest.mark.slow
def test_interactive_answers_each_line_before_the_next_is_written(trained_model, greedy):
    """Through two pipes, as a program converses with it: the second line is written only once
    the first one's answer has been read."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tfnmt", "translate", f"--model_dir={trained_model}",
         "--beam_size=1", "--interactive"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=REPO))
    answers = queue.Queue()
    reader = threading.Thread(target=lambda: [answers.put(line) for line in process.stdout],
                              daemon=True)
    reader.start()
    try:
        expected = greedy(SOURCES[:2])
        for sentence, translation in zip(SOURCES[:2], expected):
            process.stdin.write(sentence.encode() + b"\n")
            process.stdin.flush()
            assert answers.get(timeout=120).decode().rstrip("\n") == translation
        process.stdin.close()
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


class _Terminal(io.TextIOWrapper):
    def isatty(self):
        return True


@pytest.mark.slow
@pytest.mark.parametrize("flags,answering", [([], True), (["--nointeractive"], False)])
def test_a_terminal_on_stdin_answers_line_by_line_unless_told_not_to(
        trained_model, greedy, monkeypatch, capsys, flags, answering):
    from tfnmt.cli import translate
    calls = []
    answer = translate._answer
    monkeypatch.setattr(translate, "_answer", lambda *a: calls.append(a) or answer(*a))
    monkeypatch.setattr(sys, "stdin", _Terminal(io.BytesIO(b"a cat\nbig house\n")))
    assert run_cli("translate", f"--model_dir={trained_model}", "--beam_size=1", *flags) == 0
    assert capsys.readouterr().out == "".join(f"{t}\n" for t in greedy(["a cat", "big house"]))
    assert bool(calls) == answering


def test_interactive_names_an_over_long_line_by_its_line_of_stdin(trained_model, monkeypatch,
                                                                 caplog):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(
        b"a cat\nthe red dog sees a bird\nbig house\nthe old man runs\n")))
    assert run_cli("translate", f"--model_dir={trained_model}", "--beam_size=1",
                   "--max_input_length=3", "--interactive") == 0
    assert [r.getMessage() for r in caplog.records if "max_input_length" in r.getMessage()] == [
        "<stdin>:2: 6 subwords; only the first 3 are translated (--max_input_length)",
        "<stdin>:4: 4 subwords; only the first 3 are translated (--max_input_length)"]
