"""Where decoding time goes: TensorFlow's profiler over in-process decoding of a model directory,
summed by op type.

    python tools/profile_decode.py --model_dir=M --input=FILE [--beam_size=5] [--batch_size=32]
        [--sentences=1000] [--inter_op=1]

Translates the first --sentences lines of --input, sorted by length, in batches of
--batch_size (after one warm-up batch), under the profiler; prints one row per op type (total
ms, share, count, mean us, count per decoding step) and the decoding steps (the LogSoftmax ops:
one per step of the search). --inter_op=1 runs one op at a time, so that op times add up to the
wall time instead of overlapping.
"""

import argparse
import collections
import glob
import os
import re
import tempfile
import time

OP_EVENT = re.compile(r"^[^:]+:(\w+)$")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--beam_size", type=int, default=5)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--inter_op", type=int, default=0)
    args = parser.parse_args()

    import tensorflow as tf
    if args.inter_op:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from tfnmt.decoding.options import DecodingOptions
    from tfnmt.serving.backends import from_checkpoint

    with open(args.input, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f][:args.sentences]
    _, translator = from_checkpoint(args.model_dir, options=DecodingOptions(beam_size=args.beam_size))
    lengths = translator.source_tokenizer.tokenize(tf.constant(lines)).row_lengths().numpy()
    lines = [line for _, line in sorted(zip(lengths, lines), key=lambda pair: pair[0])]
    batches = [lines[i:i + args.batch_size] for i in range(0, len(lines), args.batch_size)]
    translator.translate(tf.constant(batches[-1]))

    logdir = tempfile.mkdtemp(prefix="profile_decode-")
    start = time.perf_counter()
    tf.profiler.experimental.start(logdir)
    for batch in batches:
        translator.translate(tf.constant(batch))
    tf.profiler.experimental.stop()
    wall = time.perf_counter() - start

    totals, counts = collections.Counter(), collections.Counter()
    for path in glob.glob(os.path.join(logdir, "plugins/profile/*/*.xplane.pb")):
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        for plane in space.planes:
            if not plane.name.startswith("/host:CPU"):
                continue
            for line in plane.lines:
                for event in line.events:
                    # An op's event is "NAME:TYPE"; the executor's own are "Class::Method".
                    match = OP_EVENT.match(plane.event_metadata[event.metadata_id].name)
                    if match:
                        totals[match.group(1)] += event.duration_ps / 1e9
                        counts[match.group(1)] += 1
    steps = counts["LogSoftmax"] or 1  # one per step of every search
    all_ms = sum(totals.values())
    print(f"{len(lines)} sentences, beam {args.beam_size}, batch {args.batch_size}: "
          f"{len(lines) / wall:.1f} sentences/s under the profiler; {steps} decoding steps, "
          f"{sum(counts.values()) / steps:.0f} ops and {all_ms / steps:.2f} ms of ops per step")
    print(f"{'op type':<28}{'ms':>10}{'share':>8}{'count':>9}{'mean us':>9}{'/step':>7}")
    for op_type, ms in totals.most_common(25):
        print(f"{op_type:<28}{ms:>10.1f}{ms / all_ms:>8.1%}{counts[op_type]:>9}"
              f"{ms * 1000 / counts[op_type]:>9.1f}{counts[op_type] / steps:>7.1f}")


if __name__ == "__main__":
    main()
