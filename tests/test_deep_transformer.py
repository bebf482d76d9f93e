import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import events, run_cli, tiny_train_flags
from contract import assert_incremental_equals_teacher_forcing, overfit_export_and_compare
from tfnmt.errors import CheckpointError, ConfigError
from tfnmt.layers.aggregation import (STRATEGIES, Aggregation, LayerAggregation, LinearCombination,
                                      hierarchical_nodes)
from tfnmt.layers.multi_layer_attention import MultiLayerEncoderLayer
from tfnmt.models import catalog
from tfnmt.models import deep_transformer
from tfnmt.training import checkpoints
from tfnmt.objectives.diversity import adjacent_layer_distances, layer_diversity

SMALL = dict(encoder_layers=3, decoder_layers=4, d_model=16, ffn_dim=32, num_heads=2, dropout=0.0)
SOURCE = tf.constant([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]])
TARGET_IN = tf.constant([[2, 10, 11, 12, 13], [2, 13, 14, 0, 0]])
B, T, D = 2, 3, 8


def make(name="deep_transformer", **overrides):
    model = catalog.get(name)(50, 50, label_smoothing=0.1, **dict(SMALL, **overrides))
    model.build_with_dummy_batch()
    return model


def states(n, seed=0):
    rng = np.random.default_rng(seed)
    return [tf.constant(rng.normal(size=(B, T, D)).astype(np.float32)) for _ in range(n)]


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def layer_norm(x, gamma, beta, eps=1e-6):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def agg_numpy(node, inputs):
    x = np.concatenate([i.numpy() for i in inputs], -1)
    ff = sigmoid(x @ node.inner.kernel.numpy() + node.inner.bias.numpy()) @ node.outer.kernel.numpy() \
        + node.outer.bias.numpy()
    return layer_norm(ff + sum(i.numpy() for i in inputs), node.norm.gamma.numpy(), node.norm.beta.numpy())


def randomise(layer, seed=1):
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(0, 0.5, w.shape).astype(np.float32))


# --- aggregation ---------------------------------------------------------------------------------
@pytest.mark.parametrize("arity", [2, 3])
def test_aggregation_node_is_equation_7(arity):
    node = Aggregation(12)
    inputs = states(arity)
    node.build([x.shape for x in inputs])
    randomise(node)
    assert node.inner.kernel.shape == (arity * D, 12)
    np.testing.assert_allclose(node(inputs).numpy(), agg_numpy(node, inputs), rtol=1e-4, atol=1e-4)
    assert Aggregation.from_config(node.get_config()).ffn_dim == 12


def test_linear_combination_is_equation_5():
    layer = LinearCombination()
    inputs = states(3)
    out = layer(inputs).numpy()
    w = layer.kernel.numpy()
    np.testing.assert_allclose(out, sum(x.numpy() @ w[l] for l, x in enumerate(inputs)), rtol=1e-5, atol=1e-5)


def run_stack(strategy, num_layers, seed=0):
    """Runs a LayerAggregation over layers whose outputs are fixed tensors (they ignore their
    input), so that any gradient reaching H^l comes from the aggregation itself."""
    aggregation = LayerAggregation(strategy, num_layers, 12)
    offsets = [tf.Variable(x) for x in states(num_layers, seed)]
    fed = []

    def layer_fn(i, inputs):
        fed.append(list(inputs))
        return offsets[i] + 0.0 * inputs[i]

    with tf.GradientTape() as tape:
        output, layer_states = aggregation.run(tf.zeros([B, T, D]), layer_fn)
        objective = tf.reduce_sum(output * tf.constant(np.random.default_rng(9).normal(size=(B, T, D)), tf.float32))
    return aggregation, output, layer_states, fed, tape.gradient(objective, offsets)


@pytest.mark.parametrize("num_layers", [4, 5, 6])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_strategy_keeps_the_shape_and_its_output_uses_every_layer(strategy, num_layers):
    _, output, layer_states, _, grads = run_stack(strategy, num_layers)
    assert output.shape == (B, T, D) and len(layer_states) == num_layers
    reached = [g is not None and float(tf.reduce_max(tf.abs(g))) > 0 for g in grads]
    # Without aggregation only the top layer reaches the output directly.
    assert reached == ([False] * (num_layers - 1) + [True] if strategy == "none" else [True] * num_layers)


