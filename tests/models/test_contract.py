"""What every registered model, and the hybrid of every encoder x decoder pair the part registries
allow, must do (sizes in contract.TINY and contract.PART_SIZES)."""


import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import events, run_cli, tiny_train_flags
from contract import (EXPORTED, PAIRS, PART_SIZES, TINY, assert_incremental_equals_teacher_forcing,
                      decode_within_the_limit_and_compare_exports, logits_of, tiny_model,
                      untrained_models)
from tfnmt.cli import info
from tfnmt.data.vocab import PAD_ID
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.translator import Translator
from tfnmt.errors import ConfigError
from tfnmt.exporters import tflite
from tfnmt.layers.part import DECODERS, ENCODERS
from tfnmt.models import catalog
from tfnmt.decoding.shared import split_shared, tile_hypotheses, with_shared
from tfnmt.training import checkpoints, step
from tfnmt.training.checkpoints import Checkpoints, trackables
from tfnmt.training.options import TrainOptions
from tfnmt.training.optimizers import make_optimizer

SOURCE = tf.constant([[5, 6, 7, 3, 0, 0], [8, 9, 3, 0, 0, 0]])
TARGET_IN = tf.constant([[2, 10, 11, 12, 13, 14], [2, 13, 14, 0, 0, 0]])
TARGET_OUT = tf.constant([[10, 11, 12, 13, 14, 3], [13, 14, 3, 0, 0, 0]])


# Every registered model, then every pair of parts as a hybrid ("hybrid:ENCODER+DECODER").
CONTRACT = sorted(TINY) + PAIRS


def test_every_registered_model_has_a_contract_size():
    assert sorted(TINY) == catalog.names()


def test_every_registered_part_has_a_contract_size_and_every_pair_is_covered():
    assert sorted(PART_SIZES["encoder"]) == sorted(ENCODERS)
    assert sorted(PART_SIZES["decoder"]) == sorted(DECODERS)
    # Only a decoder that attends to the source's states is kept from a sentence encoder.
    excluded = {(e, d) for e in ENCODERS for d in DECODERS} - {
        tuple(name[len("hybrid:"):].split("+")) for name in PAIRS}
    assert excluded == {(e, d) for e, encoder in ENCODERS.items() if not encoder.GIVES_SEQUENCE
                        for d, decoder in DECODERS.items() if decoder.READS == "sequence"}
    assert excluded and ("transformer", "luong") not in excluded


