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

import os
import sys

from absl import logging

from tfnmt.cli import common, console
from tfnmt.cli.flags import FLAGS
from tfnmt.data.text_files import decode_lines, read_lines
from tfnmt.decoding import alignments
from tfnmt.decoding.translator import STREAM_WINDOW_BATCHES, OrderedWriter, translations
from tfnmt.errors import ConfigError, cannot_write


def _input_name():
    return "<stdin>" if FLAGS.input == "-" else FLAGS.input


def _read_input():
    if FLAGS.input == "-":
        return decode_lines(sys.stdin.buffer.read(), _input_name(), replace_invalid=True)
    return read_lines(FLAGS.input, role="input", replace_invalid=True)


class _Output:
    """--output (a file or stdout) behind an OrderedWriter; a failed write or close becomes one
    line naming the file."""

    def __init__(self):
        self.name = "stdout" if FLAGS.output == "-" else FLAGS.output
        try:
            self.stream = sys.stdout if FLAGS.output == "-" else open(FLAGS.output, "w", encoding="utf-8")
        except OSError as e:
            raise cannot_write(self.name, e, "choose another --output") from None
        self.writer = OrderedWriter(self.stream)

    def put(self, index, text):
        try:
            self.writer.put(index, text)
        except OSError as e:
            raise cannot_write(self.name, e, "free some space or choose another --output") from None

    def close(self):
        if self.stream is not sys.stdout:
            try:
                self.stream.close()
            except OSError as e:
                raise cannot_write(self.name, e, "free some space or choose another --output") from None


def run():
    if FLAGS.output != "-":
        common.check_output_file(FLAGS.output)
    mode = FLAGS.alignments
    if FLAGS.plot_dir and mode != "soft":
        raise ConfigError(f"--plot_dir: draws the attention of --alignments=soft, not "
                          f"--alignments={mode}")
    if mode != "none" and FLAGS.n_best > 1:
        raise ConfigError("--alignments: of the best translation only; drop --n_best")
    config, translator = common.translator_from_flags()
    lines, problems = _read_input()
    for problem in problems:
        logging.warning("%s; translating it with U+FFFD in place of the bad bytes", problem)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            logging.warning("%s:%d: empty line; its translation is empty", _input_name(), number)
    # An exported or served model cuts long inputs too, but only a checkpoint has the tokenizer
    # at hand to say so per line beforehand.
    translator.prepare(lines, _input_name())
    output = _Output()
    try:
        for index, text in translations(translator, lines, FLAGS.decode_batch_size,
                                        progress=console.stderr_is_terminal(),
                                        window=STREAM_WINDOW_BATCHES * FLAGS.decode_batch_size,
                                        n_best=FLAGS.n_best if FLAGS.n_best > 1 else 0,
                                        alignments=mode != "none"):
            if mode != "none":
                if FLAGS.plot_dir:
                    alignments.plot(text, os.path.join(FLAGS.plot_dir, f"{index + 1}.png"))
                text = alignments.line(text, mode)
            output.put(index, text)
    finally:
        output.close()
        if output.writer.written < len(lines) and FLAGS.output != "-":
            logging.warning("%s holds the first %d of %d translations", FLAGS.output,
                            output.writer.written, len(lines))
