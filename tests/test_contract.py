"""What every registered model must do, run over the whole registry (sizes in contract.TINY)."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO, events, run_cli, tiny_train_flags
from contract import TINY, assert_incremental_equals_teacher_forcing, logits_of, tiny_model
from tfnmt.cli import info
from tfnmt.data.vocab import PAD_ID, load_vocabs
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.translator import Translator
from tfnmt.errors import ConfigError
from tfnmt.exporters import saved_model, tflite
from tfnmt.models import catalog
from tfnmt.decoding.memory import split_shared, with_shared
from tfnmt.training import checkpoints
from tfnmt.training.checkpoints import Checkpoints, trackables
from tfnmt.training.options import TrainOptions
from tfnmt.training.optimizers import make_optimizer

SOURCE = tf.constant([[5, 6, 7, 3, 0, 0], [8, 9, 3, 0, 0, 0]])
TARGET_IN = tf.constant([[2, 10, 11, 12, 13, 14], [2, 13, 14, 0, 0, 0]])
TARGET_OUT = tf.constant([[10, 11, 12, 13, 14, 3], [13, 14, 3, 0, 0, 0]])


def test_every_registered_model_has_a_contract_size():
    assert sorted(TINY) == catalog.names()


@pytest.mark.parametrize("name", sorted(TINY))
def test_building_a_model_runs_its_forward_pass_once_eagerly(name, monkeypatch):
    # Keras would first trace call() symbolically to create the variables, doubling the cost of
    # every model build (a paper-size one takes seconds).
    cls, calls = catalog.get(name), []
    call = cls.call
    monkeypatch.setattr(cls, "call", lambda self, *args, **kwargs: (
        calls.append(tf.executing_eagerly()), call(self, *args, **kwargs))[1])
    assert tiny_model(name).count_params() > 0
    assert calls == [True]


@pytest.fixture
def policy(request):
    keras.mixed_precision.set_global_policy(request.param)
    yield request.param
    keras.mixed_precision.set_global_policy("float32")


def _compiled(name):
    model = tiny_model(name)
    # As the trainer does: under mixed_float16 Keras wraps it in a LossScaleOptimizer.
    # Eagerly: tracing a train step per model and policy would cost most of this test's time.
    model.compile(optimizer=make_optimizer(TrainOptions(learning_rate=1e-3, warmup_steps=0,
                                                                 clip_norm=1.0)),
                  run_eagerly=True)
    model.optimizer.build(model.trainable_variables)
    return model


def _train(model, steps):
    batches = tf.data.Dataset.from_tensors(({"source": SOURCE, "target_in": TARGET_IN},
                                            TARGET_OUT)).repeat(steps)
    return model.fit(batches, epochs=1, verbose=0).history["loss"]


# Every model under mixed_float16, whose float16 range and loss scaling break models one by one.
# Under bfloat16 (float32's range, no loss scale) two are left out that only combine code run
# here by others: hybrid (the Transformer's encoder layers, DenseNMT's decoder) and deepgru
# (DeepLAU's network with Keras's GRUCell, which gru_encdec's encoder runs).
_BFLOAT16 = sorted(set(TINY) - {"hybrid", "deepgru"})


@pytest.mark.parametrize("name, policy",
                         [(name, "mixed_float16") for name in sorted(TINY)]
                         + [(name, "mixed_bfloat16") for name in _BFLOAT16],
                         indirect=["policy"])
def test_mixed_precision_trains_saves_and_resumes_with_finite_loss_and_logits(name, policy, tmp_path):
    model = _compiled(name)
    assert model.compute_dtype == policy.split("_")[1]
    loss = _train(model, 3)
    scaled = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert scaled == (policy == "mixed_float16")
    if scaled:
        # A loss scale that training could not have reached, so resuming must have read it.
        model.optimizer.dynamic_scale.assign(1024.0)
    saved = Checkpoints(str(tmp_path), trackables(model, model.optimizer))
    saved.save(3)

    resumed = _compiled(name)
    assert Checkpoints(str(tmp_path), trackables(resumed, resumed.optimizer)).restore_latest()
    # (A float16 step whose gradients overflow is skipped: iterations may be below 3.)
    assert int(resumed.optimizer.iterations.numpy()) == int(model.optimizer.iterations.numpy()) > 0
    if scaled:
        assert float(resumed.optimizer.dynamic_scale.numpy()) == 1024.0
    for a, b in zip(model.weights, resumed.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    loss += _train(resumed, 1)
    assert np.all(np.isfinite(loss)), loss
    logits = logits_of(resumed({"source": SOURCE, "target_in": TARGET_IN}))
    assert logits.dtype == policy.split("_")[1]
    assert np.all(np.isfinite(tf.cast(logits, tf.float32).numpy()))


def test_model_trained_under_mixed_float16_resumes_and_translates_the_same_exported(corpus, tmp_path):
    model_dir_path = str(tmp_path / "model")
    # No validation BLEU: decoding is checked below, against the export.
    flags = [f for f in tiny_train_flags(corpus, model_dir_path, steps=20)
             if not f.startswith(("--train_steps", "--save_every", "--log_every", "--bleu_sentences"))]
    for steps in (10, 20):  # the second run resumes from the first one's checkpoint
        assert run_cli("train", *flags, f"--train_steps={steps}", "--save_every=10",
                       "--log_every=5", "--bleu_sentences=0", "--precision=mixed_float16") == 0
    losses = [loss for _, loss in events(model_dir_path, "train/loss")]
    assert len(losses) == 4 and np.all(np.isfinite(losses)) and losses[-1] < losses[0], losses
    assert checkpoints.resolve(model_dir_path).endswith("ckpt-20")

    sentences = tmp_path / "in.txt"
    sentences.write_text("the red dog sees a bird\na cat\nthe old man runs\n")
    export_dir = str(tmp_path / "export")
    assert run_cli("export", f"--model_dir={model_dir_path}", f"--export_dir={export_dir}",
                   "--beam_size=3") == 0
    outputs = []
    # The export decodes with the beam it was exported with.
    for source in (f"--model_dir={model_dir_path}", "--beam_size=3"), \
            (f"--saved_model={export_dir}/transformer/1",):
        out = tmp_path / f"out{len(outputs)}.txt"
        assert run_cli("translate", *source, f"--input={sentences}", f"--output={out}") == 0
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == 3


@pytest.mark.parametrize("name", sorted(TINY))
def test_config_round_trip_builds_the_same_model(name):
    model = tiny_model(name)
    clone = type(model).from_config(model.get_config())
    clone.build_with_dummy_batch()
    assert clone.get_config() == model.get_config()

    def shapes(m):  # variable paths below the model's own (auto-numbered) name
        return [(v.path.split("/", 1)[1], tuple(v.shape)) for v in m.weights]
    assert shapes(clone) == shapes(model)


@pytest.mark.parametrize("name", sorted(TINY))
def test_info_counts_every_parameter_in_a_named_component(name):
    model = tiny_model(name)
    counts = info.parameter_counts(model)
    assert counts["other"] == 0, [v.path for v in model.trainable_weights]
    assert counts["total"] == sum(int(np.prod(v.shape)) for v in model.trainable_weights) > 0


SENTENCES = ["the red dog sees a bird", "a cat", "", "big house the old man runs a dog"]
# A limit that binds: an untrained model seldom ends a sentence by itself.
LIMITED = DecodingOptions(beam_size=2, max_length_ratio=0.0, max_length_offset=5,
                          max_decode_length=5)
# Reads "[path, [signature, ...]]" lines as the exports are written, so that loading and running
# one overlaps with exporting the next; answers one JSON line per export.
_LOAD_AND_TRANSLATE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops)
sentences = tf.constant(json.loads(sys.argv[1]))
for line in sys.stdin:
    path, signatures = json.loads(line)
    loaded = tf.saved_model.load(path)
    for signature in signatures:
        result = loaded.signatures[signature](text=sentences)
        print(json.dumps([f"{path}:{signature}",
                          [t.decode() for t in result["translations"].numpy()],
                          result["scores"].numpy().tolist()]), flush=True)
"""


