"""Layer aggregation (tfnmt/layers/aggregation.py; Dou et al. 2018, sec. 3.1.1): the AGG node
(eq. 7), the linear combination (eq. 5) and each strategy of LayerAggregation against numpy."""

import numpy as np
import pytest
import tensorflow as tf

from tfnmt.layers.aggregation import (STRATEGIES, Aggregation, LayerAggregation, LinearCombination,
                                      hierarchical_nodes)

B, T, D = 2, 3, 8


def states(n, seed=0):
    rng = np.random.default_rng(seed)
    return [tf.constant(rng.normal(size=(B, T, D)).astype(np.float32)) for _ in range(n)]


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def layer_norm(x, gamma, beta, eps=1e-6):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def agg_numpy(node, inputs, residual="all", activation=sigmoid, top=0):
    x = np.concatenate([i.numpy() for i in inputs], -1)
    ff = activation(x @ node.inner.kernel.numpy() + node.inner.bias.numpy()) @ node.outer.kernel.numpy() \
        + node.outer.bias.numpy()
    added = {"all": sum(i.numpy() for i in inputs), "top": inputs[top].numpy(), "none": 0}[residual]
    return layer_norm(ff + added, node.norm.gamma.numpy(), node.norm.beta.numpy())


def randomise(layer, seed=1):
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(0, 0.5, w.shape).astype(np.float32))


@pytest.mark.parametrize("arity", [2, 3])
def test_aggregation_node_is_equation_7(arity):
    node = Aggregation(12)
    inputs = states(arity)
    node.build([x.shape for x in inputs])
    randomise(node)
    assert node.inner.kernel.shape == (arity * D, 12)
    np.testing.assert_allclose(node(inputs).numpy(), agg_numpy(node, inputs), rtol=1e-4, atol=1e-4)
    assert Aggregation.from_config(node.get_config()).ffn_dim == 12


@pytest.mark.parametrize("residual, activation", [
    ("top", "sigmoid"), ("none", "sigmoid"), ("all", "relu")])
def test_the_papers_table_4_variants_of_the_node(residual, activation):
    # Table 4: the output connected to no input ("None") or to the top layer's only ("Top");
    # FF with a ReLU in between.
    node = Aggregation(12, residual, activation, top=1)
    inputs = states(3)
    node.build([x.shape for x in inputs])
    randomise(node)
    relu = lambda x: np.maximum(x, 0)  # noqa: E731
    want = agg_numpy(node, inputs, residual, relu if activation == "relu" else sigmoid, top=1)
    np.testing.assert_allclose(node(inputs).numpy(), want, rtol=1e-4, atol=1e-4)
    assert not np.allclose(want, agg_numpy(node, inputs), atol=1e-3)  # not eq. 7 itself
    assert Aggregation.from_config(node.get_config()).get_config() == node.get_config()


@pytest.mark.parametrize("strategy, tops", [("iterative", [0, 0, 0]), ("hierarchical", [1, 1])])
def test_the_top_input_of_each_node_is_its_highest_layer(strategy, tops):
    # Iterative nodes take (H^l, A^{l-1}); hierarchical ones (H^{2i-1}, H^{2i}, N^{i-1}).
    aggregation = LayerAggregation(strategy, 4, 12, "none", residual="top")
    aggregation.build((B, T, D))
    assert [node.top for node in aggregation.nodes] == tops
    assert {node.residual for node in aggregation.nodes} == {"top"}


def test_linear_combination_is_equation_5():
    layer = LinearCombination()
    inputs = states(3)
    out = layer(inputs).numpy()
    w = layer.kernel.numpy()
    np.testing.assert_allclose(out, sum(x.numpy() @ w[l] for l, x in enumerate(inputs)), rtol=1e-5, atol=1e-5)


def run_stack(strategy, num_layers, seed=0, dense_norm="none"):
    """Runs a LayerAggregation over layers whose outputs are fixed tensors (they ignore their
    input), so that any gradient reaching H^l comes from the aggregation itself."""
    aggregation = LayerAggregation(strategy, num_layers, 12, dense_norm)
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


def unit_norm(x):  # no gain or bias: dense connection adds no parameters
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-6)


@pytest.mark.parametrize("dense_norm,norm", [("none", lambda x: x), ("layer", unit_norm)])
def test_dense_connection_feeds_each_sum_to_the_next_layer_with_either_norm(dense_norm, norm):
    _, output, layer_states, fed, _ = run_stack("dense", 4, dense_norm=dense_norm)
    raw = [x.numpy() for x in states(4)]
    expected = []
    for l in range(4):
        # H^l = norm(Layer(H^{l-1}) + sum_{i<l} H^i); the first layer has nothing to add
        expected.append(norm(raw[l] + sum(expected)) if l else raw[l])
        np.testing.assert_allclose(layer_states[l].numpy(), expected[l], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fed[3][3].numpy(), expected[2], rtol=1e-4, atol=1e-5)  # the backbone carries H^l
    np.testing.assert_allclose(output.numpy(), expected[3], rtol=1e-4, atol=1e-5)


def test_dense_connection_with_norm_none_is_the_literal_equation_4():
    # H^l = Layer(H^{l-1}) + sum_{i<l} H^i, as printed: H^3 = L3 + H^2 + H^1 = L3 + L2 + 2 L1.
    _, output, layer_states, _, _ = run_stack("dense", 3, dense_norm="none")
    l1, l2, l3 = (x.numpy() for x in states(3))
    np.testing.assert_allclose(layer_states[1].numpy(), l2 + l1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(output.numpy(), l3 + l2 + 2 * l1, rtol=1e-5, atol=1e-5)


def test_dense_connection_with_norm_layer_normalises_each_sum_without_parameters():
    aggregation, output, layer_states, _, _ = run_stack("dense", 3, dense_norm="layer")
    l1, l2, l3 = (x.numpy() for x in states(3))
    h2 = unit_norm(l2 + l1)
    np.testing.assert_allclose(output.numpy(), unit_norm(l3 + h2 + l1), rtol=1e-4, atol=1e-5)
    assert aggregation.weights == []


def test_the_dense_norm_is_refused_when_unknown():
    with pytest.raises(ValueError, match="dense_norm"):
        LayerAggregation("dense", 3, 12, "batch")


def test_iterative_aggregation_is_equation_6_and_leaves_the_backbone_alone():
    aggregation = LayerAggregation("iterative", 4, 12, "none")
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
@pytest.mark.parametrize("residual", ["all", "top"])
def test_hierarchical_tree_feeds_each_node_back_into_the_backbone(num_layers, tree, residual):
    # "top": each node adds only its highest layer's state, H^{2i} (H^L for an odd top node).
    assert hierarchical_nodes(num_layers) == tree
    aggregation = LayerAggregation("hierarchical", num_layers, 12, "none", residual=residual)
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
        node = agg_numpy(aggregation.nodes[i], merged, residual, top=len(layers) - 1)
        x = node  # fed back: the next layer reads the node
    np.testing.assert_allclose(output.numpy(), node, rtol=1e-4, atol=1e-4)
    for got, want in zip(layer_states, expected_states):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)
