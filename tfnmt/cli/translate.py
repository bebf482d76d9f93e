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
"""

import dataclasses
import os
import sys

from absl import logging

from tfnmt.api import Translator
from tfnmt.cli import common, console
from tfnmt.cli.flags import read, read_fields
from tfnmt.cli.options import TranslationOptions
from tfnmt.data.text_files import decode_lines, read_lines
from tfnmt.decoding import alignments
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.translator import STREAM_WINDOW_BATCHES, OrderedWriter, n_best_lines
from tfnmt.errors import ConfigError, cannot_write


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


def check(t, wanted):
    """The settings across TranslationOptions `t` and the decoding's n_best and alignments
    (`wanted`), before anything is loaded."""
    if t.output != "-":
        common.check_output_file(t.output)
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
    check(t, wanted)
    config, backend = common.open_translator(source)
    translator = Translator(backend, config, source.decoding,
                            where=source.client.server or source.export.saved_model
                            or source.where.model_dir)
    lines, problems = _read_input(t)
    for problem in problems:
        logging.warning("%s; translating it with U+FFFD in place of the bad bytes", problem)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            logging.warning("%s:%d: empty line; its translation is empty", _input_name(t), number)
    _write(t, wanted, translator, lines)


def _write(t, wanted, translator, lines):
    """Writes the translations of `lines` (by tfnmt.Translator: the Python API's) as lines."""
    mode, n_best = wanted["alignments"], wanted["n_best"]
    # Before the output is opened: an exported or served model cuts long inputs too, but only a
    # checkpoint has the tokenizer at hand to say so (or refuse them) per line beforehand.
    bar = console.progress_bar(total=len(lines), desc="translate")
    try:
        results = translator.translations(
            lines, n_best=n_best, alignments=mode != "none", batch_size=t.decode_batch_size,
            window=STREAM_WINDOW_BATCHES * t.decode_batch_size, progress=bar,
            where=_input_name(t))
    except BaseException:
        bar.close()
        raise
    output = _Output(t.output)
    try:
        for index, result in results:
            if mode != "none":
                if t.plot_dir:
                    alignments.plot(result.alignment, os.path.join(t.plot_dir, f"{index + 1}.png"))
                text = alignments.line(result.alignment, mode)
            elif n_best > 1:
                text = n_best_lines(index, result)
            else:
                text = result.text
            output.put(index, text)
    finally:
        bar.close()
        output.close()
        if output.writer.written < len(lines) and t.output != "-":
            logging.warning("%s holds the first %d of %d translations", t.output,
                            output.writer.written, len(lines))
