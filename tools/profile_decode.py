"""Where decoding time goes: TensorFlow's profiler over in-process decoding of a model directory,
summed by op type.

    python tools/profile_decode.py --model_dir=M --input=FILE [--beam_size=5] [--batch_size=32]
        [--sentences=1000] [--inter_op=1] [--xla_decoding] [--decode_dtype=bfloat16]

Translates the first --sentences lines of --input, sorted by length, in batches of
--batch_size (after one warm-up batch), under the profiler; prints one row per op type (total
ms, share, count, mean us, count per decoding step) and the decoding steps (the LogSoftmax ops:
one per step of the search). --inter_op=1 runs one op at a time, so that op times add up to the
wall time instead of overlapping.

With --xla_decoding the search is the compiled loop (decoding/compiled.py), one TensorFlow op
whose inside the TensorFlow profile cannot see: XLA then traces each of its HLO ops
(`--xla_cpu_enable_xprof_traceme`), the rows are HLO op kinds (the name without its number:
`dot_add_fusion.7` counts as `dot_add_fusion`), a decoding step is one pass of the loop's body
(the count most HLO ops share), and the last line splits the wall time into the HLO ops in
the loop, those outside it, and the rest: XLA's runtime between its ops, TensorFlow's ops and
the tokenizer.
"""

import argparse
import collections
import glob
import os
import re
import statistics
import tempfile
import time

OP_EVENT = re.compile(r"^[^:]+:(\w+)$")
HLO_NUMBER = re.compile(r"\.\d+$")
# The HLO ops that hold others: their time is their body's, counted in its ops.
HLO_CONTAINERS = ("while", "conditional", "call")
# The runtime's event of one run of a compiled program.
PROGRAM_RUN = "CpuExecutable::ExecuteAsyncOnStream"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--beam_size", type=int, default=5)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--inter_op", type=int, default=0)
    parser.add_argument("--xla_decoding", action="store_true")
    parser.add_argument("--decode_dtype", default="float32", choices=("float32", "bfloat16"))
    args = parser.parse_args()

    if args.xla_decoding:
        # Read when XLA first compiles: set before TensorFlow loads.
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                                   + " --xla_cpu_enable_xprof_traceme=true").strip()
    import tensorflow as tf
    if args.inter_op:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)

    from tfnmt.decoding.options import DecodingOptions
    from tfnmt.serving.backends import from_checkpoint

    with open(args.input, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f][:args.sentences]
    _, translator = from_checkpoint(args.model_dir, options=DecodingOptions(
        beam_size=args.beam_size, xla_decoding=args.xla_decoding,
        decode_dtype=args.decode_dtype))
    lengths = translator.source_tokenizer.tokenize(tf.constant(lines)).row_lengths().numpy()
    lines = [line for _, line in sorted(zip(lengths, lines), key=lambda pair: pair[0])]
    batches = [lines[i:i + args.batch_size] for i in range(0, len(lines), args.batch_size)]
    # The compiled search compiles once per source width: warm up on every batch, not one.
    for batch in (batches if args.xla_decoding else batches[-1:]):
        translator.translate(tf.constant(batch))

    logdir = tempfile.mkdtemp(prefix="profile_decode-")
    start = time.perf_counter()
    tf.profiler.experimental.start(logdir)
    for batch in batches:
        translator.translate(tf.constant(batch))
    tf.profiler.experimental.stop()
    wall_ms = (time.perf_counter() - start) * 1000

    spaces = read_spaces(logdir)
    heading = f"{len(lines)} sentences, beam {args.beam_size}, batch {args.batch_size}"
    if args.xla_decoding:
        print_hlo_table(hlo_profile(spaces), wall_ms, len(lines), heading)
    else:
        print_op_table(*op_profile(spaces), wall_ms, len(lines), heading)


def read_spaces(logdir):
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    spaces = []
    for path in glob.glob(os.path.join(logdir, "plugins/profile/*/*.xplane.pb")):
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        spaces.append(space)
    return spaces


def _host_events(spaces):
    """(plane, event, its name) of every event of the host CPU planes."""
    for space in spaces:
        for plane in space.planes:
            if plane.name.startswith("/host:CPU"):
                for line in plane.lines:
                    for event in line.events:
                        yield plane, event, plane.event_metadata[event.metadata_id].name


