import gzip
import logging
import threading

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


def _write_shards(directory, shards):
    """{suffix: (source bytes, target bytes, gzipped sides)} as DIR/train.{en,de}-SUFFIX."""
    for suffix, (source, target, gzipped) in shards.items():
        for lang, data in (("en", source), ("de", target)):
            path = directory / f"train.{lang}-{suffix}"
            if lang in gzipped:
                with gzip.open(f"{path}.gz", "wb") as f:
                    f.write(data)
            else:
                path.write_bytes(data)


# Three shards of unequal lengths, gzipped sides in two, a bad line in two (an empty source
# line in the second, a source line not UTF-8 in the third).
_SHARDS = {"00000-of-00003": (b"a1\na2\na3\n", b"A1\nA2\nA3\n", ()),
           "00001-of-00003": (b"b1\n\nb3\nb4\n", b"B1\nB2\nB3\nB4\n", ("en",)),
           "00002-of-00003": (b"c1\nc\xff2\n", b"C1\nC2\n", ("de",))}
# In turn, a bad pair's turn taken by its shard's next pair.
_INTERLEAVED = [("a1", "A1"), ("b1", "B1"), ("c1", "C1"), ("a2", "A2"), ("b3", "B3"),
                ("a3", "A3"), ("b4", "B4")]


def _shard_pairs(directory, **kwargs):
    return [(s.decode(), t.decode()) for s, t in text_files.sharded_parallel_dataset(
        text_files.corpus_shards(str(directory), "train.en", "train.de"),
        **kwargs).as_numpy_iterator()]


@pytest.mark.slow
def test_shards_are_read_in_turn_with_their_bad_lines_dropped_and_reported_once(tmp_path, caplog):
    from tfnmt.data import sources
    _write_shards(tmp_path, _SHARDS)
    with caplog.at_level(logging.WARNING):
        assert _shard_pairs(tmp_path, max_reports=1) == _INTERLEAVED
    # One report over all shards, capped as for one file pair.
    assert "dropped 2 of 9 pairs" in caplog.text
    assert f"{tmp_path / 'train.en-00001-of-00003.gz'}:2: empty line" in caplog.text
    assert f"{tmp_path / 'train.en-00002-of-00003'}:2: not valid UTF-8" not in caplog.text
    assert "... and 1 more" in caplog.text
    spec = sources.DataSpec(f"text:{tmp_path}", "en", "de")
    assert [(s.decode(), t.decode()) for s, t in sources.pairs(spec, "train", limit=4)
            .as_numpy_iterator()] == _INTERLEAVED[:4]


def test_shards_must_pair_up_and_not_double_a_whole_file(tmp_path):
    _write_shards(tmp_path, _SHARDS)
    (tmp_path / "train.de-00001-of-00003").unlink()
    with pytest.raises(DataError, match=r"differ in suffixes: missing \S*train.de-00001-of-00003 "):
        text_files.corpus_shards(str(tmp_path), "train.en", "train.de")
    (tmp_path / "train.de-00001-of-00003").write_bytes(b"B1\nB2\nB3\n")
    with pytest.raises(DataError, match=r"train.en-00001-of-00003.gz has 4 lines, "
                                        r"\S*train.de-00001-of-00003 has 3"):
        _shard_pairs(tmp_path)
    (tmp_path / "train.en.gz").write_bytes(gzip.compress(b"x\n"))
    with pytest.raises(DataError, match=r"train.en.gz and shards of it \(\S*train.en-\*\) .*"
                                        "ambiguous"):
        text_files.corpus_shards(str(tmp_path), "train.en", "train.de")
    for path in tmp_path.glob("train.en-*"):
        path.unlink()
    with pytest.raises(DataError, match="missing .*train.en-00000-of-00003, .*train.en.gz is "
                                        "one file, not shards"):
        text_files.corpus_shards(str(tmp_path), "train.en", "train.de")


def _to_the_end(iterator, seconds=60):
    """The pairs left in `iterator`; a failure, not a hung suite, if it does not end."""
    rest = []
    reader = threading.Thread(target=lambda: rest.extend(
        (s.numpy().decode(), t.numpy().decode()) for s, t in iterator), daemon=True)
    reader.start()
    reader.join(seconds)
    assert not reader.is_alive(), f"no end after {rest}"
    return rest


@pytest.mark.slow
def test_a_restored_iterator_over_shards_yields_exactly_the_rest(tmp_path):
    import tensorflow as tf
    _write_shards(tmp_path, _SHARDS)

    def dataset():
        return text_files.sharded_parallel_dataset(
            text_files.corpus_shards(str(tmp_path), "train.en", "train.de"))
    # Saved with a shard's bad line and another's last (bad) line next, then with shards run
    # out: each restored iterator ends where the corpus does.
    for taken in (2, 4, 6):
        iterator = iter(dataset())
        first = [(s.numpy().decode(), t.numpy().decode())
                 for s, t in (next(iterator) for _ in range(taken))]
        path = tf.train.Checkpoint(data=iterator).save(str(tmp_path / f"ckpt{taken}" / "it"))
        restored = iter(dataset())
        tf.train.Checkpoint(data=restored).restore(path).assert_consumed()
        assert first == _INTERLEAVED[:taken]
        assert _to_the_end(restored) == _INTERLEAVED[taken:], taken
