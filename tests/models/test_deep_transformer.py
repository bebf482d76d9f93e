"""The deep Transformer (Dou et al. 2018): aggregation and multi-layer attention in a model, the
diversity objective in training, the configuration, and a Multi30k overfit. The layers alone:
tests/layers/test_aggregation.py; the diversity alone: tests/objectives/test_diversity.py; warm
start from a plain Transformer: tests/training/test_warm_start.py."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import events
from contract import assert_incremental_equals_teacher_forcing, overfit_export_and_compare
from tfnmt.errors import ConfigError
from tfnmt.layers.multi_layer_attention import MultiLayerEncoderLayer
from tfnmt.models import catalog
from tfnmt.models import deep_transformer
from tfnmt.objectives.diversity import layer_diversity
from tfnmt.training.step import training_loss

SMALL = dict(encoder_layers=3, decoder_layers=4, d_model=16, ffn_dim=32, num_heads=2, dropout=0.0)
SOURCE = tf.constant([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]])
TARGET_IN = tf.constant([[2, 10, 11, 12, 13], [2, 13, 14, 0, 0]])
B, T, D = 2, 3, 8


def make(name="deep_transformer", **overrides):
    model = catalog.get(name)(50, 50, **dict(SMALL, **overrides))
    model.label_smoothing = 0.1
    model.build_with_dummy_batch()
    return model


def randomise(layer, seed=1):
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(0, 0.5, w.shape).astype(np.float32))


# --- aggregation ---------------------------------------------------------------------------------
@pytest.mark.parametrize("norm,rms", [("layer", (0.5, 2.0)), ("none", (4.0, 100.0))])
def test_dense_connection_adds_no_parameters_and_only_the_layer_norm_keeps_a_deep_stack_normalised(
        norm, rms):
    sizes = dict(encoder_layers=6, decoder_layers=6, d_model=32, ffn_dim=64, num_heads=2, dropout=0.0)
    source = tf.constant(np.random.default_rng(0).integers(4, 200, (4, 12)), tf.int32)
    models = {}
    for aggregation in ("none", "dense"):
        model = catalog.get("deep_transformer")(200, 200, encoder_aggregation=aggregation,
                                                 decoder_aggregation=aggregation,
                                                 dense_aggregation_norm=norm, **sizes)
        model.build_with_dummy_batch()
        models[aggregation] = model
    assert models["dense"].count_params() == models["none"].count_params()
    memory = models["dense"].encode(source)["outputs"].numpy()
    # Eq. 4 as printed (norm none) lets the sum grow about 2^(L-2) times a layer's output.
    assert rms[0] < np.sqrt((memory ** 2).mean()) < rms[1]


def test_dense_aggregation_computes_eq_4_as_printed_unless_asked_otherwise():
    """A model built without --dense_aggregation_norm encodes as one asked for eq. 4 as printed
    ("none") with the same weights, not as one that normalises the sums."""
    def encoded(**norm):
        keras.utils.set_random_seed(0)
        model = make(encoder_aggregation="dense", decoder_aggregation="dense", **norm)
        return model.encode(SOURCE)["outputs"].numpy()
    default = encoded()
    np.testing.assert_array_equal(default, encoded(dense_aggregation_norm="none"))
    assert not np.allclose(default, encoded(dense_aggregation_norm="layer"), atol=1e-3)


# --- multi-layer attention -----------------------------------------------------------------------
def copy_weights(source, target):
    by_path = {v.path.split("/", 1)[1]: v for v in source.weights}
    for v in target.weights:
        v.assign(by_path[v.path.split("/", 1)[1]])


@pytest.mark.slow
def test_with_every_option_off_it_is_the_plain_transformer():
    plain = make("transformer")
    deep = make(multi_layer_attention=1)
    assert [v.path.split("/", 1)[1] for v in deep.weights] == [v.path.split("/", 1)[1] for v in plain.weights]
    copy_weights(plain, deep)
    inputs = {"source": SOURCE, "target_in": TARGET_IN}
    np.testing.assert_allclose(deep(inputs).numpy(), plain(inputs).numpy(), atol=1e-6)
    memory = plain.decoding_memory(plain.encode(SOURCE))
    a, _ = plain.step(TARGET_IN[:, 0], 0, plain.initial_state(memory), memory)
    b, _ = deep.step(TARGET_IN[:, 0], 0, deep.initial_state(memory), memory)
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)


def test_multi_layer_attention_adds_one_attention_per_lower_layer():
    # Layer l attends to the layers below it, H^{l-1}..H^{l-k}, not to the embeddings H^0.
    model = make(encoder_layers=5, multi_layer_attention=3, aggregation_ffn_dim=8)
    assert [len(l.lower_attentions) for l in model.encoder.layers] == [0, 0, 1, 2, 2]
    assert [len(l.lower_attentions) for l in model.decoder.layers] == [0, 0, 1, 2]
    assert model.decoder.layers[3].attention_aggregation.inner.kernel.shape == (3 * 16, 8)
    state = model.initial_state(model.encode(SOURCE))
    assert sorted(k for k in state["layer_3"] if k.startswith("lower")) == [
        "lower_1_key", "lower_1_value", "lower_2_key", "lower_2_value"]
    assert [k for k in state["layer_1"] if k.startswith("lower")] == []
    # Layer 4 (index 3) reads H^3 as its input and attends to H^2 and H^1 too, nearest first.
    assert deep_transformer.lower(model.hparams, ["H0", "H1", "H2", "H3"], 3) == ["H2", "H1"]
    assert deep_transformer.lower(model.hparams, ["H0", "H1"], 1) == []
    # The lower layers' inputs matter.
    layer = model.encoder.layers[3]
    x, *lower = tf.unstack(tf.random.stateless_normal([3, B, T, 16], seed=[4, 5]))
    allowed = tf.ones([1, 1, 1, T], tf.bool)
    randomise(layer.attention_aggregation)
    a = layer(x, allowed, lower=lower).numpy()
    b = layer(x, allowed, lower=[lower[0], lower[1] * 2.0 + 1.0]).numpy()
    assert np.abs(a - b).max() > 1e-3
    with pytest.raises(ValueError, match="attends to 2 lower layers, got 1"):
        layer(x, allowed, lower=lower[:1])
    clone = MultiLayerEncoderLayer.from_config(layer.get_config())
    assert clone.lower_layers == 2 and clone.aggregation_ffn_dim == 8
    assert model.get_config()["multi_layer_attention"] == 3
    assert type(model).from_config(model.get_config()).get_config() == model.get_config()


# Each strategy on each side (3 encoder layers: an odd hierarchical tree; 4 decoder layers).
STRATEGY_PAIRS = [("hierarchical", "iterative"), ("dense", "hierarchical"), ("iterative", "linear"),
                  ("linear", "dense")]


@pytest.mark.parametrize("encoder,decoder", STRATEGY_PAIRS)
def test_incremental_decoding_equals_teacher_forcing_with_every_option_on(encoder, decoder):
    model = make(encoder_aggregation=encoder, decoder_aggregation=decoder, multi_layer_attention=3,
                 diversity_weight=1.0, aggregation_ffn_dim=24)
    assert_incremental_equals_teacher_forcing(model, SOURCE, TARGET_IN, atol=1e-4)
    paths = [v.path for v in model.weights]
    assert len(set(paths)) == len(paths)


@pytest.mark.slow
def test_pre_norm_deep_model_decodes_incrementally_and_ignores_source_padding():
    # (Incremental == teacher forcing also shows that teacher forcing is causal.)
    model = make(pre_norm=True, encoder_aggregation="hierarchical", decoder_aggregation="hierarchical",
                 multi_layer_attention=2)
    assert_incremental_equals_teacher_forcing(model, SOURCE, TARGET_IN, atol=1e-4)
    assert model.encoder.layers[2].lower_norms  # the lower input is normalised like the own input
    a = model({"source": SOURCE, "target_in": TARGET_IN}).numpy()
    longer = model({"source": tf.pad(SOURCE, [[0, 0], [0, 3]]), "target_in": TARGET_IN}).numpy()
    np.testing.assert_allclose(a, longer, atol=1e-5)


# --- diversity -----------------------------------------------------------------------------------
def test_model_adds_minus_lambda_times_the_diversity_of_both_stacks_in_training():
    model = make(encoder_aggregation="hierarchical", diversity_weight=0.5)
    inputs = {"source": SOURCE, "target_in": TARGET_IN}
    model(inputs, training=False)
    assert model.losses == []  # a training objective only
    model(inputs, training=True)
    encoded, encoder_states = model.encoder.encode_with_states(SOURCE, False)
    _, decoder_states = model.decoder.decode_with_states(model.decoder.memory(encoded), TARGET_IN, False)
    expected = layer_diversity([(encoder_states, SOURCE != 0), (decoder_states, TARGET_IN != 0)])
    assert len(model.losses) == 1
    np.testing.assert_allclose(model.losses[0].numpy(), -0.5 * expected.numpy(), rtol=1e-5)
    assert len(encoder_states) == 3 and len(decoder_states) == 4
    # The objective is NLL - λ L_div, and both terms are reported for the training log.
    labels = tf.concat([TARGET_IN[:, 1:], tf.constant([[3], [0]])], 1)
    model._reports.clear()
    logits = model(inputs, training=True)
    objective, _ = training_loss(model, labels, logits)
    nll, _ = model.translation_loss(labels, logits)
    np.testing.assert_allclose(objective.numpy(), nll.numpy() - 0.5 * expected.numpy(), rtol=1e-5)
    np.testing.assert_allclose(model._reports["diversity"].numpy(), expected.numpy(), rtol=1e-5)
    np.testing.assert_allclose(model._reports["translation_loss"].numpy(), nll.numpy(), rtol=1e-5)


# --- configuration -------------------------------------------------------------------------------
@pytest.mark.parametrize("bad,message", [
    (dict(encoder_aggregation="deep"), "--encoder_aggregation='deep': choose one of none, dense"),
    (dict(decoder_aggregation="iterative", decoder_layers=1), "needs at least 2 decoder layers"),
    (dict(multi_layer_attention=0), "--multi_layer_attention=0: model 'deep_transformer' needs an integer >= 1"),
    (dict(diversity_weight=-1.0), "--diversity_weight=-1.0: model 'deep_transformer' needs a number >= 0"),
    (dict(diversity_weight=1.0, encoder_layers=1), "at least 2 encoder and 2 decoder layers"),
])
def test_bad_settings_are_config_errors(bad, message):
    with pytest.raises(ConfigError, match=message):
        catalog.get("deep_transformer")(50, 50, **dict(SMALL, **bad))


# --- end to end ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_hierarchical_with_diversity_overfits_multi30k_and_its_export_matches(multi30k_dir, tmp_path):
    # The translation loss falls from 5.0 to 0.46 nats per target token over steps 61-80 (below
    # 1.2 is asserted; at a learning rate of 1e-12 it stays near 6); the objective, which subtracts
    # the diversity, is below it.
    run = overfit_export_and_compare(
        str(tmp_path), multi30k_dir, "--model=deep_transformer", "--encoder_layers=2",
        "--decoder_layers=2", "--d_model=64", "--ffn_dim=128", "--num_heads=4",
        "--encoder_aggregation=hierarchical", "--decoder_aggregation=hierarchical",
        "--diversity_weight=1", steps=80, learning_rate=5e-3, below=1.2,
        tag="train/translation_loss")
    diversity = [v for _, v in events(run.model_dir, "train/diversity")]
    losses = [v for _, v in events(run.model_dir, "train/loss")]
    assert len(diversity) == 4 and all(0.0 <= d <= 1.0 for d in diversity), diversity
    assert losses[-1] < run.losses[-1], (losses, run.losses)