def test_dense_connection_is_equation_4():
    _, output, layer_states, fed, _ = run_stack("dense", 4)
    raw = [x.numpy() for x in states(4)]
    expected = []
    def layer_norm(x):  # no gain or bias: dense connection adds no parameters
        return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-6)

    for l in range(4):
        # H^l = LN(Layer(H^{l-1}) + sum_{i<l} H^i); the first layer has nothing to add
        expected.append(layer_norm(raw[l] + sum(expected)) if l else raw[l])
        np.testing.assert_allclose(layer_states[l].numpy(), expected[l], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fed[3][3].numpy(), expected[2], rtol=1e-4, atol=1e-5)  # the backbone carries H^l
    np.testing.assert_allclose(output.numpy(), expected[3], rtol=1e-4, atol=1e-5)


def test_dense_connection_keeps_a_deep_stack_normalised_and_adds_no_parameters():
    sizes = dict(encoder_layers=6, decoder_layers=6, d_model=32, ffn_dim=64, num_heads=2, dropout=0.0)
    source = tf.constant(np.random.default_rng(0).integers(4, 200, (4, 12)), tf.int32)
    models = {}
    for aggregation in ("none", "dense"):
        model = catalog.get("deep_transformer")(200, 200, encoder_aggregation=aggregation,
                                                 decoder_aggregation=aggregation, **sizes)
        model.build_with_dummy_batch()
        models[aggregation] = model
    assert models["dense"].count_params() == models["none"].count_params()
    memory = models["dense"].encode(source)["outputs"].numpy()
    assert 0.5 < np.sqrt((memory ** 2).mean()) < 2.0  # unnormalised, eq. 4 gives about 2^(L-2)


def test_iterative_aggregation_is_equation_6_and_leaves_the_backbone_alone():
    aggregation = LayerAggregation("iterative", 4, 12)
    aggregation.build((B, T, D))
    randomise(aggregation)
    raw, fed = states(4), []

    def layer_fn(i, inputs):
        fed.append(inputs[i])
        return raw[i] + 0.5 * inputs[i]

    output, layer_states = aggregation.run(tf.zeros([B, T, D]), layer_fn)
    expected = layer_states[0]
    for l in range(1, 4):
        np.testing.assert_allclose(fed[l].numpy(), layer_states[l - 1].numpy())  # H^{l-1}, not A^{l-1}
        expected = tf.constant(agg_numpy(aggregation.nodes[l - 1], [layer_states[l], expected]))
    np.testing.assert_allclose(output.numpy(), expected.numpy(), rtol=1e-4, atol=1e-4)
    assert len(aggregation.nodes) == 3


@pytest.mark.parametrize("num_layers,tree", [(6, [[0, 1], [2, 3], [4, 5]]), (4, [[0, 1], [2, 3]]),
                                             (5, [[0, 1], [2, 3], [4]]), (3, [[0, 1], [2]]),
                                             (2, [[0, 1]])])
def test_hierarchical_tree_feeds_each_node_back_into_the_backbone(num_layers, tree):
    assert hierarchical_nodes(num_layers) == tree
    aggregation = LayerAggregation("hierarchical", num_layers, 12)
    aggregation.build((B, T, D))
    randomise(aggregation)
    # Node i merges its layers and, from the second on, the node before it.
    assert [n.inner.kernel.shape[0] for n in aggregation.nodes] == [
        D * (len(layers) + (i > 0)) for i, layers in enumerate(tree)]
    raw, fed = states(num_layers), []

    def layer_fn(i, inputs):
        fed.append(inputs[i])
        return raw[i] + 0.5 * inputs[i]  # each layer reads what the stack feeds it

    output, layer_states = aggregation.run(tf.zeros([B, T, D]), layer_fn)
    x, node, expected_states = np.zeros((B, T, D), np.float32), None, []
    for i, layers in enumerate(tree):
        for l in layers:
            np.testing.assert_allclose(fed[l].numpy(), x, rtol=1e-5, atol=1e-5)
            x = raw[l].numpy() + 0.5 * x
            expected_states.append(x)
        merged = [tf.constant(expected_states[l]) for l in layers] + ([tf.constant(node)] if i else [])
        node = agg_numpy(aggregation.nodes[i], merged)
        x = node  # fed back: the next layer reads the node
    np.testing.assert_allclose(output.numpy(), node, rtol=1e-4, atol=1e-4)
    for got, want in zip(layer_states, expected_states):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)


