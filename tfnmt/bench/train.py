"""`tfnmt bench --bench=train`: the training step's speed, measured on `tfnmt train` itself and set
against what the machine's matrix products could do.

The run is `trainer.train` (the model, optimizer, precision, saved input stream and schedule
callbacks `train` runs) in a temporary model directory holding the vocabulary, from fresh
weights, without validation; its steps are timed after 5 warm-up steps. Besides target tokens/s:

- `model_gflop_per_step`: the matrix-product FLOPs (matmul, batched matmul, einsum,
  convolution; forward and backward) of the timed steps, per step. A model's products on a batch
  of B sentences padded to S source and T target positions are B x (a quadratic in S and T), so
  the quadratic's 6 coefficients are solved from the counts of the gradient graph traced (not
  run) at 6 shapes of one sentence, and summed over the timed batches, which a fresh stream makes
  again in order. Models whose graph holds a loop (the recurrent ones) are not counted (null).
- `machine_matmul_gflop_per_second`: TensorFlow's float32 product of a 2048 x 1024 by a
  1024 x 1024 matrix on this machine (the best of 5 timed chains of 2), and the bfloat16 one
  where the CPU has bfloat16 instructions (runtime.matmul_rates).
- `roofline_share`: the step's product rate over the machine's in the step's compute dtype.
- `padding_share`: the share of padding among the timed batches' source and target positions.
- `kernel_cpu_share`: the process's system CPU time over its user + system time in the timed
  steps (page faults, thread wake-ups).
"""

import dataclasses
import os
import shutil
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf

from tfnmt import runtime
from tfnmt.data.vocab import load_vocabs, vocab_paths
from tfnmt.decoding.options import DecodingOptions
from tfnmt.training import step as training_step
from tfnmt.training import trainer

WARMUP = 5
# One sentence of source x target positions at which the products are counted: as many as the
# quadratic has coefficients, placed so that they determine it exactly (no quadratic but 0
# vanishes at all six: one vanishing on the line t = 8 is (t - 8) x a linear form that vanishes
# at (8, 16) and (8, 24), hence a (s - 8)(t - 8), and at (16, 16) a = 0). Each shape is a trace
# of the gradient graph.
_SHAPES = ((8, 8), (16, 8), (8, 16), (16, 16), (24, 8), (8, 24))
# More chains than `auto`'s start-up check: a figure to report should be steady, a check at
# every start cheap.
_TIMED_CHAINS = 5


