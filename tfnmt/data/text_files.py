"""Reading plain text files with line-level validation; parallel training corpora as streams.

Bad lines never crash a run: a line that is not valid UTF-8 or is empty is reported with its file
and line number, and the pair is dropped (training data) or kept aligned (translation input).
"""

import gzip
import os
import re

from absl import logging

from tfnmt.errors import DataError

# Read at a time when a corpus is scanned: memory stays flat whatever the corpus size.
_CHUNK_BYTES = 1 << 22


def decode_lines(raw, name, replace_invalid=False):
    """Splits bytes into lines; returns (lines, problems).

    lines: one str per line, without the newline. A line that is not valid UTF-8 is decoded
      with U+FFFD replacements when `replace_invalid`, else returned as None.
    problems: "name:line: message" strings, one per invalid line.
    """
    raw_lines = raw.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    lines, problems = [], []
    for number, raw_line in enumerate(raw_lines, start=1):
        raw_line = raw_line.rstrip(b"\r")
        try:
            lines.append(raw_line.decode("utf-8"))
        except UnicodeDecodeError as e:
            problems.append(f"{name}:{number}: not valid UTF-8 (byte {e.start})")
            lines.append(raw_line.decode("utf-8", errors="replace") if replace_invalid else None)
    return lines, problems


def read_lines(path, *, role="input", replace_invalid=False):
    """`decode_lines` of a file, with a clear error if it cannot be read."""
    if not os.path.isfile(path):
        raise DataError(f"{role} file not found: {path}")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise DataError(f"cannot read {role} file {path}: {e.strerror}") from None
    return decode_lines(raw, path, replace_invalid)


def corpus_file(directory, name):
    """DIR/NAME, or DIR/NAME.gz when only the compressed file is there (either is read as a
    stream)."""
    path = os.path.join(directory, name)
    if not os.path.exists(path) and os.path.isfile(path + ".gz"):
        return path + ".gz"
    return path


def _open_binary(path, role):
    if not os.path.isfile(path):
        raise DataError(f"{role} file not found: {path}")
    try:
        return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
    except OSError as e:
        raise DataError(f"cannot read {role} file {path}: {e.strerror}") from None


def _blocks(path, role):
    """Yields `path`'s lines in blocks of whole lines (bytes, lines joined by "\n", no final
    "\n"), reading it in chunks: the file is never held whole."""
    with _open_binary(path, role) as f:
        rest = b""
        while True:
            try:
                chunk = f.read(_CHUNK_BYTES)
            except (OSError, EOFError) as e:  # a truncated or corrupt .gz
                raise DataError(f"cannot read {role} file {path}: {e}") from None
            if not chunk:
                break
            data = rest + chunk
            end = data.rfind(b"\n")
            if end < 0:
                rest = data
                continue
            rest = data[end + 1:]
            yield data[:end]
        if rest:
            yield rest


# A line of white space only, "\n" excepted (re's \s is str.isspace, as str.strip uses).
_BLANK_LINE = re.compile(r"(?m)^[^\S\n]*$")


def _scan(path, role):
    """One streaming pass over a side: (line count, {line: "not valid UTF-8 (byte N)"}, {the
    valid lines that are empty or white space only}), as `decode_lines` would judge each."""
    count, invalid, empty = 0, {}, set()
    for block in _blocks(path, role):
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError:
            # Rare: judge this block's lines one by one.
            for number, raw in enumerate(block.split(b"\n"), start=count + 1):
                try:
                    if not raw.decode("utf-8").strip():
                        empty.add(number)
                except UnicodeDecodeError as e:
                    invalid[number] = f"not valid UTF-8 (byte {e.start})"
        else:
            number, at = count + 1, 0
            for match in _BLANK_LINE.finditer(text):
                number += text.count("\n", at, match.start())
                at = match.start()
                empty.add(number)
        count += block.count(b"\n") + 1
    return count, invalid, empty


def _lines_dataset(path):
    import tensorflow as tf
    return tf.data.TextLineDataset(path, compression_type="GZIP" if path.endswith(".gz") else "")


def parallel_dataset(source_path, target_path, limit=0, max_reports=10):
    """A dataset of the (source, target) line pairs of two aligned files (plain or .gz), in
    file order, bad pairs dropped, at most the first `limit` kept (0: all).

    Both files are checked first in one streaming pass each (memory: the bad lines' numbers):
    different line counts are an error; a pair with a line that is not valid UTF-8 or is empty
    (white space only) is dropped and reported as FILE:LINE through absl logging, at most
    `max_reports` lines of detail plus a count. The pairs are then read through tf.data's line
    reader, which drops every carriage return ("\r") of a line, not only CRLF endings.
    """
    source_count, source_invalid, source_empty = _scan(source_path, "source")
    target_count, target_invalid, target_empty = _scan(target_path, "target")
    if source_count != target_count:
        raise DataError(
            f"parallel files differ in length: {source_path} has {source_count} lines, "
            f"{target_path} has {target_count}")
    problems = ([f"{source_path}:{n}: {why}" for n, why in source_invalid.items()]
                + [f"{target_path}:{n}: {why}" for n, why in target_invalid.items()])
    invalid = source_invalid.keys() | target_invalid.keys()
    empty = sorted((source_empty | target_empty) - invalid)
    problems += [f"{source_path if n in source_empty else target_path}:{n}: empty line"
                 for n in empty]
    dropped = sorted(invalid.union(empty))
    if dropped:
        logging.warning("dropped %d of %d pairs from %s / %s:", len(dropped), source_count,
                        source_path, target_path)
        for problem in problems[:max_reports]:
            logging.warning("  %s", problem)
        if len(problems) > max_reports:
            logging.warning("  ... and %d more", len(problems) - max_reports)
    if len(dropped) == source_count:
        raise DataError(f"no usable sentence pairs in {source_path} / {target_path}")
    import tensorflow as tf
    pairs = tf.data.Dataset.zip((_lines_dataset(source_path), _lines_dataset(target_path)))
    if dropped:
        # Sorted line numbers, looked up by binary search: a stateless test, so the pipeline's
        # iterator can still be saved in a checkpoint.
        dropped_lines = tf.constant(dropped, tf.int64)

        def kept(number, pair):
            at = tf.searchsorted(dropped_lines, [number])[0]
            return tf.logical_or(at >= len(dropped), tf.gather(dropped_lines, tf.minimum(
                at, len(dropped) - 1)) != number)
        pairs = pairs.enumerate(start=1).filter(kept).map(lambda number, pair: pair)
    return pairs.take(limit) if limit else pairs