# --- multi-layer attention -----------------------------------------------------------------------
def copy_weights(source, target):
    by_path = {v.path.split("/", 1)[1]: v for v in source.weights}
    for v in target.weights:
        v.assign(by_path[v.path.split("/", 1)[1]])


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
def diversity_numpy(layers, mask):
    pairs = []
    for lower, upper in zip(layers[:-1], layers[1:]):
        values = []
        for b, t in zip(*np.nonzero(mask)):
            u, v = lower[b, t], upper[b, t]
            values.append(1 - (u @ v / np.linalg.norm(u) / np.linalg.norm(v)) ** 2)
        pairs.append(np.mean(values))
    return np.array(pairs)


def test_diversity_is_equation_10_and_ignores_padding():
    layers = [x.numpy() for x in states(4, seed=3)]
    layers[2][0, 1] = 3.0 * layers[1][0, 1]  # parallel states: distance 0 at that position
    mask = np.array([[True, True, True], [True, False, False]])
    got = adjacent_layer_distances([tf.constant(x) for x in layers], tf.constant(mask)).numpy()
    np.testing.assert_allclose(got, diversity_numpy(layers, mask), rtol=1e-5)
    noisy = [x.copy() for x in layers]
    for x in noisy:
        x[1, 1:] = 100.0 * np.random.default_rng(5).normal(size=(2, D))
    np.testing.assert_allclose(adjacent_layer_distances([tf.constant(x) for x in noisy], tf.constant(mask)).numpy(),
                               got, rtol=1e-6)
    decoder = [x.numpy() for x in states(2, seed=6)]
    dmask = np.array([[True, False, False], [True, True, True]])
    both = layer_diversity([([tf.constant(x) for x in layers], tf.constant(mask)),
                            ([tf.constant(x) for x in decoder], tf.constant(dmask))]).numpy()
    np.testing.assert_allclose(both, np.mean(np.concatenate([got, diversity_numpy(decoder, dmask)])), rtol=1e-5)


def test_model_adds_minus_lambda_times_the_diversity_of_both_stacks_in_training():
    model = make(encoder_aggregation="hierarchical", diversity_weight=0.5)
    inputs = {"source": SOURCE, "target_in": TARGET_IN}
    model(inputs, training=False)
    assert model.losses == []  # a training objective only
    model(inputs, training=True)
    memory, encoder_states = model.encoder.encode_with_states(SOURCE, False)
    _, decoder_states = model.decoder.decode_with_states(memory, TARGET_IN, False)
    expected = layer_diversity([(encoder_states, SOURCE != 0), (decoder_states, TARGET_IN != 0)])
    assert len(model.losses) == 1
    np.testing.assert_allclose(model.losses[0].numpy(), -0.5 * expected.numpy(), rtol=1e-5)
    assert len(encoder_states) == 3 and len(decoder_states) == 4
    # The objective is NLL - λ L_div, and both terms are reported for the training log.
    labels = tf.concat([TARGET_IN[:, 1:], tf.constant([[3], [0]])], 1)
    model._reports.clear()
    logits = model(inputs, training=True)
    objective = model.compute_loss(y=labels, y_pred=logits)
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


