"""Times the matrix products a decoding step makes (a batch of 32 sentences x beam 5 = 160 rows,
Transformer-small's widths, its 4,000-piece output layer) in float32, in bfloat16 and in int8
through each int8 product TensorFlow offers on a CPU: `tf.linalg.matmul` of int8 operands into
int32, and `QuantizedMatMul` (quint8 x quint8 into qint32: the one kernel it registers on a CPU), the op of
TensorFlow's quantized graphs. Whether an int8 decoder can be faster than float32 here: docs/benchmarks.md, "int8".

    python tools/int8_matmul.py
"""

import time

import numpy as np
import tensorflow as tf

SHAPES = ((160, 256, 1024), (160, 1024, 256), (160, 256, 4000), (32, 256, 4000))
REPEATS = 300


def _time(function):
    function()
    start = time.perf_counter()
    for _ in range(REPEATS):
        function()
    return (time.perf_counter() - start) / REPEATS * 1e6


def products(m, k, n):
    rng = np.random.default_rng(0)
    a8, b8 = rng.integers(-127, 127, (m, k)), rng.integers(-127, 127, (k, n))
    a, b = tf.constant(a8, tf.float32), tf.constant(b8, tf.float32)
    ai, bi = tf.constant(a8, tf.int8), tf.constant(b8, tf.int8)
    au, bq = tf.constant(a8 + 128, tf.quint8), tf.constant(b8 + 128, tf.quint8)
    zero, one = tf.constant(0.0), tf.constant(1.0)
    return {
        "float32": tf.function(lambda: tf.linalg.matmul(a, b)),
        "bfloat16": tf.function(lambda: tf.linalg.matmul(tf.cast(a, tf.bfloat16),
                                                         tf.cast(b, tf.bfloat16))),
        "int8 matmul": tf.function(lambda: tf.linalg.matmul(ai, bi, output_type=tf.int32)),
        "QuantizedMatMul": tf.function(lambda: tf.raw_ops.QuantizedMatMul(
            a=au, b=bq, min_a=zero, max_a=one, min_b=zero, max_b=one, Toutput=tf.qint32)[0]),
    }


def main():
    print("| M x K x N | " + " | ".join(products(1, 1, 1)) + " |")
    print("|---" * 5 + "|")
    for shape in SHAPES:
        cells = []
        for name, function in products(*shape).items():
            try:
                cells.append(f"{_time(function):.0f} us")
            except (tf.errors.OpError, TypeError) as e:
                cells.append(f"fails: {type(e).__name__}")
        print(f"| {' x '.join(map(str, shape))} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
