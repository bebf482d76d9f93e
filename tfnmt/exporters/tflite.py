"""TFLite export for phones: the model and its beam search (greedy = beam 1) in one flatbuffer.

The flatbuffer takes one sentence's SentencePiece ids and returns the translation's ids:

    input  int32 [1, S]  source ids followed by eos (3); at most max_input_length + 1 ids
    output int32 [1, T]  target ids, padded with 0 after the translation ends
    output float32 [1]   the hypothesis score (length-penalised log-probability)

The SentencePiece model(s) are written beside it, with tflite_export.json describing all of
this for the app. Only TFLite builtin ops are allowed, so the flatbuffer runs on the stock
interpreter; the tokenizer is therefore outside (tensorflow-text's SentencePiece ops are custom
ops an app would have to link).

Two facts of the toolchain shape the conversion (../shared/docs/field-notes.md): variables read
inside a while loop must be frozen into constants first, and the loop must stay functional
(`lower_control_flow=False`), or the shape-changing hypotheses of the beam search no longer
match the loop's declared shapes. The converter itself runs in a child process, given the
frozen graph: in the exporting process it would leave functions that a later conversion of
another model can clash with. The children are forked by one server process (tflite_child.py)
that has imported TensorFlow, so that a conversion does not import it again.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from tfnmt import json_files
from tfnmt.data.vocab import EOS_ID, PAD_ID, JOINT_FILE, SOURCE_FILE, TARGET_FILE, Vocab
from tfnmt.decoding.backend import Backend
from tfnmt.decoding.options import DecodingOptions
from tfnmt.errors import ConfigError
from tfnmt.exporters.options import QUANTIZATIONS
from tfnmt.exporters.versions import write_version

MODEL_FILE = "model.tflite"
INFO_FILE = "tflite_export.json"
# The converter's server (why: the module's docstring).
_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tflite_child.py")


class _IdTranslator(tf.Module):
    def __init__(self, translator):
        super().__init__(name="tflite_translator")
        self.translator = translator

    @tf.function(input_signature=[tf.TensorSpec([1, None], tf.int32, name="source_ids")],
                 autograph=False)
    def translate_ids(self, source_ids):
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(source_ids, PAD_ID), tf.int32), axis=1) - 1
        ids, scores = self.translator.translate_ids(source_ids, lengths, halves=False)
        return {"ids": ids, "scores": scores}


# Where a failed conversion leaves the converter's whole output (in the model directory).
DIAGNOSTIC_FILE = "tflite-conversion-error.txt"


def convert(translator, quantize, diagnostic_dir=None):
    """The flatbuffer (bytes) of `translator`'s model and decoding settings. A failed conversion
    is one line; the converter's whole output (notes, MLIR dumps: hundreds of lines) goes to
    `diagnostic_dir`/DIAGNOSTIC_FILE, which the line names, and to the debug log."""
    if quantize not in QUANTIZATIONS:
        raise ConfigError(f"--quantize={quantize!r}: choose one of {', '.join(QUANTIZATIONS)}")
    module = _IdTranslator(translator)
    frozen = convert_variables_to_constants_v2(module.translate_ids.get_concrete_function(),
                                               lower_control_flow=False)
    with tempfile.TemporaryDirectory() as directory:
        with open(os.path.join(directory, "frozen.pb"), "wb") as f:
            f.write(frozen.graph.as_graph_def().SerializeToString())
        json_files.write(os.path.join(directory, "tensors.json"),
                         {"inputs": [t.name for t in frozen.inputs],
                          "outputs": [t.name for t in frozen.outputs]})
        answer = _SERVER.convert(directory, quantize)
        if answer == "0":
            with open(os.path.join(directory, MODEL_FILE), "rb") as f:
                return f.read()
        error = os.path.join(directory, "error.txt")
        if os.path.isfile(error):
            with open(error) as f:
                kind, _, message = f.read().partition("\n")
        else:  # the child died before it could say why (killed, out of memory)
            kind, message = _died(answer, os.path.join(directory, "output.txt"))
    name = getattr(translator.model, "registry_name", type(translator.model).__name__)
    logging.debug("the TFLite converter failed (%s):\n%s", kind, message)
    where = ""
    if diagnostic_dir:
        path = os.path.join(diagnostic_dir, DIAGNOSTIC_FILE)
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(f"{kind}\n{message}\n")
            where = f" (the converter's output: {path})"
        except OSError:
            pass  # the one line still says why
    raise ConfigError(f"model {name!r} cannot be converted to TFLite: "
                      f"{_reason(message, kind)}{where}")


class _ConverterServer:
    """The process of tflite_child.py, started at the first conversion and kept until this
    process ends (it ends at the end of its stdin): each conversion is a child it forks. The
    server and its children are a process group of their own, ended together where an exchange
    is cut short (an interrupt: its answer would be read as the next conversion's) or the
    server died (its child would convert on into a directory the retry also converts into)."""

    def __init__(self):
        self._process = None
        self._log = None
        self._lock = threading.Lock()

    def convert(self, directory, quantize):
        """The server's answer for one conversion (tflite_child.py: "0" when DIR/model.tflite
        was written), or the server's last output where it died."""
        with self._lock:
            for attempt in range(2):  # a server found dead is started again, once
                if self._process is None or self._process.poll() is not None:
                    self._start()
                try:
                    self._process.stdin.write(f"{directory} {quantize}\n")
                    self._process.stdin.flush()
                    answer = self._process.stdout.readline().strip()
                except (OSError, ValueError):  # a broken pipe, a closed one
                    answer = ""
                except BaseException:
                    self._end()
                    raise
                if answer:
                    return answer
                words = self._last_words()
                self._end()
                if attempt:
                    return words

    def _start(self):
        self._end()
        self._log = tempfile.TemporaryFile(mode="w+")
        self._process = subprocess.Popen(
            [sys.executable, _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._log, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
            start_new_session=True)

    def _end(self):
        """Ends the server and any conversion it runs."""
        if self._process is None:
            return
        try:
            os.killpg(self._process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # ended already
        self._process.wait()
        for pipe in (self._process.stdin, self._process.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        self._process = None

    def _last_words(self):
        self._log.seek(0)
        return self._log.read()[-3000:]


_SERVER = _ConverterServer()


def _died(answer, output):
    """(kind, message) of a conversion that left no error.txt: its child's or server's end."""
    if not (answer.isdigit() or answer.startswith("signal")):
        return "the converter's server ended", answer
    try:
        with open(output, errors="replace") as f:
            message = f.read()[-3000:]
    except OSError:
        message = ""
    return (answer if answer.startswith("signal") else f"exit status {answer}"), message


def _reason(message, kind=""):
    """One line of a converter's error: the ops TFLite lacks, else its first 'error:' line
    (the message goes on with notes and MLIR dumps, whose last line may be a lone '}'), else
    its last line; `kind` (how the conversion ended: "signal 9") where it said nothing."""
    blocking = sorted(set(re.findall(r"'(tf\.\w+)' op is neither a custom op nor a flex op",
                                     message)))
    if blocking:
        return "ops with no TFLite builtin: " + ", ".join(blocking)
    lines = message.strip().splitlines() or [kind]
    errors = [line.split("error:", 1)[1].strip() for line in lines if "error:" in line]
    return (errors[0] if errors else lines[-1])[:300]


def export(translator, model_dir, export_dir, name, version=0, config=None, quantize="none"):
    """Writes export_dir/name/version/{model.tflite, SentencePiece model(s), tflite_export.json}."""
    from tfnmt.data.vocab import vocab_paths
    flatbuffer = convert(translator, quantize, model_dir)
    source_path, target_path = vocab_paths(model_dir)
    options = translator.options

    def write(staging):
        os.makedirs(staging)
        with open(os.path.join(staging, MODEL_FILE), "wb") as f:
            f.write(flatbuffer)
        for path in {source_path, target_path}:
            shutil.copy(path, os.path.join(staging, os.path.basename(path)))
        joint = source_path == target_path
        info = {
            "config": config or {}, "decoding": options.record(), "quantize": quantize,
            "source_vocab": JOINT_FILE if joint else SOURCE_FILE,
            "target_vocab": JOINT_FILE if joint else TARGET_FILE,
            "input": {"dtype": "int32", "shape": [1, -1], "append_id": EOS_ID,
                      "max_ids": options.max_input_length + 1},
            "outputs": {"ids": {"dtype": "int32", "shape": [1, -1], "padding_id": PAD_ID},
                        "scores": {"dtype": "float32", "shape": [1]}},
        }
        with open(os.path.join(staging, INFO_FILE), "w") as f:
            json.dump(info, f, indent=2, sort_keys=True)

    return write_version(export_dir, name, version, write)


class TFLiteTranslator(Backend):
    """Runs an exported flatbuffer with the LiteRT interpreter as a translation backend
    (decoding/backend.py), one sentence at a time as on a phone; one translation each."""

    def __init__(self, path):
        from ai_edge_litert.interpreter import Interpreter
        model = os.path.join(path, MODEL_FILE)
        if not os.path.isfile(model):
            raise ConfigError(f"no TFLite model in {path} (expected DIR/NAME/VERSION/{MODEL_FILE})")
        self.info = json_files.read(os.path.join(path, INFO_FILE))
        if not isinstance(self.info, dict):
            raise ConfigError(f"no {INFO_FILE} in {path}: export the model again")
        self.config = self.info.get("config") or None
        self.options = DecodingOptions.from_record(self.info["decoding"])
        self.beam_size = self.options.beam_size
        self.source_vocab = Vocab.from_file(os.path.join(path, self.info["source_vocab"]))
        self.target_vocab = Vocab.from_file(os.path.join(path, self.info["target_vocab"]))
        self.interpreter = Interpreter(model_path=model)
        self._input = self.interpreter.get_input_details()[0]["index"]
        # The frozen function's outputs are unnamed: tell them apart by type.
        outputs = {d["dtype"]: d["index"] for d in self.interpreter.get_output_details()}
        self._ids, self._scores = outputs[np.int32], outputs[np.float32]

    def source_ids(self, sentence):
        ids = self.source_vocab.encode(sentence)[: self.info["input"]["max_ids"] - 1]
        return ids + [self.info["input"]["append_id"]] if ids else []

    def translate_ids(self, source_ids):
        """Source ids (eos-terminated) -> (target ids without padding, score)."""
        self.interpreter.resize_tensor_input(self._input, [1, len(source_ids)])
        self.interpreter.allocate_tensors()
        self.interpreter.set_tensor(self._input, np.array([source_ids], np.int32))
        self.interpreter.invoke()
        ids = self.interpreter.get_tensor(self._ids)[0]
        return [int(i) for i in ids if i != PAD_ID], float(self.interpreter.get_tensor(self._scores)[0])

    def translate(self, text):
        translations, scores = [], []
        for sentence in np.asarray(text).reshape(-1):
            source = self.source_ids(sentence.decode("utf-8") if isinstance(sentence, bytes) else sentence)
            ids, score = self.translate_ids(source) if source else ([], 0.0)
            translations.append(self.target_vocab.decode(ids).encode("utf-8"))
            scores.append(score)
        return {"translations": tf.constant(translations, tf.string),
                "scores": tf.constant(scores, tf.float32)}
