import gzip
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


def _pairs(source, target, **kwargs):
    return [(s.decode("utf-8"), t.decode("utf-8")) for s, t in
            text_files.parallel_dataset(str(source), str(target), **kwargs).as_numpy_iterator()]


def _expected_pairs(source_bytes, target_bytes):
    """The pairs `decode_lines` (the reader of whole files) keeps: both sides valid UTF-8 and
    not blank."""
    sources, _ = text_files.decode_lines(source_bytes, "s")
    targets, _ = text_files.decode_lines(target_bytes, "t")
    return [(s, t) for s, t in zip(sources, targets)
            if s is not None and t is not None and s.strip() and t.strip()]


def test_parallel_drops_empty_and_invalid_pairs_and_logs_them(tmp_path, caplog):
    (tmp_path / "s").write_bytes(b"one\n\nthree\nfour \xc3\n")
    (tmp_path / "t").write_bytes("eins\nzwei\ndrei\nvier\n".encode())
    with caplog.at_level(logging.WARNING):
        pairs = _pairs(tmp_path / "s", tmp_path / "t")
    assert pairs == [("one", "eins"), ("three", "drei")]
    log = caplog.text
    assert "dropped 2 of 4 pairs" in log
    assert f"{tmp_path / 's'}:2: empty line" in log
    assert f"{tmp_path / 's'}:4: not valid UTF-8 (byte 5)" in log


@pytest.mark.parametrize("read_bytes", [1, 7, 1 << 20])
def test_a_streamed_corpus_keeps_exactly_the_pairs_of_the_whole_file_reader(tmp_path, monkeypatch,
                                                                           read_bytes):
    # Every kind of bad line, over block boundaries (reads of 1 or 7 bytes split lines and a
    # three-byte character): CRLF, a blank line of U+3000, no final newline, a gzipped side.
    monkeypatch.setattr(text_files, "_CHUNK_BYTES", read_bytes)
    source = (b"a red car\r\n\n\xe3\x80\x80\nbad \xff here\nsch\xc3\xb6n\r\n"
              b"  \t \nfine\nx\ny\nlast line")
    target = ("ein rotes Auto\nleer\nblank\nschlecht\nbeautiful\nweiss\ngut\n\n"
              "ypsilon\r\nletzte").encode()
    (tmp_path / "s").write_bytes(source)
    with gzip.open(tmp_path / "t.gz", "wb") as f:
        f.write(target)
    expected = _expected_pairs(source, target)
    assert expected == [("a red car", "ein rotes Auto"), ("schön", "beautiful"),
                        ("fine", "gut"), ("y", "ypsilon"), ("last line", "letzte")]
    assert _pairs(tmp_path / "s", tmp_path / "t.gz") == expected
    assert _pairs(tmp_path / "s", tmp_path / "t.gz", limit=2) == expected[:2]


def test_a_corpus_side_may_be_gzipped_and_is_found_as_such(tmp_path):
    (tmp_path / "train.en").write_text("a\nb\n")
    with gzip.open(tmp_path / "train.de.gz", "wb") as f:
        f.write(b"x\ny\n")
    assert text_files.corpus_file(str(tmp_path), "train.de") == str(tmp_path / "train.de.gz")
    assert text_files.corpus_file(str(tmp_path), "train.en") == str(tmp_path / "train.en")
    assert _pairs(tmp_path / "train.en", tmp_path / "train.de.gz") == [("a", "x"), ("b", "y")]


def test_crlf_line_endings_are_stripped(tmp_path):
    (tmp_path / "s").write_bytes(b"a\r\nb\r\n")
    assert text_files.read_lines(str(tmp_path / "s"))[0] == ["a", "b"]


def test_length_mismatch_and_missing_files_are_clear_errors(tmp_path):
    (tmp_path / "s").write_text("a\nb\n")
    (tmp_path / "t").write_text("a\n")
    with pytest.raises(DataError, match="differ in length: .*2 lines.* 1"):
        text_files.parallel_dataset(str(tmp_path / "s"), str(tmp_path / "t"))
    with pytest.raises(DataError, match="source file not found: .*missing"):
        text_files.parallel_dataset(str(tmp_path / "missing"), str(tmp_path / "t"))
    (tmp_path / "broken.gz").write_bytes(gzip.compress(b"a\nb\n")[:-6])
    with pytest.raises(DataError, match="cannot read source file .*broken.gz"):
        text_files.parallel_dataset(str(tmp_path / "broken.gz"), str(tmp_path / "t"))


def test_no_usable_pairs_is_an_error(tmp_path):
    (tmp_path / "s").write_text("\n\n")
    (tmp_path / "t").write_text("x\ny\n")
    with pytest.raises(DataError, match="no usable sentence pairs"):
        text_files.parallel_dataset(str(tmp_path / "s"), str(tmp_path / "t"))
