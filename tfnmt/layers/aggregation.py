"""Layer aggregation (Dou et al. 2018, "Exploiting Deep Representations for NMT", sec. 3.1.1).

`Aggregation` is the node of eq. 7, `LinearCombination` eq. 5, and `LayerAggregation` wires a
stack of layers with one of the strategies (none, dense, linear, iterative, hierarchical). All
of them combine the states of one position across layers, so the same wiring serves a whole
sequence (teacher forcing) and a single decoding step.
"""

import keras
import tensorflow as tf

from tfnmt.layers.configured import Configured

STRATEGIES = ("none", "dense", "linear", "iterative", "hierarchical")
# Which inputs of an aggregation node have a residual connection to its output (the paper's
# Table 4): every one (eq. 7), only the highest layer's, none.
RESIDUALS = ("all", "top", "none")
# The activation between FF's two maps (Table 4): eq. 7's sigmoid, or a ReLU.
ACTIVATIONS = ("sigmoid", "relu")
# What dense connection does to each sum: nothing (eq. 4 as printed) or a layer normalisation
# without gain or bias (`_normalize`).
DENSE_NORMS = ("none", "layer")


@keras.saving.register_keras_serializable(package="tfnmt")
class Aggregation(Configured, keras.layers.Layer):
    """AGG(x_1, ..., x_n) = LN(FF([x_1; ...; x_n]) + x_1 + ... + x_n)  (eq. 7, n = 2 or 3).

    FF = W_2 sigmoid(W_1 [x_1; ...; x_n] + b_1) + b_2 with an inner width of `ffn_dim`. Every input
    has a residual connection to the output (the paper's best variant, its Table 4 "All").
    Table 4's others: `residual="top"` adds only x_`top` (the input from the highest layer),
    "none" no input; `activation="relu"` puts a ReLU between FF's maps.
    """

    def __init__(self, ffn_dim, residual="all", activation="sigmoid", top=0, **kwargs):
        super().__init__(**kwargs)
        if residual not in RESIDUALS or activation not in ACTIVATIONS:
            raise ValueError(f"aggregation residual {residual!r} / activation {activation!r}: "
                             f"choose from {RESIDUALS} / {ACTIVATIONS}")
        self.set_config(ffn_dim=ffn_dim, residual=residual, activation=activation, top=top)

    def build(self, input_shapes):
        depth = input_shapes[0][-1]
        if any(shape[-1] != depth for shape in input_shapes):
            raise ValueError(f"aggregated states must share their width, got {input_shapes}")
        self.inner = keras.layers.Dense(self.ffn_dim, activation=self.activation, name="inner")
        self.outer = keras.layers.Dense(depth, name="outer")
        self.norm = keras.layers.LayerNormalization(epsilon=1e-6, name="norm")
        self.inner.build(tuple(input_shapes[0][:-1]) + (depth * len(input_shapes),))
        self.outer.build(tuple(input_shapes[0][:-1]) + (self.ffn_dim,))
        self.norm.build(input_shapes[0])

    def call(self, inputs):
        inputs = list(inputs)
        out = self.outer(self.inner(tf.concat(inputs, axis=-1)))
        if self.residual == "all":
            out += tf.add_n(inputs)
        elif self.residual == "top":
            out += inputs[self.top]
        return self.norm(out)


@keras.saving.register_keras_serializable(package="tfnmt")
class LinearCombination(keras.layers.Layer):
    """H = sum_l W_l H^l  (eq. 5): one trainable d x d matrix per layer, no bias, no normalisation
    (the paper's weights may be negative and are not shared across features)."""

    def build(self, input_shapes):
        depth = input_shapes[0][-1]
        # Glorot over [L, d, d] has variance 1/(L d): that of one Dense on [H^1; ...; H^L].
        self.kernel = self.add_weight(name="kernel", shape=(len(input_shapes), depth, depth),
                                      initializer="glorot_uniform")

    def call(self, inputs):
        inputs = list(inputs)
        depth = inputs[0].shape[-1]
        # [H^1; ...; H^L] times the matrices stacked [L d, d]: one matmul, plain ops for export.
        kernel = tf.reshape(tf.cast(self.kernel, self.compute_dtype), [len(inputs) * depth, depth])
        return tf.matmul(tf.concat(inputs, axis=-1), kernel)


def hierarchical_nodes(num_layers):
    """The layers (0-based) merged by each node of the hierarchical tree, in order.

    Node i merges layers 2i and 2i+1 and, from the second node on, the node before it (the
    paper's filter-size-2 tree, fig. 2). With an odd number of layers the top layer has no
    partner: the last node merges it with the node before it. 6 layers -> [0, 1], [2, 3], [4, 5];
    5 layers -> [0, 1], [2, 3], [4].
    """
    return [list(range(start, min(start + 2, num_layers))) for start in range(0, num_layers, 2)]


