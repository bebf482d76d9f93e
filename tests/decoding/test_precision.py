"""--decode_dtype=bfloat16 (decoding/precision.py): a translator decodes a bfloat16 copy of the
model's weights, rounded once; its export holds that copy and translates exactly as it does."""

import dataclasses
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnmt.decoding import precision
from tfnmt.decoding.options import DecodingOptions
from tfnmt.errors import ConfigError
from tfnmt.exporters import saved_model
from tfnmt.models import catalog
from tfnmt.serving.backends import from_checkpoint

from conftest import run_cli
from contract import assert_incremental_equals_teacher_forcing, tiny_model
from helpers.cpu import pretend_cpu

BF16 = DecodingOptions(beam_size=3, decode_dtype="bfloat16")
SENTENCES = ["a b c", "d e f g h", "b a", "c c d e f g a b", ""]


@pytest.fixture(scope="module")
def translators(trained_model):
    _, float32 = from_checkpoint(trained_model, "", dataclasses.replace(BF16,
                                                                        decode_dtype="float32"))
    _, bfloat16 = from_checkpoint(trained_model, "", BF16)
    return float32, bfloat16


def test_the_copy_holds_the_float32_weights_rounded_and_the_model_is_left_as_it_was(translators):
    float32, bfloat16 = translators
    originals = {w.path: w.numpy() for w in float32.model.weights}
    assert bfloat16.model is not bfloat16._given_model
    assert {w.dtype for w in bfloat16._given_model.weights} == {"float32"}
    assert {w.dtype for w in bfloat16.model.weights} == {"bfloat16"}
    assert len(bfloat16.model.weights) == len(originals)
    for weight in bfloat16.model.weights:
        rounded = tf.cast(tf.cast(originals[weight.path], tf.bfloat16), tf.float32).numpy()
        np.testing.assert_array_equal(tf.cast(weight, tf.float32).numpy(), rounded)
        np.testing.assert_array_equal(
            dict((w.path, w.numpy()) for w in bfloat16._given_model.weights)[weight.path],
            originals[weight.path])


@pytest.mark.slow
def test_bfloat16_scores_the_float32_translations_as_float32_does_to_rounding(translators):
    float32, bfloat16 = translators
    text = tf.constant(SENTENCES[:-1])
    targets = float32.translate(text)["translations"]
    exact = float32.score_signature(text, targets)["log_prob"].numpy()
    rounded = bfloat16.score_signature(text, targets)["log_prob"].numpy()
    assert rounded.dtype == np.float32
    # bfloat16 keeps 8 bits of mantissa: a few tenths of a percent per product.
    np.testing.assert_allclose(rounded, exact, rtol=0.05, atol=0.05)
    assert not np.array_equal(rounded, exact)  # it did decode in bfloat16


def test_with_options_starts_from_the_float32_model(translators):
    float32, bfloat16 = translators
    back = bfloat16.with_options(float32.options)
    assert back.model is bfloat16._given_model
    text = tf.constant(SENTENCES)
    for key in ("translations", "scores"):
        np.testing.assert_array_equal(back.translate(text)[key].numpy(),
                                      float32.translate(text)[key].numpy())


def test_with_options_in_the_same_dtype_shares_the_copy(translators):
    _, bfloat16 = translators
    sibling = bfloat16.with_options(dataclasses.replace(BF16, n_best=2))
    assert sibling.model is bfloat16.model and sibling._given_model is bfloat16._given_model


@pytest.mark.slow
def test_an_ensemble_decodes_each_member_in_bfloat16(trained_model, translators):
    _, bfloat16 = translators
    _, ensemble = from_checkpoint([trained_model, trained_model], "", BF16)
    assert [{w.dtype for w in m.weights} for m in ensemble.model.models] == [{"bfloat16"}] * 2
    # Two equal members average to one: the ensemble translates as the member alone.
    text = tf.constant(SENTENCES)
    np.testing.assert_array_equal(ensemble.translate(text)["translations"].numpy(),
                                  bfloat16.translate(text)["translations"].numpy())


@pytest.mark.slow
def test_the_export_holds_bfloat16_weights_and_translates_as_the_translator(translators,
                                                                            tmp_path):
    _, bfloat16 = translators
    path = saved_model.export(bfloat16, str(tmp_path), "bf16", 1)
    assert saved_model.read_export_info(path)["decoding"]["decode_dtype"] == "bfloat16"
    exported = saved_model.SavedModelTranslator(path)
    assert {v.dtype for v in exported.module.model_variables} == {tf.bfloat16}
    text = tf.constant(SENTENCES)
    ours, theirs = bfloat16.translate(text), exported.translate(text)
    np.testing.assert_array_equal(theirs["translations"].numpy(), ours["translations"].numpy())
    np.testing.assert_allclose(theirs["scores"].numpy(), ours["scores"].numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["transformer", "deep_transformer"])