@pytest.fixture(scope="module")
def untrained(trained_model):
    """(source vocab, target vocab, {name: every registered model at its TINY size}), built
    once for the SavedModel and the TFLite checks (neither changes a weight)."""
    source_vocab, target_vocab = load_vocabs(trained_model)
    models = {}
    for name in sorted(TINY):
        keras.utils.set_random_seed(0)
        models[name] = tiny_model(name, source_vocab.size, target_vocab.size)
    return source_vocab, target_vocab, models


def test_every_model_decodes_within_the_length_limit_and_its_export_translates_alike_in_a_fresh_process(
        untrained, tmp_path):
    source_vocab, target_vocab, models = untrained
    expected, reached = {}, {}
    out, err = open(tmp_path / "fresh.out", "w+"), open(tmp_path / "fresh.err", "w+")
    fresh = subprocess.Popen([sys.executable, "-c", _LOAD_AND_TRANSLATE, json.dumps(SENTENCES)],
                             stdin=subprocess.PIPE, stdout=out, stderr=err, text=True,
                             env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2"))
    try:
        for name, model in models.items():
            translator = Translator(model, source_vocab, target_vocab, LIMITED)
            source, lengths = translator.tokenize(tf.constant(SENTENCES))
            ids = translator.translate_ids(source, lengths)[0].numpy()
            produced = (ids != PAD_ID).sum(axis=1)
            if model.autoregressive:  # the limit counts the eos it forces
                assert produced.max() <= LIMITED.max_decode_length - 1, (name, ids)
                reached[name] = produced.max() == LIMITED.max_decode_length - 1
            else:  # a CTC model labels k states per source position, at most
                assert produced.max() <= model.hparams["split_factor"] * source.shape[1], (name, ids)
            path = saved_model.export(translator, str(tmp_path), name, 1)
            variants = translator.strategy.variants()
            try:
                fresh.stdin.write(json.dumps([path, list(variants)]) + "\n")
                fresh.stdin.flush()
            except BrokenPipeError:  # it died: its stderr, below, says why
                pass
            for signature, strategy in variants.items():
                result = translator._translate(tf.constant(SENTENCES), strategy)
                expected[f"{path}:{signature}"] = [[t.decode() for t in result["translations"].numpy()],
                                                   result["scores"].numpy().tolist()]
        try:
            fresh.stdin.close()
        except BrokenPipeError:
            pass
        returncode = fresh.wait(timeout=600)
    finally:
        if fresh.poll() is None:
            fresh.kill()
            fresh.wait()
    err.seek(0)
    assert returncode == 0, err.read()[-3000:]
    assert sum(reached.values()) >= len(reached) // 2, reached  # the limit was what stopped them
    out.seek(0)
    exported = {key: (translations, scores) for key, translations, scores in
                (json.loads(line) for line in out.read().splitlines() if line.startswith("["))}
    assert sorted(exported) == sorted(expected)
    for key, (translations, scores) in expected.items():
        assert exported[key][0] == translations, key
        np.testing.assert_allclose(exported[key][1], scores, rtol=1e-5, atol=1e-6, err_msg=key)


def test_every_model_runs_on_tflite_as_in_process(untrained, trained_model, tmp_path):
    """Every model's step converts to a builtin-ops flatbuffer that gives the in-process ids
    (greedy search: the beam search around the step is the same code for every model and
    test_tflite.py converts it); a CTC model's beam search is refused in one line (TensorFlow's
    CTC beam decoder has no TFLite builtin)."""
    source_vocab, target_vocab, models = untrained
    sentence = "the red dog sees a bird"
    for name, model in models.items():
        if not model.autoregressive:
            with pytest.raises(ConfigError, match="CTCBeamSearchDecoder"):
                tflite.convert(Translator(model, source_vocab, target_vocab,
                                          DecodingOptions(beam_size=2, max_decode_length=8)),
                               "none")
        translator = Translator(model, source_vocab, target_vocab,
                                DecodingOptions(beam_size=1, max_decode_length=8))
        phone = tflite.TFLiteTranslator(tflite.export(translator, trained_model, str(tmp_path), name, 1))
        source = phone.source_ids(sentence)
        ids, score = phone.translate_ids(source)
        expected_ids, expected_score = translator.translate_ids(tf.constant([source]),
                                                                tf.constant([len(source) - 1]))
        assert ids == [int(i) for i in expected_ids[0].numpy() if i != PAD_ID], name
        np.testing.assert_allclose(score, expected_score[0].numpy(), rtol=1e-4, atol=1e-5)


# --- incremental decoding ------------------------------------------------------------------------
AUTOREGRESSIVE = sorted(name for name in TINY if catalog.get(name).autoregressive)


@pytest.mark.parametrize("name", AUTOREGRESSIVE)
def test_incremental_decoding_equals_teacher_forcing(name):
    assert_incremental_equals_teacher_forcing(tiny_model(name), SOURCE, TARGET_IN)


@pytest.mark.parametrize("name", AUTOREGRESSIVE)
def test_the_beam_search_reorders_only_state_that_differs_between_hypotheses(name):
    # Beam search gathers every state tensor at every step; one that two hypotheses of the same
    # sentence share whatever they chose (the source's attention keys, say) is a wasted copy per
    # step and belongs in decoding_memory.
    model = tiny_model(name)
    rows, shared = split_shared(model.decoding_memory(model.encode(SOURCE[:1])))
    memory = with_shared(tf.nest.map_structure(lambda t: tf.repeat(t, 2, axis=0), rows), shared)
    state = model.initial_state(memory)
    for time, ids in enumerate([[10, 11], [12, 12]]):
        _, state = model.step(tf.constant(ids), time, state, memory)
    shared = [path for path, tensor in keras.tree.flatten_with_path(state)
              if np.array_equal(tensor[0].numpy(), tensor[1].numpy())]
    assert shared == []
