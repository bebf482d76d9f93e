"""TFLite export: a trained tiny small-embedding DenseNMT in a flatbuffer, run by LiteRT."""

import json
import logging
import os
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import multi30k_lines, run_cli, synthetic_pairs
from contract import overfit_export_and_compare
from tfnmt.data import vocab
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.batches import translate_sentences
from tfnmt.decoding.translator import Translator
from tfnmt.errors import ConfigError
from tfnmt.evaluation import bleu
from tfnmt.exporters import tflite
from tfnmt.exporters.saved_model import SavedModelTranslator
from tfnmt.models import catalog

# The paper's smallest embedding width (64) on a 2+2-layer model.
DENSE_SMALL = ["--model=densenmt", "--encoder_layers=2", "--decoder_layers=2", "--embed_dim=128",
               "--table_dim=64", "--growth_rate=64", "--attention_dim=64"]


@pytest.fixture(scope="module")
def dense_model(multi30k_dir, tmp_path_factory):
    """A tiny DenseNMT with 64-wide embeddings overfitted on a Multi30k slice; its checkpoint's
    and its SavedModel's greedy translations of 20 training sentences agree."""
    run = overfit_export_and_compare(
        str(tmp_path_factory.mktemp("densenmt")), multi30k_dir, *DENSE_SMALL, steps=100,
        learning_rate=5e-3, below=1.2, lines=20, export_flags=("--beam_size=1",),
        compare=((("--beam_size=1",), ()),))  # 5.3 -> 0.04 nats/token seen
    return run.model_dir, run


@pytest.fixture(scope="module")
def export(dense_model, tmp_path_factory):
    """export(*flags): the path of dense_model exported with `flags`, made once per module (a
    TFLite conversion takes seconds; the tests only read the exports)."""
    model_dir, run = dense_model
    export_dir = str(tmp_path_factory.mktemp("exports"))
    made = {("--beam_size=1",): run.saved_model}

    def export(*flags):
        if flags not in made:
            name = f"m{len(made)}"
            assert run_cli("export", f"--model_dir={model_dir}", f"--export_dir={export_dir}",
                           f"--export_name={name}", *flags) == 0
            made[flags] = os.path.join(export_dir, name, "1")
        return made[flags]
    return export


@pytest.mark.slow
def test_densenmt_overfits_multi30k_pairs_and_its_saved_model_translates(dense_model,
                                                                         multi30k_dir):
    _, run = dense_model
    score = bleu.score(run.outputs[0], multi30k_lines(multi30k_dir, "de", 20))["bleu"]
    assert score > 20, score


@pytest.mark.slow
@pytest.mark.parametrize("beam_size", [1, 4])
def test_tflite_outputs_exactly_the_saved_model_ids(dense_model, export, multi30k_dir, beam_size):
    model_dir, _ = dense_model
    flags = (f"--beam_size={beam_size}",)
    lite = tflite.TFLiteTranslator(export("--format=tflite", *flags))
    saved = SavedModelTranslator(export(*flags))
    sources = multi30k_lines(multi30k_dir, "en", 30, start=150) + multi30k_lines(
        multi30k_dir, "en", 10, start=5000) + [""]
    # The SavedModel's ids, recovered through the same in-graph tokenizer and translate_ids.
    from tfnmt import model_dir as model_dir_lib
    from tfnmt.training import checkpoints
    config, model, source_vocab, target_vocab = model_dir_lib.load(model_dir)
    checkpoints.restore_model(model, checkpoints.resolve(model_dir, ""))
    translator = Translator(model, source_vocab, target_vocab, DecodingOptions(beam_size=beam_size))
    # In a graph, as in the SavedModel (eagerly the search's loop would run op by op in Python).
    translate_ids = tf.function(lambda source, lengths: translator.translate_ids(source, lengths),
                                input_signature=[tf.TensorSpec([1, None], tf.int32),
                                                 tf.TensorSpec([1], tf.int32)])
    # Sentence by sentence costs two searches each: a few short and the long ones suffice; the
    # batch comparison below covers them all.
    for sentence in sources[:8] + sources[30:36]:
        ids, _ = lite.translate_ids(lite.source_ids(sentence))
        source, lengths = translator.tokenize(tf.constant([sentence]))
        expected, _ = translate_ids(source, lengths)
        assert ids == [i for i in expected.numpy()[0].tolist() if i != 0], sentence
    lite_text = lite.translate(tf.constant(sources))["translations"].numpy()
    saved_text = saved.translate(tf.constant(sources))["translations"].numpy()
    assert lite_text.tolist() == saved_text.tolist()
    assert lite_text[-1] == b""