def op_profile(spaces):
    """Milliseconds and count of each TensorFlow op type."""
    totals, counts = collections.Counter(), collections.Counter()
    for _, event, name in _host_events(spaces):
        # An op's event is "NAME:TYPE"; the executor's own are "Class::Method".
        match = OP_EVENT.match(name)
        if match:
            totals[match.group(1)] += event.duration_ps / 1e9
            counts[match.group(1)] += 1
    return totals, counts


def hlo_profile(spaces):
    """{"loop": (ms, counts) of each HLO op kind of the compiled loops' bodies, "outside": the
    same for the other HLO ops, "runs": runs of the compiled program, "steps": passes of the
    loop's body}. An XLA op's event carries an "hlo_op" stat (the others are TensorFlow's or
    the runtime's). An op outside the loop runs once a run of the program, one in it once a
    step (a branch's, at most): an op that ran more often than the program is the loop's. (XLA
    runs a loop's body on any of its threads, after its `while` op's own event has ended, so
    neither the thread nor the time tells.)"""
    events, runs = [], 0
    for plane, event, name in _host_events(spaces):
        if name == PROGRAM_RUN:
            runs += 1
        elif any(plane.stat_metadata[stat.metadata_id].name == "hlo_op" for stat in event.stats):
            kind = HLO_NUMBER.sub("", name)
            if kind not in HLO_CONTAINERS:
                events.append((name, kind, event.duration_ps / 1e9))
    names = collections.Counter(name for name, _, _ in events)
    loop, outside = (collections.Counter(), collections.Counter()), (collections.Counter(),
                                                                    collections.Counter())
    for name, kind, ms in events:
        totals, counts = loop if names[name] > runs else outside
        totals[kind] += ms
        counts[kind] += 1
    # Each op of the body has its own name and runs once a step (a branch's, fewer times).
    body = [count for count in names.values() if count > runs]
    steps = statistics.mode(body) if body else 0
    return {"loop": loop, "outside": outside, "runs": runs, "steps": steps}


def print_op_table(totals, counts, wall_ms, sentences, heading):
    steps = counts["LogSoftmax"] or 1  # one per step of every search
    all_ms = sum(totals.values())
    print(f"{heading}: {sentences * 1000 / wall_ms:.1f} sentences/s under the profiler; {steps} "
          f"decoding steps, {sum(counts.values()) / steps:.0f} ops and {all_ms / steps:.2f} ms "
          "of ops per step")
    _rows(totals, counts, steps)


def print_hlo_table(profile, wall_ms, sentences, heading):
    totals, counts = profile["loop"]
    steps = profile["steps"] or 1
    body_ms = sum(totals.values())
    print(f"{heading}: {sentences * 1000 / wall_ms:.1f} sentences/s under the profiler; "
          f"{profile['runs']} runs of the compiled search, {steps} decoding steps, "
          f"{sum(counts.values()) / steps:.0f} HLO ops and {body_ms / steps:.3f} ms of them per "
          "step; in the loop:")
    _rows(totals, counts, steps)
    print("outside the loop:")
    _rows(*profile["outside"], sentences, per="/sent.")
    outside_ms = sum(profile["outside"][0].values())
    rest = wall_ms - body_ms - outside_ms
    print(f"wall {wall_ms:.1f} ms ({wall_ms / sentences:.2f} ms a sentence): HLO ops in the loop "
          f"{body_ms:.1f} ms ({body_ms / steps:.3f} a step), outside it {outside_ms:.1f} ms "
          f"({outside_ms / sentences:.2f} a sentence), the rest (the runtime between ops, "
          f"TensorFlow's ops, the tokenizer) {rest:.1f} ms ({rest / sentences:.2f} a sentence)")


def _rows(totals, counts, steps, per="/step"):
    all_ms = sum(totals.values()) or 1.0
    print(f"{'op type':<34}{'ms':>10}{'share':>8}{'count':>9}{'mean us':>9}{per:>7}")
    for op_type, ms in totals.most_common(25):
        print(f"{op_type:<34}{ms:>10.1f}{ms / all_ms:>8.1%}{counts[op_type]:>9}"
              f"{ms * 1000 / counts[op_type]:>9.1f}{counts[op_type] / steps:>7.1f}")


if __name__ == "__main__":
    main()
