"""The roofline of `bench --bench=train` (bench/train.py): the matrix-product FLOPs it counts
in a traced graph, and its fit of a model's count as B x a quadratic in the padded lengths."""

import keras
import pytest
import tensorflow as tf

from contract import tiny_model
from tfnmt.bench import train as bench_train


def test_a_dense_layers_training_flops_are_three_products():
    layer = keras.layers.Dense(7, use_bias=False)
    layer.build((None, 5))

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(tf.tanh(layer(x)))
        return tape.gradient(y, [layer.kernel, x])
    graph = step.get_concrete_function(tf.TensorSpec([3, 5], tf.float32)).graph
    # forward x.W, then dL/dW = x^T.g and dL/dx = g.W^T: 2 x 3 x 5 x 7 FLOPs each.
    assert bench_train.matmul_flops(graph) == 3 * 2 * 3 * 5 * 7


def test_einsum_and_batched_products_are_counted():
    @tf.function
    def products(a, b, c):
        return tf.einsum("bij,bjk->bik", a, b), tf.matmul(a, c)
    graph = products.get_concrete_function(tf.TensorSpec([2, 3, 4]), tf.TensorSpec([2, 4, 5]),
                                            tf.TensorSpec([2, 4, 6])).graph
    assert bench_train.matmul_flops(graph) == 2 * 2 * 3 * 4 * 5 + 2 * 2 * 3 * 4 * 6


def test_a_loop_is_not_counted():
    @tf.function
    def loop(x):
        return tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, tf.matmul(y, y)), (0, x))
    graph = loop.get_concrete_function(tf.TensorSpec([4, 4])).graph
    assert bench_train.matmul_flops(graph) is None


@pytest.mark.slow
@pytest.mark.parametrize("name", ["transformer", "densenmt"])
def test_the_fitted_count_is_the_traced_count_at_an_unseen_shape(name):
    model = tiny_model(name, dropout=0.0)
    batch, source, target = 3, 11, 19
    traced = bench_train._graph_flops(model, source, target, batch)
    assert traced > 0
    fitted = bench_train.step_flops(model, [(batch, source, target, 0, 0)])
    assert fitted == pytest.approx(traced, rel=1e-6)