def test_the_standalone_reference_runner_reproduces_tfnmt_translate(export, multi30k_dir):
    import subprocess
    import sys
    from conftest import REPO
    path = export("--format=tflite", "--beam_size=1")
    sources = multi30k_lines(multi30k_dir, "en", 10, start=30) + [""]
    result = subprocess.run([sys.executable, os.path.join(REPO, "export", "tflite", "translate_tflite.py"),
                             path], input="\n".join(sources) + "\n", capture_output=True,
                            text=True, timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n")[:-1] == translate_sentences(tflite.TFLiteTranslator(path),
                                                                 sources, 4)


@pytest.mark.slow
def test_quantised_tflite_agrees_on_most_sentences_and_is_smaller(export, multi30k_dir):
    plain = export("--format=tflite", "--beam_size=1")
    dynamic = export("--format=tflite", "--beam_size=1", "--quantize=dynamic")
    half = export("--format=tflite", "--beam_size=1", "--quantize=float16")
    size = {p: os.path.getsize(os.path.join(p, tflite.MODEL_FILE)) for p in (plain, dynamic, half)}
    assert size[dynamic] < 0.4 * size[plain] and size[half] < 0.6 * size[plain], size
    with open(os.path.join(dynamic, tflite.INFO_FILE)) as f:
        assert json.load(f)["quantize"] == "dynamic"
    sources = multi30k_lines(multi30k_dir, "en", 200)
    reference = translate_sentences(tflite.TFLiteTranslator(plain), sources, 8)
    # Dynamic-range kernels quantise activations too, and a greedy search diverges after one
    # changed token: 78% identical was seen (52% with 32-wide embeddings); float16 is closer.
    for path, least in ((dynamic, 0.6), (half, 0.9)):
        out = translate_sentences(tflite.TFLiteTranslator(path), sources, 8)
        same = np.mean([a == b for a, b in zip(out, reference)])
        assert same >= least, (path, same)


def _int8_buffers_of_shape(flatbuffer, shape):
    """How many distinct int8 buffers hold a tensor of `shape`."""
    from tensorflow.lite.python import schema_py_generated as schema
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    found = set()
    for g in range(model.SubgraphsLength()):
        graph = model.Subgraphs(g)
        for t in range(graph.TensorsLength()):
            tensor = graph.Tensors(t)
            if (tensor.Type() == schema.TensorType.INT8 and tensor.ShapeLength()
                    and tensor.ShapeAsNumpy().tolist() == list(shape)
                    and model.Buffers(tensor.Buffer()).DataLength()):
                found.add(tensor.Buffer())
    return len(found)


@pytest.fixture(scope="module")
def tiny_densenmt(tmp_path_factory):
    """tiny_densenmt(seed, beam_size): a Translator of an untrained DenseNMT with one table for
    the lookups and the softmax (as the phone model's), 60 words, seeded."""
    vocab_path = str(tmp_path_factory.mktemp("vocab") / "spm.model")
    vocab.train_sentencepiece([s for p in synthetic_pairs(200) for s in p], vocab_path, 60, "word")
    words = vocab.Vocab.from_file(vocab_path)

    def make(seed, beam_size):
        keras.utils.set_random_seed(seed)
        model = catalog.get("densenmt")(words.size, words.size, encoder_layers=2,
                                        decoder_layers=2, embed_dim=64, table_dim=32,
                                        growth_rate=16, attention_dim=16,
                                        share_embeddings=True, tie_output=True)
        model.build_with_dummy_batch()
        return Translator(model, words, words, DecodingOptions(beam_size=beam_size))
    return make


