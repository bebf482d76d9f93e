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

# Bad lines, or missing shards, named one by one in a report at most; then a count of the rest.
MAX_REPORTS = 10


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


def require_file(path, role="input"):
    """A DataError unless `path` is a file (before slow work that would need it)."""
    if not os.path.isfile(path):
        raise DataError(f"{role} file not found: {path}")


def read_lines(path, *, role="input", replace_invalid=False):
    """`decode_lines` of a file, with a clear error if it cannot be read."""
    require_file(path, role)
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


def _shards(directory, name):
    """{suffix: path} of the files DIR/NAME-SUFFIX, each plain or .gz (as `corpus_file`
    chooses)."""
    if not os.path.isdir(directory):
        return {}
    start, shards = name + "-", {}
    for entry in os.listdir(directory):
        if entry.startswith(start) and os.path.isfile(os.path.join(directory, entry)):
            suffix = entry[len(start):]
            suffix = suffix[:-len(".gz")] if suffix.endswith(".gz") else suffix
            if suffix:
                shards[suffix] = corpus_file(directory, start + suffix)
    return shards


def corpus_shards(directory, source_name, target_name):
    """The aligned file pairs of a corpus in DIR, in reading order: [(DIR/SOURCE_NAME,
    DIR/TARGET_NAME)] (each plain or .gz), or, where both sides are split into shards
    DIR/NAME-SUFFIX (e.g. train.en-00000-of-00004, each plain or .gz), a pair per suffix,
    sorted by suffix. A side that is both one file and shards, or shards whose suffixes
    differ between the sides, is a DataError naming the files."""
    names = (source_name, target_name)
    shards = [_shards(directory, name) for name in names]
    wholes = [corpus_file(directory, name) for name in names]
    for whole, found in zip(wholes, shards):
        if found and os.path.exists(whole):
            raise DataError(f"{whole} and shards of it ({whole.removesuffix('.gz')}-*) are both "
                            "there: which is the corpus is ambiguous; remove one or the other")
    if not any(shards):
        return [tuple(wholes)]
    missing = [os.path.join(directory, f"{name}-{suffix}")
               for name, found, other in zip(names, shards, reversed(shards))
               for suffix in sorted(other.keys() - found.keys())]
    if missing:
        named = ", ".join(missing[:MAX_REPORTS]) + (
            f" and {len(missing) - MAX_REPORTS} more" if len(missing) > MAX_REPORTS else "")
        one_file = "".join(f"; {whole} is one file, not shards"
                           for whole, found in zip(wholes, shards)
                           if not found and os.path.exists(whole))
        raise DataError(f"the shards of {source_name} and {target_name} in {directory} differ "
                        f"in suffixes: missing {named} (plain or .gz){one_file}")
    return [(shards[0][suffix], shards[1][suffix]) for suffix in sorted(shards[0])]


def _open_binary(path, role):
    require_file(path, role)
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


def _checked_pair(source_path, target_path):
    """One streaming pass over each side of an aligned file pair: (line count, the sorted
    numbers of the lines to drop, "FILE:LINE: why" for each); a DataError if the counts
    differ."""
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
    return source_count, sorted(invalid.union(empty)), problems


def _kept_pairs(source_path, target_path, dropped):
    import tensorflow as tf
    pairs = tf.data.Dataset.zip((_lines_dataset(source_path), _lines_dataset(target_path)))
    if not dropped:
        return pairs
    # Sorted line numbers, looked up by binary search: a stateless test, so the pipeline's
    # iterator can still be saved in a checkpoint.
    dropped_lines = tf.constant(dropped, tf.int64)

    def kept(number, pair):
        at = tf.searchsorted(dropped_lines, [number])[0]
        return tf.logical_or(at >= len(dropped), tf.gather(dropped_lines, tf.minimum(
            at, len(dropped) - 1)) != number)
    return pairs.enumerate(start=1).filter(kept).map(lambda number, pair: pair)


def _files_name(paths):
    """One path, or the shards' common start and a `*`."""
    return paths[0] if len(paths) == 1 else f"{os.path.commonprefix(paths)}* ({len(paths)} shards)"


def parallel_dataset(source_path, target_path, limit=0, max_reports=MAX_REPORTS):
    """A dataset of the (source, target) line pairs of two aligned files (plain or .gz), in
    file order, bad pairs dropped, at most the first `limit` kept (0: all).

    Both files are checked first in one streaming pass each (memory: the bad lines' numbers):
    different line counts are an error; a pair with a line that is not valid UTF-8 or is empty
    (white space only) is dropped and reported as FILE:LINE through absl logging, at most
    `max_reports` lines of detail plus a count. The pairs are then read through tf.data's line
    reader, which drops every carriage return ("\r") of a line, not only CRLF endings.
    """
    return sharded_parallel_dataset([(source_path, target_path)], limit, max_reports)


def sharded_parallel_dataset(file_pairs, limit=0, max_reports=MAX_REPORTS):
    """`parallel_dataset` of several aligned file pairs (the shards of a corpus, as
    `corpus_shards` gives them): each pair checked as one, the report capped over all of them,
    their pairs taken in turn (round robin: the first pair of each shard, then the second, ...;
    a shard that runs out is left out of the turns)."""
    import tensorflow as tf
    total, kept, datasets, dropped_count, problems, reported = 0, [], [], 0, 0, []
    for source_path, target_path in file_pairs:
        count, dropped, shard_problems = _checked_pair(source_path, target_path)
        total += count
        kept.append(count - len(dropped))
        dropped_count += len(dropped)
        problems += len(shard_problems)
        reported += shard_problems[:max_reports - len(reported)]
        datasets.append(_kept_pairs(source_path, target_path, dropped))
    source_name = _files_name([source for source, _ in file_pairs])
    target_name = _files_name([target for _, target in file_pairs])
    if dropped_count:
        logging.warning("dropped %d of %d pairs from %s / %s:", dropped_count, total,
                        source_name, target_name)
        for problem in reported:
            logging.warning("  %s", problem)
        if problems > len(reported):
            logging.warning("  ... and %d more", problems - len(reported))
    if dropped_count == total:
        raise DataError(f"no usable sentence pairs in {source_name} / {target_name}")
    pairs = datasets[0] if len(datasets) == 1 else tf.data.Dataset.choose_from_datasets(
        datasets, _turns(kept), stop_on_empty_dataset=False)
    return pairs.take(limit) if limit else pairs


def _turns(kept):
    """The shard to read next, pair by pair: 0, 1, ..., 0, 1, ... while each has pairs left
    (`kept`: each shard's count), then no more."""
    import tensorflow as tf
    # Known counts, not "until every shard runs out": over an endless list of turns, an
    # iterator restored from a checkpoint mid-way sometimes spun forever once its shards ran
    # out (TF 2.21). A finite list ends by itself, and no shard is read past its last kept
    # pair. Made turn by turn, not held whole: it is as long as the corpus.
    counts = tf.constant(kept, tf.int64)
    shards = tf.range(len(kept), dtype=tf.int64)
    return tf.data.Dataset.range(max(kept)).flat_map(
        lambda turn: tf.data.Dataset.from_tensor_slices(tf.boolean_mask(shards, counts > turn)))