# --- warm start ----------------------------------------------------------------------------------
def test_warm_start_loads_the_baselines_weights_and_initialises_the_new_ones(tmp_path):
    baseline = make("transformer")
    path = tf.train.Checkpoint(**checkpoints.trackables(baseline)).write(str(tmp_path / "ckpt-1"))
    deep = make(encoder_aggregation="hierarchical", decoder_aggregation="iterative", multi_layer_attention=2)
    fresh = {v.path: v.numpy() for v in deep.weights}
    report = checkpoints.warm_start(deep, path)
    plain = {v.path.split("/", 1)[1]: v.numpy() for v in baseline.weights}
    assert sorted(report["loaded"]) == sorted(plain) and not report["unused"] and not report["mismatched"]
    assert report["new"] and all(("aggregation" in n or "lower_" in n) for n in report["new"])
    for v in deep.weights:
        name = v.path.split("/", 1)[1]
        np.testing.assert_array_equal(v.numpy(), plain[name] if name in plain else fresh[v.path])
    # Same path, other shape: not loaded, reported; names of no use here: reported as unused.
    other = tf.train.Checkpoint(model={
        "transformer/encoder_layer_0/ffn/inner/kernel": tf.Variable(tf.zeros([3, 3])),
        "transformer/encoder_layer_0/ffn/inner/bias": tf.Variable(tf.ones([32])),
        "transformer/encoder_layer_9/ffn/inner/bias": tf.Variable(tf.ones([32]))}).write(str(tmp_path / "other"))
    partial = checkpoints.warm_start(deep, other)
    assert partial["loaded"] == ["encoder_layer_0/ffn/inner/bias"]
    assert partial["mismatched"] == ["encoder_layer_0/ffn/inner/kernel (3, 3) -> (16, 32)"]
    assert partial["unused"] == ["encoder_layer_9/ffn/inner/bias"]
    np.testing.assert_array_equal(deep.encoder.layers[0].ffn.inner.bias.numpy(), 1.0)
    unrelated = tf.train.Checkpoint(step=tf.Variable(1)).write(str(tmp_path / "unrelated"))
    with pytest.raises(CheckpointError, match="no weight of .* matches this model"):
        checkpoints.warm_start(deep, unrelated)
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in glob.glob(path + ".*"):
        data = open(name, "rb").read()
        (broken / os.path.basename(name)).write_bytes(data[:10] if ".data" in name else data)
    with pytest.raises(CheckpointError, match="--init_from: cannot read"):
        checkpoints.warm_start(deep, str(broken / "ckpt-1"))


def test_init_from_the_command_line(corpus, trained_model, tmp_path, capsys, caplog):
    # trained_model: a 1+1-layer transformer; its layers and embeddings start layer 0 of a
    # 2+2-layer deep model, whose second layers and aggregation nodes are new.
    deep = str(tmp_path / "deep")
    flags = [f for f in tiny_train_flags(corpus, deep, steps=2)
             if not f.startswith(("--model=", "--encoder_layers", "--decoder_layers"))] + [
        "--model=deep_transformer", "--encoder_layers=2", "--decoder_layers=2", "--log_every=1",
        "--bleu_sentences=0", "--encoder_aggregation=hierarchical", "--decoder_aggregation=hierarchical",
        "--diversity_weight=1"]
    caplog.clear()
    assert run_cli("train", *flags, f"--init_from={trained_model}") == 0
    log = caplog.text
    assert "vocabulary of --init_from copied" in log
    baseline = checkpoints.resolve(trained_model)
    stored = [k for k, _ in tf.train.list_variables(baseline) if k.startswith("model/")]
    assert f"--init_from: loaded {len(stored)} weights" in log and f"from {baseline}" in log
    new = log.split("new weights")[1].splitlines()[0]
    assert "encoder_aggregation/node_0/inner/kernel" in new and "decoder_layer_1/ffn/outer/bias" in new
    assert "encoder_layer_0" not in new
    # Both terms of the objective are logged.
    assert events(deep, "train/diversity") and events(deep, "train/translation_loss")
    capsys.readouterr()
    for bad, message in ((str(tmp_path / "nowhere"), "neither a model directory nor a checkpoint"),
                         (str(tmp_path / "deep" / "logs"), "--init_from: no checkpoint in")):
        assert run_cli("train", *flags, f"--model_dir={tmp_path / 'd2'}", f"--init_from={bad}") == 2
        err = capsys.readouterr().err
        assert err.startswith("tfnmt train: error:") and message in err and len(err.splitlines()) == 1


# --- end to end ----------------------------------------------------------------------------------
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