@pytest.mark.slow
def test_different_models_convert_through_one_server_and_a_shared_table_is_stored_once_in_int8(
        tiny_densenmt):
    # The converter left a function named while_cond_function_0 in the process's TensorFlow
    # context; the next conversion that named one so with another body failed with "Attempting
    # to add a duplicate function" (the suite's intermittent failure, whichever TFLite test
    # came second in a worker). Each conversion runs in a child of one server process, which
    # imports TensorFlow once; a server that ended is started again.
    servers = []
    for seed, (quantize, beam_size) in enumerate([("dynamic", 1), ("none", 4), ("none", 1)]):
        if seed == 2:
            # The server ends at the end of its input, as when this process ends.
            servers[-1].stdin.close()
            assert servers[-1].wait(timeout=60) == 0
        translator = tiny_densenmt(seed, beam_size)
        flatbuffer = tflite.convert(translator, quantize)
        assert flatbuffer[4:8] == b"TFL3"  # the flatbuffer's file identifier
        servers.append(tflite._SERVER._process)
        if seed == 0:
            # The phone model's one table (configs/densenmt/phone.cfg) feeds the embedding
            # lookups and the output layer: quantised per output channel for the output layer
            # and per tensor for the lookups, it was stored twice (0.5 MB of its 5.6 MB).
            # (TFLite leaves tensors of fewer than 1,024 values in float32: 60 x 32 is
            # quantised.)
            assert _int8_buffers_of_shape(flatbuffer,
                                          [translator.target_vocab.size, 32]) == 1
    # The first two (beam 1 and beam 4: loops of other bodies) through one server; the third
    # through a new one, which the tests after this one keep using.
    assert servers[0] is servers[1] and servers[2] is not servers[1]
    assert servers[2].poll() is None


# A stand-in for tflite_child.py: answers each request, a second later, with its directory, and
# leaves a child of its own that outlives it by a minute (as a conversion would).
_SLOW_SERVER = """
import os, subprocess, sys, time
for line in sys.stdin:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(os.path.join(os.path.dirname(__file__), "child.pid"), "w") as f:
        f.write(str(child.pid))
    time.sleep(1)
    print(line.split()[0], flush=True)
"""


def _running(pid):
    """Whether process `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_an_interrupted_conversion_ends_its_server_and_the_next_gets_its_own_answer(
        tmp_path, monkeypatch):
    import signal
    script = tmp_path / "server.py"
    script.write_text(_SLOW_SERVER)
    monkeypatch.setattr(tflite, "_CHILD", str(script))
    server = tflite._ConverterServer()

    def interrupt(*_):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            server.convert("/first", "none")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert server._process is None
    # The first answer, due 0.7 s later, is not read as the second's.
    assert server.convert("/second", "none") == "/second"
    # The server's own children end with it.
    child = int((tmp_path / "child.pid").read_text())
    assert _running(child)
    server._end()
    for _ in range(50):
        if not _running(child):
            break
        time.sleep(0.1)
    assert not _running(child)


@pytest.mark.slow
def test_a_model_with_an_op_tflite_lacks_gets_an_error_naming_it(dense_model, monkeypatch,
                                                                 tmp_path, caplog):
    from tfnmt import model_dir as model_dir_lib
    model_dir, _ = dense_model
    config, model, source_vocab, target_vocab = model_dir_lib.load(model_dir)
    step = model.step
    monkeypatch.setattr(model, "step", lambda ids, t, state, memory: (
        tf.math.digamma(step(ids, t, state, memory)[0]), step(ids, t, state, memory)[1]))
    with pytest.raises(ConfigError, match=r"'densenmt' cannot be converted to TFLite: .*tf\.Digamma"
                                          r" \(the converter's output: .*\)$") as raised:
        tflite.convert(Translator(model, source_vocab, target_vocab, DecodingOptions(beam_size=1)),
                       "none", str(tmp_path))
    assert "\n" not in str(raised.value)
    # The converter's whole message, notes and all, is in the file the line names, not in the
    # log a user sees (warnings and above).
    path = tmp_path / tflite.DIAGNOSTIC_FILE
    assert str(path) in str(raised.value)
    text = path.read_text()
    assert "neither a custom op nor a flex op" in text and len(text.splitlines()) > 3
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING
                and "converter" in r.getMessage()]


def test_a_converter_error_is_told_by_its_first_error_line_not_its_dumps_last():
    message = ("Could not translate MLIR to FlatBuffer.\n"
               "<unknown>:0: error: loc(\"while\"): 'tfl.while' op body has 3 results\n"
               "<unknown>:0: note: see current operation:\n"
               "%0 = \"tfl.while\"() ({\n  ^bb0:\n}")
    assert tflite._reason(message) == "loc(\"while\"): 'tfl.while' op body has 3 results"
    assert tflite._reason("one line") == "one line"
    # A child killed before it wrote anything (out of memory): how it ended, not nothing.
    assert tflite._reason("", "signal 9") == "signal 9"


def test_quantize_needs_the_tflite_format(dense_model, tmp_path, capsys):
    model_dir, _ = dense_model
    assert run_cli("export", f"--model_dir={model_dir}", f"--export_dir={tmp_path}",
                   "--quantize=dynamic") == 2
    assert "--quantize applies to --format=tflite only" in capsys.readouterr().err
    assert not os.listdir(tmp_path)  # nothing half-written