class _Steps(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.tokens, self.times, self.cpu = [], [], []

    def on_train_batch_end(self, batch, logs=None):
        self.tokens.append(float(logs["target_tokens"]))
        self.times.append(time.perf_counter())
        times = os.times()
        self.cpu.append((times.user, times.system))


def bench_train(bench, config, spec, train_split, train_limit, options, model_dir, peak_rss_mb):
    """The JSON of --bench=train for the model of `config`, trained as `tfnmt train` would
    train it into `model_dir` (TrainOptions `options`), from fresh weights, in a temporary
    directory given `model_dir`'s vocabulary."""
    options = dataclasses.replace(options, train_steps=WARMUP + bench.bench_steps,
                                  save_every=WARMUP + bench.bench_steps,
                                  early_stopping_patience=0, init_from="")
    steps = _Steps()
    with tempfile.TemporaryDirectory(prefix="tfnmt-bench-") as scratch:
        for path in set(vocab_paths(model_dir)):
            shutil.copy(path, scratch)
        trainer.train(scratch, config, spec, (train_split, ""), (train_limit, 0),
                      options, DecodingOptions(), extra_callbacks=(steps,))
        model = steps.model
        batches = _timed_batches(model, scratch, spec, train_split, train_limit,
                                 options, bench.bench_steps)
    elapsed = steps.times[-1] - steps.times[WARMUP - 1]
    (user0, sys0), (user1, sys1) = steps.cpu[WARMUP - 1], steps.cpu[-1]
    policy = keras.mixed_precision.global_policy()
    result = {"bench": "train", "model": config["model"], "parameters": model.count_params(),
              "steps": bench.bench_steps,
              "target_tokens_per_second": round(sum(steps.tokens[WARMUP:]) / elapsed, 1),
              "ms_per_step": round(1000 * elapsed / bench.bench_steps, 1),
              "batch_tokens": options.batch_tokens, "accumulate_steps": options.accumulate_steps,
              "precision": policy.name, "padding_share": _padding_share(batches),
              "kernel_cpu_share": round((sys1 - sys0) / max((user1 - user0) + (sys1 - sys0),
                                                            1e-9), 3)}
    flops = step_flops(model, batches)
    rates = machine_matmul_rates()
    result["model_gflop_per_step"] = (None if flops is None
                                      else round(flops / bench.bench_steps / 1e9, 2))
    result["machine_matmul_gflop_per_second"] = rates
    compute = "bfloat16" if policy.compute_dtype == "bfloat16" and "bfloat16" in rates else "float32"
    if flops is not None:
        achieved = flops / elapsed / 1e9
        result["achieved_gflop_per_second"] = round(achieved, 1)
        result["roofline_share"] = round(achieved / rates[compute], 3)
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def _timed_batches(model, model_dir, spec, split, limit, options, count):
    """The batches of the timed steps: a fresh run trains the stream's batches in order."""
    stream = trainer.training_stream(spec, split, limit, load_vocabs(model_dir), (0, -1),
                                     trainer.training_batching(model, options), options)
    out = []
    for element in stream.skip(WARMUP).take(count):
        out.extend([element] if isinstance(element[0], dict) else list(element))
    return [(int(tf.shape(f["source"])[0]), int(tf.shape(f["source"])[1]),
             int(tf.shape(f["target_in"])[1]),
             int(tf.math.count_nonzero(f["source"])), int(tf.math.count_nonzero(labels)))
            for f, labels in out]


def _padding_share(batches):
    positions = sum(b * (s + t) for b, s, t, _, _ in batches)
    real = sum(src + tgt for _, _, _, src, tgt in batches)
    return round(1 - real / max(positions, 1), 3)


def step_flops(model, batches):
    """The matrix-product FLOPs of training on `batches` [(B, S, T, ...)], or None where the
    model's graph holds a loop."""
    counts = [_graph_flops(model, s, t) for s, t in _SHAPES]
    if any(c is None for c in counts):
        return None
    design = np.array([[1, s, t, s * s, t * t, s * t] for s, t in _SHAPES], np.float64)
    coefficients = np.linalg.solve(design, np.array(counts, np.float64))
    return float(sum(b * np.dot([1, s, t, s * s, t * t, s * t], coefficients)
                     for b, s, t, _, _ in batches))


def _graph_flops(model, source_length, target_length, batch=1):
    features = {"source": tf.TensorSpec([batch, source_length], tf.int32),
                "target_in": tf.TensorSpec([batch, target_length], tf.int32)}
    labels = tf.TensorSpec([batch, target_length], tf.int32)

    @tf.function(autograph=False)
    def gradients(features, labels):
        with tf.GradientTape() as tape:
            logits = model(features, training=True)
            loss, _ = training_step.training_loss(model, labels, logits)
        return tape.gradient(loss, model.trainable_weights)
    graph = gradients.get_concrete_function(features, labels).graph
    model.take_reports()  # what tracing the model left
    return matmul_flops(graph)


_LOOPS = ("While", "StatelessWhile")


def matmul_flops(graph):
    """FLOPs (2 per multiply-add) of the matrix products of `graph` and the functions it calls;
    None if it holds a loop (its products run an unknown number of times)."""
    total = 0
    for op in graph.get_operations():
        if op.type in _LOOPS:
            return None
        if op.type in ("PartitionedCall", "StatefulPartitionedCall"):
            inner = matmul_flops(graph._get_function(op.get_attr("f").name).graph)
            if inner is None:
                return None
            total += inner
            continue
        total += _op_flops(op)
    return total


def _shape(tensor):
    return [int(d) if d is not None else 0 for d in tensor.shape.as_list()]


def _op_flops(op):
    if op.type == "MatMul":
        a, out = _shape(op.inputs[0]), _shape(op.outputs[0])
        inner = a[0] if op.get_attr("transpose_a") else a[1]
        return 2 * int(np.prod(out)) * inner
    if op.type in ("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
        a, out = _shape(op.inputs[0]), _shape(op.outputs[0])
        inner = a[-2] if op.get_attr("adj_x") else a[-1]
        return 2 * int(np.prod(out)) * inner
    if op.type == "Einsum":
        equation = op.get_attr("equation").decode()
        inputs, _ = equation.split("->")
        sizes = {}
        for letters, tensor in zip(inputs.split(","), op.inputs):
            for letter, size in zip(letters, _shape(tensor)):
                sizes[letter] = size
        return 2 * int(np.prod(list(sizes.values())))
    if op.type in ("Conv2D", "Conv3D"):
        return 2 * int(np.prod(_shape(op.outputs[0]))) * int(np.prod(_shape(op.inputs[1])[:-1]))
    if op.type in ("Conv2DBackpropInput", "Conv3DBackpropInputV2"):
        return 2 * int(np.prod(_shape(op.inputs[2]))) * int(np.prod(_shape(op.inputs[1])[:-1]))
    if op.type in ("Conv2DBackpropFilter", "Conv3DBackpropFilterV2"):
        return 2 * int(np.prod(_shape(op.inputs[2]))) * int(np.prod(_shape(op.outputs[0])[:-1]))
    return 0


def machine_matmul_rates():
    """{dtype: GFLOP/s} of the machine's matrix product (runtime.matmul_rates): float32, and
    bfloat16 where the CPU has bfloat16 instructions."""
    return runtime.matmul_rates(["float32"] + (["bfloat16"] if runtime.native_bfloat16() else []),
                                timed_chains=_TIMED_CHAINS)