@keras.saving.register_keras_serializable(package="tfnmt")
def _normalize(x, epsilon=1e-6):
    """Layer normalisation over the last axis with no learned gain or bias, in float32."""
    x32 = tf.cast(x, tf.float32)
    mean, variance = tf.nn.moments(x32, axes=[-1], keepdims=True)
    return tf.cast((x32 - mean) * tf.math.rsqrt(variance + epsilon), x.dtype)


@keras.saving.register_keras_serializable(package="tfnmt")
class LayerAggregation(Configured, keras.layers.Layer):
    """Runs a stack of `num_layers` layers with one aggregation strategy:

    - none:         H^l = Layer(H^{l-1}); output H^L.
    - dense:        H^l = Layer(H^{l-1}) + sum_{i<l} H^i  (eq. 4, addition keeps the width);
                    output H^L. With `dense_norm="layer"` each sum is layer-normalised WITHOUT
                    gain or bias, H^l = LN(...): eq. 4 as printed lets the sum grow about 2x per
                    layer (at 6 layers and d 128 the stack output has RMS 28 and the tied softmax
                    starts at a cross-entropy of 68 nats), and the paper's residual connections
                    are each followed by layer normalisation (eq. 1) while dense connection
                    "introduces no new parameters" (sec. 4).
    - linear:       output sum_l W_l H^l  (eq. 5); the backbone is unchanged.
    - iterative:    A^1 = H^1, A^l = AGG(H^l, A^{l-1})  (eq. 6); output A^L; backbone unchanged.
    - hierarchical: N^1 = AGG(H^1, H^2), N^i = AGG(H^{2i-1}, H^{2i}, N^{i-1}); each node is the
                    input of the next layer (fed back into the backbone, fig. 2b); output the top
                    node. Any depth >= 2 (see `hierarchical_nodes` for odd depths).

    `run(x, layer_fn)` drives the stack: `layer_fn(i, inputs)` computes layer i (0-based) from
    `inputs`, the states entering layers 0..i (inputs[0] = x; later entries are what the
    strategy feeds each layer, e.g. hierarchical nodes); multi-layer attention reads the lower
    entries. It returns (stack output, [H^1..H^L]), the latter for the layer-diversity loss.
    """

    def __init__(self, strategy, num_layers, ffn_dim, dense_norm, residual="all",
                 activation="sigmoid", **kwargs):
        super().__init__(**kwargs)
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown aggregation {strategy!r}; choose one of {', '.join(STRATEGIES)}")
        if dense_norm not in DENSE_NORMS:
            raise ValueError(f"unknown dense_norm {dense_norm!r}; choose one of {', '.join(DENSE_NORMS)}")
        if strategy != "none" and num_layers < 2:
            raise ValueError(f"{strategy} aggregation needs at least 2 layers, got {num_layers}")
        self.set_config(strategy=strategy, num_layers=num_layers, ffn_dim=ffn_dim,
                        dense_norm=dense_norm, residual=residual, activation=activation)

    def build(self, input_shape):
        self.nodes = []
        self.linear = None
        # (arity, the input from the highest layer): see `run` for the order of the inputs.
        if self.strategy == "iterative":
            arities = [(2, 0)] * (self.num_layers - 1)
        elif self.strategy == "hierarchical":
            arities = [(len(layers) + (i > 0), len(layers) - 1)
                       for i, layers in enumerate(hierarchical_nodes(self.num_layers))]
        else:
            arities = []
        for i, (arity, top) in enumerate(arities):
            node = Aggregation(self.ffn_dim, self.residual, self.activation, top, name=f"node_{i}")
            node.build([input_shape] * arity)
            self.nodes.append(node)
        if self.strategy == "linear":
            self.linear = LinearCombination(name="linear_combination")
            self.linear.build([input_shape] * self.num_layers)

    def run(self, x, layer_fn):
        if not self.built:
            self.build(x.shape)
        inputs, outputs = [x], []
        tree = hierarchical_nodes(self.num_layers) if self.strategy == "hierarchical" else []
        node_after = {layers[-1]: i for i, layers in enumerate(tree)}
        aggregate = None
        for i in range(self.num_layers):
            h = layer_fn(i, inputs)
            if self.strategy == "dense" and outputs:
                h = h + tf.add_n(outputs)
                if self.dense_norm == "layer":
                    h = _normalize(h)
            outputs.append(h)
            if self.strategy == "iterative":
                aggregate = h if i == 0 else self.nodes[i - 1]([h, aggregate])
            elif i in node_after:
                n = node_after[i]
                merged = [outputs[j] for j in tree[n]] + ([aggregate] if n > 0 else [])
                aggregate = self.nodes[n](merged)
                h = aggregate
            inputs.append(h)
        if self.strategy == "linear":
            return self.linear(outputs), outputs
        return (outputs[-1] if aggregate is None else aggregate), outputs
