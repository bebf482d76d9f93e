"""tfnmt translate: translate a file or stdin, line by line, to stdout or a file, with a
checkpoint (--model_dir), an export (--saved_model) or a served model (--server, --model).

Lines keep their order and count (with --n_best=N > 1: N lines per input line, `INDEX |||
TRANSLATION ||| SCORE`, INDEX counted from 0, best first): an empty input line gives an empty
output line; a line with
invalid UTF-8 is translated with U+FFFD in place of the bad bytes; a line longer than
--max_input_length subwords is cut to it. Each case is reported on stderr with its line number.

The output path is checked before anything is loaded. Translations are written in input order
as soon as every line before them is known (decoding sorts by length within windows of
STREAM_WINDOW_BATCHES batches), so an interrupted or failed run leaves complete lines, a prefix
of the output.

With --alignments=hard each line is `TRANSLATION<TAB>ALIGNMENT` (Pharaoh `SRC-TGT` word pairs),
with --alignments=soft a JSON object (decoding/alignments.py; README: Alignments).

With --target_prefix=FILE, line i's translation starts with FILE's line i. With --interactive
(by itself when stdin is a terminal) each input line is answered, written and flushed, before
the next is read, so that a program at the other end of two pipes can converse with it.
"""

import dataclasses
import os
import sys

from absl import logging

from tfnmt.cli import common, console
from tfnmt.cli.flags import given, read, read_fields
from tfnmt.cli.options import TranslationOptions
from tfnmt.data.text_files import decode_lines, read_lines, require_file
from tfnmt.decoding import alignments
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.batches import STREAM_WINDOW_BATCHES, n_best_lines
from tfnmt.errors import ConfigError, DataError, cannot_write


def _input_name(t):
    return "<stdin>" if t.input == "-" else t.input


def _read_input(t):
    if t.input == "-":
        return decode_lines(sys.stdin.buffer.read(), _input_name(t), replace_invalid=True)
    return read_lines(t.input, role="input", replace_invalid=True)


class _Output:
    """--output (a file or stdout) behind an OrderedWriter; a failed write or close becomes one
    line naming the file."""

    def __init__(self, path):
        self.name = "stdout" if path == "-" else path
        try:
            self.stream = sys.stdout if path == "-" else open(path, "w", encoding="utf-8")
        except OSError as e:
            raise cannot_write(self.name, e, "choose another --output") from None
        self.writer = OrderedWriter(self.stream)

    def put(self, index, text):
        try:
            self.writer.put(index, text)
        except BrokenPipeError:
            raise  # the reader has gone (`| head`): cli/main.py ends quietly
        except OSError as e:
            raise cannot_write(self.name, e, "free some space or choose another --output") from None

    def close(self):
        if self.stream is not sys.stdout:
            try:
                self.stream.close()
            except OSError as e:
                raise cannot_write(self.name, e, "free some space or choose another --output") from None


def interactive(t):
    """Whether to answer line by line: --interactive as given, else when stdin is a terminal
    (and no --target_prefix file has to be matched with the whole input)."""
    if "interactive" in given(TranslationOptions):
        return t.interactive
    return t.input == "-" and not t.target_prefix and sys.stdin.isatty()


def check(t, wanted, answering=False):
    """The settings across TranslationOptions `t` and the decoding's n_best and alignments
    (`wanted`), before anything is loaded; `answering`: interactive."""
    if t.output != "-":
        common.check_output_file(t.output)
    # A missing file is refused before a model takes seconds to load (stdin is read after).
    for path, role in ((t.input, "input"), (t.target_prefix, "target prefix")):
        if path and path != "-":
            require_file(path, role)
    if t.target_prefix and (wanted["n_best"] > 1 or wanted["alignments"] != "none"):
        raise ConfigError("--target_prefix: of the best translation only; not with --n_best or "
                          "--alignments")
    if t.target_prefix and answering:
        raise ConfigError("--target_prefix: not with --interactive (its lines are matched with "
                          "the whole input)")
    if t.plot_dir and wanted["alignments"] != "soft":
        raise ConfigError(f"--plot_dir: draws the attention of --alignments=soft, not "
                          f"--alignments={wanted['alignments']}")
    if wanted["alignments"] != "none" and wanted["n_best"] > 1:
        raise ConfigError("--alignments: of the best translation only; drop --n_best")


