"""Times the kernels a decoding step's attention could use, on its shapes: why the step's
caches are float32 and its attention products go to BatchMatMulV3 (BUILD.md, the model
contract; docs/benchmarks.md, "Fewer and cheaper ops in each step").

    python tools/step_kernels.py [--rows=160] [--heads=4] [--head_dim=64] [--lengths=8,20,40]

For each cache length t and dtype: q [rows, heads, 1, head_dim] times the keys [rows, heads, t,
head_dim] transposed, by tf.matmul (oneDNN's kernel on a oneDNN build) and by BatchMatMulV3
(TensorFlow's own); appending a position to the cache (concat) and reordering its rows
(gather). Each figure is the mean over 200 runs inside one tf.function, microseconds, a small
add included.
"""

import argparse
import time

import tensorflow as tf

REPEATS = 200


def timed(fn):
    """Mean microseconds of fn(zero) over REPEATS runs in one traced loop."""
    @tf.function
    def loop():
        total = tf.constant(0.0)
        for i in tf.range(REPEATS):
            # A zero the graph cannot fold, so that every run computes.
            total += tf.reduce_sum(tf.cast(fn(tf.cast(i, tf.float32) * 0.0), tf.float32)[..., :1])
        return total

    loop()
    start = time.perf_counter()
    loop()
    return (time.perf_counter() - start) / REPEATS * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=160)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head_dim", type=int, default=64)
    parser.add_argument("--lengths", default="8,20,40")
    args = parser.parse_args()
    rows, heads, dim = args.rows, args.heads, args.head_dim
    order = tf.random.shuffle(tf.range(rows))
    print("dtype     t  matmul  BatchMatMulV3  concat  gather   (us)")
    for dtype in (tf.float32, tf.bfloat16):
        for length in (int(t) for t in args.lengths.split(",")):
            q = tf.cast(tf.random.normal([rows, heads, 1, dim]), dtype)
            keys = tf.cast(tf.random.normal([rows, heads, length, dim]), dtype)

            def shifted(zero, x=q):
                return x + tf.cast(zero, dtype)

            figures = [
                timed(lambda z: tf.matmul(shifted(z), keys, transpose_b=True)),
                timed(lambda z: tf.raw_ops.BatchMatMulV3(x=shifted(z), y=keys, Tout=dtype,
                                                         adj_y=True)),
                timed(lambda z: tf.concat([keys, shifted(z)], axis=2)),
                timed(lambda z: tf.gather(keys, order + tf.cast(z, tf.int32))),
            ]
            print(f"{dtype.name:9} {length:2} " + "  ".join(f"{f:6.0f}" for f in figures))


if __name__ == "__main__":
    main()