def test_a_bfloat16_copy_steps_with_float32_caches_as_it_teacher_forces(name):
    """A Transformer decoder's steps keep their caches and attention products in float32
    whatever the compute dtype (BUILD.md, the model contract); a bfloat16 copy (deep_transformer:
    with the multi-layer attention's lower caches) still steps to its teacher-forced logits,
    to bfloat16's rounding of its products."""
    # Seeded: unseeded weights failed the tolerance once in a full run (one logit of 480 off by
    # 0.055), none of 12 seeds tried did.
    keras.utils.set_random_seed(0)
    model = precision.in_dtype(tiny_model(name, dropout=0.0), "bfloat16")
    source = tf.constant([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]])
    target_in = tf.constant([[2, 10, 11, 12], [2, 13, 14, 0]])
    state = assert_incremental_equals_teacher_forcing(model, source, target_in, atol=0.05)
    assert {t.dtype for t in tf.nest.flatten(state)} == {tf.float32}


def test_a_recurrent_model_is_refused_in_one_line_and_the_policy_restored():
    from tfnmt.decoding import precision
    model = catalog.get("deeplau")(50, 60, encoder_layers=2, decoder_layers=2, embed_dim=8,
                                   hidden_dim=12, attention_dim=6)
    model.build_with_dummy_batch()
    with pytest.raises(ConfigError, match=r"^--decode_dtype=bfloat16: model 'deeplau' cannot be "
                                          r"built in bfloat16 \(.+\); decode it in float32$"):
        precision.in_dtype(model, "bfloat16")
    assert keras.mixed_precision.global_policy().name == "float32"


def test_training_in_bfloat16_refuses_a_recurrent_model_before_its_first_step(corpus, tmp_path,
                                                                               capsys):
    """Not after the last, when the test sets are decoded."""
    model_dir = str(tmp_path / "gru")
    assert run_cli("train", f"--model_dir={model_dir}", f"--data=text:{corpus}",
                   "--model=deepgru", "--encoder_layers=1", "--decoder_layers=1",
                   "--embed_dim=8", "--hidden_dim=8", "--attention_dim=8", "--vocab_size=60",
                   "--vocab_type=word", "--batch_tokens=256", "--train_steps=2",
                   "--bleu_sentences=0", "--decode_dtype=bfloat16") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("tfnmt train: error: --decode_dtype=bfloat16: model 'deepgru' "
                              "cannot be built in bfloat16"), err
    assert not os.path.isdir(os.path.join(model_dir, "ckpt"))


@pytest.mark.parametrize("format_, message", [
    ("tflite", "--decode_dtype=bfloat16 applies to SavedModel exports"),
    ("ctranslate2", "--decode_dtype does not apply to --format=ctranslate2")])
def test_other_export_formats_refuse_bfloat16(trained_model, tmp_path, capsys, format_, message):
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={tmp_path}",
                   f"--format={format_}", "--decode_dtype=bfloat16") == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_validation_decodes_the_weights_being_trained_whatever_decode_dtype(trained_model,
                                                                           corpus):
    from tfnmt.data.sources import DataSpec
    from tfnmt.training import trainer
    from tfnmt.training.options import TrainOptions
    translator = from_checkpoint(trained_model, "", DecodingOptions())[1]
    validator = trainer._validator(
        translator.model, DataSpec(f"text:{corpus}", "en", "de"), "valid", 10,
        (translator.source_vocab, translator.target_vocab), {"batch_size": 4},
        TrainOptions(bleu_sentences=5), BF16)
    # A copy made once would not follow the training of the model's weights.
    assert validator.translator.model is translator.model
    assert validator.translator.options.beam_size == BF16.beam_size


@pytest.mark.slow
@pytest.mark.parametrize("flags, dtype", [("avx2 fma", "float32"),
                                          ("avx2 avx512f avx512_bf16", "bfloat16")])
def test_auto_decodes_in_bfloat16_only_on_a_cpu_that_computes_it(trained_model, monkeypatch,
                                                                  tmp_path, flags, dtype):
    pretend_cpu(monkeypatch, flags)
    _, auto = from_checkpoint(trained_model, "", dataclasses.replace(BF16, decode_dtype="auto"))
    assert auto.options.decode_dtype == dtype  # what it decodes with, as an export records it
    assert {w.dtype for w in auto.model.weights} == {dtype}
    assert (auto.model is auto._given_model) == (dtype == "float32")
    path = saved_model.export(auto, str(tmp_path), "auto", 1)
    assert saved_model.read_export_info(path)["decoding"]["decode_dtype"] == dtype


def test_auto_decodes_a_recurrent_model_in_float32_on_a_bfloat16_cpu(monkeypatch):
    pretend_cpu(monkeypatch, "avx512_bf16")
    model = catalog.get("deeplau")(50, 60, encoder_layers=2, decoder_layers=2, embed_dim=8,
                                   hidden_dim=12, attention_dim=6)
    model.build_with_dummy_batch()
    chosen, dtype = precision.decoding_model(model, "auto")
    assert chosen is model and dtype == "float32"