def run():
    t = read(TranslationOptions)
    source = common.translator_source()
    # An export or a server decodes as it was exported: of the decoding flags, they read these.
    wanted = (dataclasses.asdict(source.decoding) if source.decoding is not None
              else read_fields(DecodingOptions, ("n_best", "alignments")))
    answering = interactive(t)
    check(t, wanted, answering)
    _, translator = common.open_translator(source)
    if answering:
        return _answer(t, wanted, translator)
    lines, problems = _read_input(t)
    for problem in problems:
        logging.warning("%s; translating it with U+FFFD in place of the bad bytes", problem)
    for number, line in enumerate(lines, start=1):
        _say_if_empty(t, number, line)
    _write(t, wanted, translator, lines, _read_prefixes(t, len(lines)))


def _say_if_empty(t, number, line):
    if not line.strip():
        logging.warning("%s:%d: empty line; its translation is empty", _input_name(t), number)


def _read_prefixes(t, count):
    """The --target_prefix lines, one per input line, or None."""
    if not t.target_prefix:
        return None
    prefixes, problems = read_lines(t.target_prefix, role="target prefix", replace_invalid=True)
    for problem in problems:
        logging.warning("%s; using it with U+FFFD in place of the bad bytes", problem)
    if len(prefixes) != count:
        raise DataError(f"--target_prefix={t.target_prefix}: {len(prefixes)} lines for the "
                        f"{count} lines of {_input_name(t)}; give one prefix per input line (an "
                        "empty line for none)")
    return prefixes


def _text(t, wanted, index, result):
    """The output line(s) of one input line's result."""
    mode = wanted["alignments"]
    if mode != "none":
        if t.plot_dir:
            alignments.plot(result.alignment, os.path.join(t.plot_dir, f"{index + 1}.png"))
        return alignments.line(result.alignment, mode)
    if wanted["n_best"] > 1:
        return n_best_lines(index, result)
    return result.text


def _answer(t, wanted, translator):
    """--interactive: reads a line, writes its translation and flushes, then reads the next."""
    stream = sys.stdin.buffer if t.input == "-" else _open_input(t.input)
    output = _Output(t.output)
    try:
        for number, raw in enumerate(iter(stream.readline, b""), start=1):
            raw = raw.rstrip(b"\n").rstrip(b"\r")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                logging.warning("%s:%d: not valid UTF-8 (byte %d); translating it with U+FFFD in "
                                "place of the bad bytes", _input_name(t), number, e.start)
                line = raw.decode("utf-8", errors="replace")
            _say_if_empty(t, number, line)
            (_, result), = translator.translations(
                [line], n_best=wanted["n_best"], alignments=wanted["alignments"] != "none",
                batch_size=1, where=_input_name(t), first_line=number)
            output.put(number - 1, _text(t, wanted, number - 1, result))
    finally:
        output.close()
        if stream is not sys.stdin.buffer:
            stream.close()


def _open_input(path):
    try:
        return open(path, "rb")
    except OSError as e:
        raise DataError(f"cannot read input file {path}: {e.strerror}") from None


def _write(t, wanted, translator, lines, prefixes=None):
    """Writes the translations of `lines` (by tfnmt.Translator: the Python API's) as lines,
    each starting with its line of `prefixes` if given."""
    # Before the output is opened: an exported or served model cuts long inputs too, but only a
    # checkpoint has the tokenizer at hand to say so (or refuse them) per line beforehand.
    bar = console.progress_bar(total=len(lines), desc="translate")
    try:
        results = translator.translations(
            lines, n_best=wanted["n_best"], alignments=wanted["alignments"] != "none",
            batch_size=t.decode_batch_size, window=STREAM_WINDOW_BATCHES * t.decode_batch_size,
            progress=bar, where=_input_name(t), target_prefix=prefixes)
    except BaseException:
        bar.close()
        raise
    output = _Output(t.output)
    try:
        for index, result in results:
            output.put(index, _text(t, wanted, index, result))
    finally:
        bar.close()
        output.close()
        if output.writer.written < len(lines) and t.output != "-":
            logging.warning("%s holds the first %d of %d translations", t.output,
                            output.writer.written, len(lines))


class OrderedWriter:
    """Writes translations that arrive out of order (`put(index, text)`) as lines in input
    order, each as soon as every line before it is known, and flushes: whatever stops the run,
    the stream holds complete lines, a prefix of the output. Only lines waiting for an earlier
    one are held back."""

    def __init__(self, stream):
        self.stream = stream
        self.written = 0
        self._waiting = {}

    def put(self, index, text):
        self._waiting[index] = text
        if index != self.written:
            return
        while self.written in self._waiting:
            self.stream.write(self._waiting.pop(self.written) + "\n")
            self.written += 1
        self.stream.flush()
