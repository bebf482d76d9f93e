"""The roofline of `bench --bench=train` (bench/train.py): the matrix-product FLOPs it counts
in a traced graph, and its fit of a model's count as B x a quadratic in the padded lengths."""

import json
import os

import keras
import pytest
import tensorflow as tf

from conftest import run_cli
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


# The fitted count at an unseen shape, as each test below checks it.
_UNSEEN = (3, 11, 19)  # batch, source and target positions


def test_the_counted_shapes_determine_any_quadratic(monkeypatch):
    # As many shapes as coefficients (bench traces no more): any B x quadratic is found exactly.
    def quadratic(s, t):
        return 7 + 3 * s + 5 * t + 11 * s * s + 13 * t * t + 17 * s * t
    monkeypatch.setattr(bench_train, "_graph_flops", lambda model, s, t: quadratic(s, t))
    batch, source, target = _UNSEEN
    assert len(bench_train._SHAPES) == 6
    assert bench_train.step_flops(None, [(batch, source, target, 0, 0), (1, 5, 30, 0, 0)]) == \
        pytest.approx(batch * quadratic(source, target) + quadratic(5, 30), rel=1e-9)


@pytest.mark.slow
def test_the_fitted_count_is_the_traced_count_at_an_unseen_shape():
    # A DenseNMT here; a Transformer's: test_bench_train_times_the_step_train_runs below, on the
    # counts `bench` traced.
    model = tiny_model("densenmt", dropout=0.0)
    batch, source, target = _UNSEEN
    traced = bench_train._graph_flops(model, source, target, batch)
    assert traced > 0
    fitted = bench_train.step_flops(model, [(batch, source, target, 0, 0)])
    assert fitted == pytest.approx(traced, rel=1e-6)


@pytest.mark.slow
def test_bench_train_times_the_step_train_runs(trained_model, capsys, monkeypatch):
    """`train` itself (same optimizer settings, accumulation, stream), in a directory of its own:
    the model directory it reads is left as it was. And the Transformer it trained has the fitted
    count of the traced one at an unseen shape (a test of its own before, on a model of its
    own: it traced the shapes again), the counts it fits reused."""
    from tfnmt.training import trainer
    from tfnmt.training.optimizers import clip_threshold
    built, trained_in, counted = [], [], []
    real, real_train = trainer.compiled_model, trainer.train
    monkeypatch.setattr(trainer, "compiled_model", lambda *a: built.append(real(*a)) or built[-1])
    monkeypatch.setattr(trainer, "train",
                        lambda model_dir, *a, **k: trained_in.append(model_dir) or real_train(
                            model_dir, *a, **k))
    real_step_flops, real_graph_flops, graph_counts = (bench_train.step_flops,
                                                       bench_train._graph_flops, {})
    monkeypatch.setattr(bench_train, "step_flops",
                        lambda model, batches: counted.append(model) or real_step_flops(
                            model, batches))

    def graph_flops(model, *shape):  # each shape's count once for the model `bench` trained
        if (id(model), *shape) not in graph_counts:
            graph_counts[(id(model), *shape)] = real_graph_flops(model, *shape)
        return graph_counts[(id(model), *shape)]
    monkeypatch.setattr(bench_train, "_graph_flops", graph_flops)
    before = sorted(os.listdir(trained_model))
    assert run_cli("bench", "--bench=train", f"--model_dir={trained_model}", "--bench_steps=2",
                   "--batch_tokens=256", "--max_source_length=20", "--max_target_length=20",
                   "--optimizer=nag", "--learning_rate=0.1", "--momentum=0.5", "--clip_norm=0.25",
                   "--accumulate_steps=2") == 0
    optimizer = built[0].optimizer
    assert optimizer.momentum == 0.5 and optimizer.nesterov
    assert clip_threshold(optimizer).numpy() == 0.25
    assert int(optimizer.iterations.numpy()) == 2 + 5  # optimizer steps, each of 2 batches
    assert trained_in and trained_in[0] != trained_model and not os.path.exists(trained_in[0])
    assert sorted(os.listdir(trained_model)) == before
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["steps"] == 2 and result["target_tokens_per_second"] > 0
    assert 100 < result["peak_rss_mb"] < 64 * 1024
    assert result["model_gflop_per_step"] > 0 and 0 < result["roofline_share"]
    assert 0 <= result["padding_share"] < 1 and 0 <= result["kernel_cpu_share"] < 1
    assert result["machine_matmul_gflop_per_second"]["float32"] > 0

    model, = counted
    assert model.registry_name == "transformer" and len(graph_counts) == len(bench_train._SHAPES)
    batch, source, target = _UNSEEN
    traced = real_graph_flops(model, source, target, batch)
    assert traced > 0
    fitted = real_step_flops(model, [(batch, source, target, 0, 0)])  # the counts reused
    assert fitted == pytest.approx(traced, rel=1e-6)
    assert len(graph_counts) == len(bench_train._SHAPES)
