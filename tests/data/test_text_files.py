import logging

import pytest

from tfnmt.data import text_files
from tfnmt.errors import DataError


def test_invalid_utf8_is_reported_with_file_and_line(tmp_path):
    path = tmp_path / "a.en"
    path.write_bytes(b"good line\nbad \xff\xfe line\nok\n")
    lines, problems = text_files.read_lines(str(path))
    assert lines == ["good line", None, "ok"]
    assert problems == [f"{path}:2: not valid UTF-8 (byte 4)"]
    lines, _ = text_files.read_lines(str(path), replace_invalid=True)
    assert lines[1] == "bad \ufffd\ufffd line"


def test_parallel_drops_empty_and_invalid_pairs_and_logs_them(tmp_path, caplog):
    (tmp_path / "s").write_bytes(b"one\n\nthree\nfour \xc3\n")
    (tmp_path / "t").write_bytes("eins\nzwei\ndrei\nvier\n".encode())
    with caplog.at_level(logging.WARNING):
        sources, targets = text_files.read_parallel(str(tmp_path / "s"), str(tmp_path / "t"))
    assert sources == ["one", "three"] and targets == ["eins", "drei"]
    log = caplog.text
    assert f"{tmp_path / 's'}:2: empty line" in log
    assert f"{tmp_path / 's'}:4: not valid UTF-8" in log


def test_crlf_line_endings_are_stripped(tmp_path):
    (tmp_path / "s").write_bytes(b"a\r\nb\r\n")
    assert text_files.read_lines(str(tmp_path / "s"))[0] == ["a", "b"]


def test_length_mismatch_and_missing_files_are_clear_errors(tmp_path):
    (tmp_path / "s").write_text("a\nb\n")
    (tmp_path / "t").write_text("a\n")
    with pytest.raises(DataError, match="differ in length: .*2 lines.* 1"):
        text_files.read_parallel(str(tmp_path / "s"), str(tmp_path / "t"))
    with pytest.raises(DataError, match="source file not found: .*missing"):
        text_files.read_parallel(str(tmp_path / "missing"), str(tmp_path / "t"))


def test_no_usable_pairs_is_an_error(tmp_path):
    (tmp_path / "s").write_text("\n\n")
    (tmp_path / "t").write_text("x\ny\n")
    with pytest.raises(DataError, match="no usable sentence pairs"):
        text_files.read_parallel(str(tmp_path / "s"), str(tmp_path / "t"))
