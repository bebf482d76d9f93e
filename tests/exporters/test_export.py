"""The exported SavedModel: layout, TF-Serving-safe ops, and exactly the in-process translations."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf

from conftest import run_cli
from tfnmt import model_dir
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.translator import Translator
from tfnmt.errors import ConfigError
from tfnmt.training import checkpoints
from tfnmt.exporters import saved_model
from tfnmt.parts import PARTS, in_parts

SENTENCES = ["the red dog sees a bird", "a cat", "", "the old man runs", "big house"]


@pytest.fixture(scope="module")
def exported(trained_model, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("export"))
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={base}",
                   "--beam_size=3", "--n_best=3", "--export_name=tiny") == 0
    return base, os.path.join(base, "tiny", "1")


@pytest.mark.slow
def test_a_new_version_traces_each_signatures_search_once_and_says_how_tf_serving_serves_it(
        trained_model, exported, monkeypatch, caplog):
    """A second export of `tiny` (default decoding): version 2 beside 1 with no staging left
    over; it traced its one signature's search once; and it logged the TF Serving command that
    serves it as tfnmt would. (One export checks all three: each took one of its own.)"""
    import logging

    from tfnmt.cli.export import tf_serving_command
    base, path = exported
    assert os.path.isfile(os.path.join(path, "saved_model.pb"))
    # Saving the translator's own tf.function traced it a second time, outside the stored
    # derivations, into a graph no signature used: 1.6 s more per export, 17% more graph. And
    # the search function, which made the derived weights' variables in its first trace, was
    # traced again (tf.function's rule for a function that creates variables).
    traces = []
    for method in ("_translate", "_search"):
        monkeypatch.setattr(Translator, method, lambda self, *args, run=getattr(
            Translator, method), name=method: traces.append(name) or run(self, *args))
    with caplog.at_level(logging.INFO):
        assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={base}",
                       "--export_name=tiny") == 0
    assert sorted(os.listdir(os.path.join(base, "tiny"))) == ["1", "2"]  # no staging left over
    info = saved_model.read_export_info(os.path.join(base, "tiny", "2"))
    assert list(info["signatures"]) == ["serving_default"]
    assert traces == ["_translate", "_search"]
    tiny, version = os.path.join(base, "tiny"), tf.__version__.split("-")[0]
    expected = (f"docker run --rm -p 8501:8501 -v {tiny}:/models/tiny -e MODEL_NAME=tiny "
                f"-e TF_CPU_ALLOCATOR_USE_BFC=true tensorflow/serving:{version} "
                "--tensorflow_intra_op_parallelism=1")
    assert f"(one thread per op: for up to 4 cores): {expected}" in caplog.text
    assert tf_serving_command(os.path.join(tiny, "2"), "tiny", xla=True) == (
        expected + " --xla_cpu_compilation_enabled=true")


def test_graph_uses_only_core_and_tensorflow_text_ops(exported):
    ops = saved_model.graph_ops(exported[1])
    assert {"SentencepieceTokenizeOp", "SentencepieceDetokenizeOp", "While"} <= ops
    assert ops <= saved_model.servable_ops()
    assert not ops & {"PyFunc", "EagerPyFunc", "PyFuncStateless"}


def test_python_ops_are_detected(tmp_path):
    class WithPython(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def f(self, x):
            return tf.py_function(lambda t: t, [x], tf.string)
    tf.saved_model.save(WithPython(), str(tmp_path))
    assert "EagerPyFunc" in saved_model.disallowed_ops(str(tmp_path))


def test_signature(exported):
    loaded = tf.saved_model.load(exported[1])
    signature = loaded.signatures["serving_default"]
    assert list(signature.structured_input_signature[1]) == ["text"]
    assert set(signature.structured_outputs) == {"translations", "scores"}


@pytest.mark.slow
def test_fresh_process_reproduces_in_process_translations(trained_model, exported):
    script = (
        "import json, sys, tensorflow as tf, tensorflow_text\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "out = m.signatures['serving_default'](text=tf.constant(json.loads(sys.argv[2])))\n"
        "n = m.signatures['n_best'](text=tf.constant(json.loads(sys.argv[2])))\n"
        "print(json.dumps({'t': [t.decode() for t in out['translations'].numpy()],"
        " 's': out['scores'].numpy().tolist(),"
        " 'nt': [[t.decode() for t in row] for row in n['translations'].numpy()],"
        " 'ns': n['scores'].numpy().tolist()}))\n")
    result = subprocess.run([sys.executable, "-c", script, exported[1], json.dumps(SENTENCES)],
                            capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-2000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])

    # The export used the CLI's decoding defaults, which are Translator's defaults.
    translator = _translator(trained_model, beam_size=3, n_best=3)
    local = translator.translate(tf.constant(SENTENCES))
    assert served["t"] == [t.decode() for t in local["translations"].numpy()]
    assert served["s"] == local["scores"].numpy().tolist()
    assert served["t"][2] == "" and served["s"][2] == 0.0
    assert all(served["t"][i] for i in (0, 1, 3, 4))
    # The n_best signature: the same hypotheses as in-process, best first, the 1-best first.
    local = translator.translate_n_best(tf.constant(SENTENCES), 3)
    assert served["nt"] == [[t.decode() for t in row] for row in local["translations"].numpy()]
    assert served["ns"] == local["scores"].numpy().tolist()
    for row, scores, best in zip(served["nt"], served["ns"], served["t"]):
        assert row[0] == best and scores == sorted(scores, reverse=True)
    assert len(set(served["nt"][0])) == 3


def _translator(trained_model, **options):
    _, model, source_vocab, target_vocab = model_dir.load(trained_model)
    checkpoints.restore_model(model, checkpoints.resolve(trained_model))
    return Translator(model, source_vocab, target_vocab, DecodingOptions(**options))


def test_the_export_decodes_with_what_it_derived_from_the_weights_once(trained_model, exported):
    """The tied output matrix's transpose, each decoder layer's self-attention projections
    side by side and its feed-forward's blocks, all in parts (tfnmt/parts.py), are
    variables of the export, made once from the weights (decoding/shared.stored_derivations),
    and the signatures read each of them."""
    loaded = tf.saved_model.load(exported[1])
    decoder = _translator(trained_model).model.decoder
    transposed = list(in_parts(tf.transpose(decoder.embedding.embeddings)))
    projections = [tf.nest.flatten(layer.self_attention.fused_projection())
                   for layer in decoder.layers]
    ffns = [tf.nest.flatten(layer.ffn.parts()) for layer in decoder.layers]
    expected = transposed + [part for parts in projections + ffns for part in parts]
    stored = list(loaded.derived_weights)
    # Per layer: the projection's kernel and bias blocks; each feed-forward block's inner
    # kernel, bias and outer rows, and the outer bias.
    assert len(stored) == len(expected) == PARTS + len(decoder.layers) * (5 * PARTS + 1)

    def stored_as(value):
        (match,) = [v for v in stored if v.shape == value.shape
                    and (v.numpy() == value.numpy()).all()]
        return match

    def scores():
        return loaded.signatures["serving_default"](text=tf.constant(SENTENCES))["scores"].numpy()

    # A block of the transpose, of a projection's kernel and of a feed-forward, an outer bias.
    for value in (transposed[-1], projections[0][0], ffns[-1][0], ffns[-1][-1]):
        variable = stored_as(value)
        before = scores()
        variable.assign(variable * 2.0)
        after = scores()
        variable.assign(value)
        assert all(b != a for b, a in zip(before, after) if b != 0.0)


@pytest.mark.slow
def test_exporting_leaves_the_translator_decoding_with_its_current_weights(trained_model,
                                                                           tmp_path):
    """The export's stored transpose never reaches the caller's translator, which (in training's
    validation) decodes again after its weights change."""
    translator = _translator(trained_model, beam_size=2)
    saved_model.export(translator, str(tmp_path), "m")
    matrix = translator.model.decoder.embedding.embeddings
    before = translator.translate(tf.constant(SENTENCES))["scores"].numpy()
    matrix.assign(matrix * 2.0)
    after = translator.translate(tf.constant(SENTENCES))["scores"].numpy()
    fresh = Translator(translator.model, translator.source_vocab, translator.target_vocab,
                       translator.options)  # (a tf.function method holds its object weakly)
    fresh = fresh.translate(tf.constant(SENTENCES))["scores"].numpy()
    assert after.tolist() == fresh.tolist() and after.tolist() != before.tolist()


def test_existing_version_is_refused(trained_model, exported, capsys):
    base, _ = exported
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={base}",
                   "--export_name=tiny", "--export_version=1") == 2
    assert "exists already" in capsys.readouterr().err


def test_export_records_its_decoding_options_and_older_names_still_load(exported, tmp_path):
    info = saved_model.read_export_info(exported[1])
    assert info["decoding"] == DecodingOptions(beam_size=3, n_best=3).record()
    assert info["signatures"] == {"serving_default": {"beam_size": 3}, "n_best": {"beam_size": 3}}
    # An export written before max_source_length became max_input_length (and penalty_mode
    # length_penalty_mode), without the fields added since: it decoded with no minimum length.
    old = shutil.copytree(exported[1], tmp_path / "old")
    info["decoding"] = {"beam_size": 3, "length_penalty": 0.6, "penalty_mode": "length",
                        "max_length_ratio": 1.5, "max_length_offset": 10,
                        "max_decode_length": 256, "max_source_length": 77, "long_input": "chunk"}
    with open(old / saved_model.EXPORT_INFO, "w") as f:
        json.dump(info, f)
    translator = saved_model.SavedModelTranslator(str(old))
    assert translator.options == DecodingOptions(beam_size=3, length_penalty_mode="length",
                                                 max_input_length=77, min_decode_length=0)
    assert translator.beam_size == 3


def _n_best(text):
    """[(index, translation, score)] of `translate --n_best` output."""
    rows = [line.split(" ||| ") for line in text.splitlines()]
    assert all(len(row) == 3 for row in rows), text
    return [(int(i), t, float(s)) for i, t, s in rows]


@pytest.mark.slow
def test_translate_n_best_writes_each_sentences_hypotheses_best_first(trained_model, exported,
                                                                      tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n")
    capsys.readouterr()
    assert run_cli("translate", f"--model_dir={trained_model}", "--beam_size=3",
                   f"--input={source}") == 0
    best = capsys.readouterr().out.splitlines()
    for backend in ([f"--model_dir={trained_model}", "--beam_size=3"],
                    [f"--saved_model={exported[1]}"]):
        assert run_cli("translate", *backend, "--n_best=2", f"--input={source}") == 0
        rows = _n_best(capsys.readouterr().out)
        assert [i for i, _, _ in rows] == [i for i in range(len(SENTENCES)) for _ in range(2)]
        for i in range(len(SENTENCES)):
            (_, first, s1), (_, second, s2) = rows[2 * i: 2 * i + 2]
            assert first == best[i] and s1 >= s2
            assert first != second or not SENTENCES[i]


@pytest.mark.parametrize("args, message", [
    (("--beam_size=2", "--n_best=3"), "--n_best=3 exceeds --beam_size=2"),
    (("--beam_size=4", "--n_best=2", "--sampling"), "--n_best needs beam search"),
])
def test_n_best_beyond_the_beam_is_one_line(trained_model, args, message, capsys):
    assert run_cli("translate", f"--model_dir={trained_model}", *args, "--input=/dev/null") == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_n_best_beyond_the_exports_is_one_line(exported, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("a cat\n")
    assert run_cli("translate", f"--saved_model={exported[1]}", "--n_best=4",
                   f"--input={source}") == 2
    assert ("keeps 3 hypotheses per sentence; export it with --n_best=4 or more"
            in capsys.readouterr().err.strip().splitlines()[-1])


@pytest.mark.slow
def test_sampling_is_seeded(trained_model, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES * 2) + "\n")

    def translate(*flags):
        capsys.readouterr()
        assert run_cli("translate", f"--model_dir={trained_model}", f"--input={source}",
                       *flags) == 0
        return capsys.readouterr().out.splitlines()
    first = translate("--sampling", "--sampling_seed=1")
    assert first == translate("--sampling", "--sampling_seed=1")
    assert first != translate("--sampling", "--sampling_seed=2")
    # k = 1 is greedy search (equal without a length penalty, see decoding/beam_search.py).
    assert (translate("--sampling", "--sampling_topk=1", "--length_penalty=0")
            == translate("--beam_size=1", "--length_penalty=0"))


def test_one_factory_opens_every_backend_behind_one_interface(trained_model, exported):
    from tfnmt.decoding.backend import Backend
    from tfnmt.errors import ConfigError
    from tfnmt.serving import backends
    from tfnmt.serving.client import RemoteTranslator
    from tfnmt.serving.options import ClientOptions, ExportedModelOptions
    config, backend = backends.open_backend(export=ExportedModelOptions(saved_model=exported[1]))
    assert isinstance(backend, saved_model.SavedModelTranslator) and config["model"] == "transformer"
    config, backend = backends.open_backend(model_dir=trained_model,
                                            options=DecodingOptions(beam_size=2))
    assert isinstance(backend, Translator) and backend.beam_size == 2 and config["model"]
    config, backend = backends.open_backend(client=ClientOptions(server="http://127.0.0.1:9",
                                                                  served_model="tiny"))
    assert isinstance(backend, RemoteTranslator) and config is None
    assert isinstance(backend, Backend)
    with pytest.raises(ConfigError, match="drop --saved_model/--model_dir"):
        backends.open_backend(client=ClientOptions(server="http://127.0.0.1:9"),
                              model_dir=trained_model)


def test_a_tflite_export_refuses_n_best(trained_model, tmp_path, capsys):
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={tmp_path}",
                   "--format=tflite", "--n_best=2") == 2
    assert "--n_best applies to SavedModel exports" in capsys.readouterr().err
    assert not os.listdir(tmp_path)


@pytest.mark.slow
def test_min_decode_length_leaves_no_translation_empty(trained_model, corpus, tmp_path, capsys):
    """The tiny model's wide beam without a length penalty (which favours short hypotheses)
    translates some test sentences into nothing; with the default --min_decode_length none, and
    the export agrees."""
    source = os.path.join(corpus, "test.en")

    def translate(*flags):
        assert run_cli("translate", *flags, f"--input={source}") == 0
        out, err = capsys.readouterr()
        return out.splitlines(), err
    beam = ["--beam_size=16", "--length_penalty=0"]
    lines, err = translate(f"--model_dir={trained_model}", *beam, "--min_decode_length=0")
    empty = sum(not line for line in lines)
    assert len(lines) == 30 and empty > 0
    assert f"{empty} of 30 translations are empty where the source is not" in err
    lines, err = translate(f"--model_dir={trained_model}", *beam)
    assert all(lines) and "translations are empty" not in err
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={tmp_path}",
                   *beam, "--export_name=m") == 0
    capsys.readouterr()
    assert translate(f"--saved_model={tmp_path / 'm' / '1'}")[0] == lines


@pytest.mark.slow
def test_a_signature_the_export_lacks_is_refused_from_its_record_without_loading_it(
        exported, monkeypatch):
    _, path = exported
    monkeypatch.setattr(saved_model, "_load", lambda path: pytest.fail("loaded the SavedModel"))
    with pytest.raises(ConfigError) as refused:
        saved_model.SavedModelTranslator(path, signature="beam")
    assert str(refused.value) == f"{path} has no signature 'beam'; it has n_best, serving_default"
