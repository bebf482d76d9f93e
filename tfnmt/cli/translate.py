"""tfnmt translate: translate a file or stdin, line by line, to stdout or a file, with a
checkpoint (--model_dir), an export (--saved_model) or a served model (--server, --model).

Lines keep their order and count: an empty input line gives an empty output line; a line with
invalid UTF-8 is translated with U+FFFD in place of the bad bytes; a line longer than
--max_input_length subwords is cut to it. Each case is reported on stderr with its line number.
"""

import sys

import tensorflow as tf
from absl import logging

from tfnmt.cli import common, console
from tfnmt.cli.flags import FLAGS
from tfnmt.data.text_files import decode_lines, read_lines
from tfnmt.decoding.translator import translate_sentences
from tfnmt.errors import DataError


def _input_name():
    return "<stdin>" if FLAGS.input == "-" else FLAGS.input


def _read_input():
    if FLAGS.input == "-":
        return decode_lines(sys.stdin.buffer.read(), _input_name(), replace_invalid=True)
    return read_lines(FLAGS.input, role="input", replace_invalid=True)


def run():
    config, translator = common.translator_from_flags()
    lines, problems = _read_input()
    for problem in problems:
        logging.warning("%s; translating it with U+FFFD in place of the bad bytes", problem)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            logging.warning("%s:%d: empty line; its translation is empty", _input_name(), number)
    if not FLAGS.saved_model and not FLAGS.server:
        # An exported or served model cuts long inputs the same way, but only the checkpoint
        # path has the tokenizer at hand to say so per line.
        lengths = translator.source_tokenizer.tokenize(tf.constant(lines or [""])).row_lengths().numpy()
        for number, length in enumerate(lengths[: len(lines)], start=1):
            if length > FLAGS.max_input_length:
                logging.warning("%s:%d: %d subwords; only the first %d are translated "
                                "(--max_input_length)", _input_name(), number, length,
                                FLAGS.max_input_length)
    common.check_long_inputs(translator, lines, _input_name())
    results = translate_sentences(translator, lines, FLAGS.decode_batch_size,
                              progress=console.stderr_is_terminal())
    text = "".join(r + "\n" for r in results)
    if FLAGS.output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        try:
            with open(FLAGS.output, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise DataError(f"cannot write {FLAGS.output}: {e.strerror}") from None