@pytest.mark.parametrize("name", CONTRACT)
def test_building_a_model_runs_its_forward_pass_once_eagerly(name, monkeypatch):
    # Keras would first trace call() symbolically to create the variables, doubling the cost of
    # every model build (a paper-size one takes seconds).
    cls, calls = catalog.get(name.split(":")[0]), []
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
    step.compile(model, make_optimizer(TrainOptions(learning_rate=1e-3, warmup_steps=0,
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


@pytest.mark.slow
@pytest.mark.parametrize("name, policy",
                         [(name, "mixed_float16") for name in CONTRACT]
                         + [(name, "mixed_bfloat16") for name in _BFLOAT16],
                         indirect=["policy"])
def test_mixed_precision_trains_with_finite_loss_and_logits_and_models_resume(name, policy, tmp_path):
    model = _compiled(name)
    assert model.compute_dtype == policy.split("_")[1]
    scaled = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert scaled == (policy == "mixed_float16")
    # Saving and restoring the weights and the loss scale is one code path (the trainer's
    # trackables) whatever the layers and the compute dtype: checked on each registered model
    # under float16, not again under bfloat16 nor on each pair of parts, whose own risks (an
    # overflow, a dtype where two parts meet) one step shows.
    resumes = name in TINY and scaled
    loss = _train(model, 3 if resumes else 1)
    if resumes:
        # A loss scale that training could not have reached, so resuming must have read it.
        model.optimizer.dynamic_scale.assign(1024.0)
        saved = Checkpoints(str(tmp_path), trackables(model, model.optimizer))
        saved.save(3)
        resumed = _compiled(name)
        assert Checkpoints(str(tmp_path), trackables(resumed, resumed.optimizer)).restore_latest()
        # (A float16 step whose gradients overflow is skipped: iterations may be below 3.)
        assert (int(resumed.optimizer.iterations.numpy())
                == int(model.optimizer.iterations.numpy()) > 0)
        assert float(resumed.optimizer.dynamic_scale.numpy()) == 1024.0
        for a, b in zip(model.weights, resumed.weights):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        loss += _train(resumed, 1)
        model = resumed
    assert np.all(np.isfinite(loss)), loss
    logits = logits_of(model({"source": SOURCE, "target_in": TARGET_IN}))
    assert logits.dtype == policy.split("_")[1]
    assert np.all(np.isfinite(tf.cast(logits, tf.float32).numpy()))


@pytest.mark.slow
def test_model_trained_under_mixed_float16_resumes_and_translates_the_same_exported(corpus, tmp_path):
    model_dir_path = str(tmp_path / "model")
    flags = [f for f in tiny_train_flags(corpus, model_dir_path, steps=20)
             if not f.startswith(("--train_steps", "--save_every", "--log_every"))]
    for steps in (10, 20):  # the second run resumes from the first one's checkpoint
        assert run_cli("train", *flags, f"--train_steps={steps}", "--save_every=10",
                       "--log_every=5", "--precision=mixed_float16") == 0
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


@pytest.fixture(scope="module")
def built():
    """built(name): tiny_model(name), built once per model for the tests below that only read
    it (its config, its parameters, its decoding; none changes a weight)."""
    models = {}

    def get(name):
        if name not in models:
            models[name] = tiny_model(name)
        return models[name]
    return get


@pytest.mark.slow
@pytest.mark.parametrize("name", CONTRACT)
def test_config_round_trip_builds_the_same_model(name, built):
    model = built(name)
    clone = type(model).from_config(model.get_config())
    clone.build_with_dummy_batch()
    assert clone.get_config() == model.get_config()

    def shapes(m):  # variable paths below the model's own (auto-numbered) name
        return [(v.path.split("/", 1)[1], tuple(v.shape)) for v in m.weights]
    assert shapes(clone) == shapes(model)


@pytest.mark.parametrize("name", CONTRACT)
def test_info_counts_every_parameter_in_a_named_component(name, built):
    model = built(name)
    counts = info.parameter_counts(model)
    assert counts["other"] == 0, [v.path for v in model.trainable_weights]
    assert counts["total"] == sum(int(np.prod(v.shape)) for v in model.trainable_weights) > 0


@pytest.fixture(scope="module")
def untrained(trained_model):
    """(source vocab, target vocab, {name: every registered model at its TINY size}), built
    once for the SavedModel and the TFLite checks (neither changes a weight)."""
    return untrained_models(trained_model, sorted(TINY))




@pytest.mark.slow
def test_every_model_decodes_within_the_length_limit_and_its_export_translates_alike_in_a_fresh_process(
        untrained, tmp_path):
    decode_within_the_limit_and_compare_exports(*untrained, tmp_path, exported=EXPORTED)


@pytest.mark.slow
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
AUTOREGRESSIVE = [name for name in CONTRACT if catalog.get(name.split(":")[0]).autoregressive]


@pytest.mark.parametrize("name", AUTOREGRESSIVE)
def test_incremental_decoding_equals_teacher_forcing(name, built):
    assert_incremental_equals_teacher_forcing(built(name), SOURCE, TARGET_IN)


@pytest.mark.parametrize("name", AUTOREGRESSIVE)
def test_the_beam_search_reorders_only_state_that_differs_between_hypotheses(name, built):
    # Beam search gathers every state tensor at every step; one that two hypotheses of the same
    # sentence share whatever they chose (the source's attention keys, say) is a wasted copy per
    # step and belongs in decoding_memory.
    model = built(name)
    rows, shared = split_shared(model.decoding_memory(model.encode(SOURCE[:1])))
    memory = with_shared(tile_hypotheses(rows, 2), shared)
    state = model.initial_state(memory)
    for time, ids in enumerate([[10, 11], [12, 12]]):
        _, state = model.step(tf.constant(ids), time, state, memory)
    shared = [path for path, tensor in keras.tree.flatten_with_path(state)
              if np.array_equal(tensor[0].numpy(), tensor[1].numpy())]
    assert shared == []
