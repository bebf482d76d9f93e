"""Reading plain parallel text files with line-level validation.

Bad lines never crash a run: a line that is not valid UTF-8 or is empty is reported with its file
and line number, and the pair is dropped (training data) or kept aligned (translation input).
"""

import os

from absl import logging

from tfnmt.errors import DataError


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


def read_parallel(source_path, target_path, max_reports=10):
    """Reads two aligned files; returns (sources, targets) with bad pairs dropped.

    Pairs with an empty side or invalid UTF-8 are dropped and reported (file and line) through
    absl logging, at most `max_reports` lines of detail plus a count.
    """
    sources, source_problems = read_lines(source_path, role="source")
    targets, target_problems = read_lines(target_path, role="target")
    if len(sources) != len(targets):
        raise DataError(
            f"parallel files differ in length: {source_path} has {len(sources)} lines, "
            f"{target_path} has {len(targets)}")
    problems = source_problems + target_problems
    kept_sources, kept_targets = [], []
    for number, (s, t) in enumerate(zip(sources, targets), start=1):
        if s is None or t is None:
            continue
        if not s.strip() or not t.strip():
            side = source_path if not s.strip() else target_path
            problems.append(f"{side}:{number}: empty line")
            continue
        kept_sources.append(s)
        kept_targets.append(t)
    if problems:
        logging.warning("dropped %d of %d pairs from %s / %s:", len(sources) - len(kept_sources),
                        len(sources), source_path, target_path)
        for p in problems[:max_reports]:
            logging.warning("  %s", p)
        if len(problems) > max_reports:
            logging.warning("  ... and %d more", len(problems) - max_reports)
    if not kept_sources:
        raise DataError(f"no usable sentence pairs in {source_path} / {target_path}")
    return kept_sources, kept_targets
