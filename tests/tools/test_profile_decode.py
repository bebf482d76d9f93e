"""tools/profile_decode.py's sums of a profile: the XLA ops of a compiled search, inside its loop
and outside it, however XLA spreads them over threads and time."""

import importlib.util
import os

import pytest
from tensorflow.tsl.profiler.protobuf import xplane_pb2

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location(
        "profile_decode", os.path.join(ROOT, "tools", "profile_decode.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _space(threads):
    """An XSpace of one host plane; `threads`: {start ns: [(name, offset ns, duration ns,
    is an HLO op)]}."""
    space = xplane_pb2.XSpace()
    plane = space.planes.add(name="/host:CPU")
    plane.stat_metadata[1].id, plane.stat_metadata[1].name = 1, "hlo_op"
    plane.stat_metadata[2].id, plane.stat_metadata[2].name = 2, "tf_function_call"
    ids = {}
    for start, events in threads.items():
        line = plane.lines.add(timestamp_ns=start)
        for name, offset, duration, hlo in events:
            if name not in ids:
                ids[name] = len(ids) + 1
                plane.event_metadata[ids[name]].id = ids[name]
                plane.event_metadata[ids[name]].name = name
            event = line.events.add(metadata_id=ids[name], offset_ps=offset * 1000,
                                    duration_ps=duration * 1000)
            event.stats.add(metadata_id=1 if hlo else 2, int64_value=7)
    return space


def test_ops_that_ran_more_often_than_the_program_are_the_loops_whatever_thread_or_time(tool):
    run = "CpuExecutable::ExecuteAsyncOnStream"
    space = _space({
        # Two runs of the program (two sentences): the encoder's matmul once a run; the
        # body's ops once a step (3 and 2 steps), one of them on another thread, and some after
        # their loop's own event ended (XLA's async runtime); a branch taken once in all.
        1000: [("translate", 0, 5000, False), (run, 0, 900, False), ("MatMul.7", 10, 40, True),
               ("while.1", 100, 5, True), ("dot.3", 110, 10, True),
               ("add_fusion.2", 130, 5, True), ("dot.3", 200, 12, True),
               ("add_fusion.2", 220, 5, True), ("dot.3", 300, 10, True),
               ("add_fusion.2", 320, 5, True),
               (run, 1000, 900, False), ("MatMul.7", 1010, 40, True), ("while.1", 1100, 5, True),
               ("dot.3", 1110, 10, True), ("add_fusion.2", 1130, 5, True),
               ("dot.3", 1200, 10, True), ("add_fusion.2", 1220, 5, True),
               ("compare_fusion.9", 1240, 3, True)],
        5000: [("softmax_fusion.5", 0, 8, True), ("softmax_fusion.5", 100, 8, True),
               ("softmax_fusion.5", 200, 8, True), ("softmax_fusion.5", 1000, 8, True),
               ("softmax_fusion.5", 1100, 8, True)],
    })
    profile = tool.hlo_profile([space])
    loop_ms, loop_counts = profile["loop"]
    outside_ms, outside_counts = profile["outside"]
    assert profile["runs"] == 2
    assert profile["steps"] == 5  # most body ops ran 3 + 2 times; the branch's once
    assert dict(loop_counts) == {"dot": 5, "add_fusion": 5, "softmax_fusion": 5}
    assert loop_ms["dot"] == pytest.approx(52e-6)  # ms
    assert loop_ms["softmax_fusion"] == pytest.approx(40e-6)
    # The branch ran once in two runs: by count it is not the loop's (a rare op's time is
    # small either way); the loops' own events are neither.
    assert dict(outside_counts) == {"MatMul": 2, "compare_fusion": 1}
    assert outside_ms["MatMul"] == pytest.approx(80e-6)


def test_the_hlo_table_splits_the_wall_time_into_loop_ops_outside_ops_and_the_rest(tool, capsys):
    ms = 1_000_000  # ns
    space = _space({1000: [("CpuExecutable::ExecuteAsyncOnStream", 0, 30 * ms, False),
                           ("while.1", 0, ms, True), ("dot.3", 0, 3 * ms, True),
                           ("dot.3", 5 * ms, 3 * ms, True), ("fusion.2", 8 * ms, ms // 2, True),
                           ("fusion.2", 9 * ms, ms // 2, True),
                           ("MatMul.7", 20 * ms, 5 * ms, True)]})
    tool.print_hlo_table(tool.hlo_profile([space]), wall_ms=40.0, sentences=2, heading="h")
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == ("wall 40.0 ms (20.00 ms a sentence): HLO ops in the loop 7.0 ms (3.500 a "
                    "step), outside it 5.0 ms (2.50 a sentence), the rest (the runtime between "
                    "ops, TensorFlow's ops, the tokenizer) 28.0 ms (14.00 a sentence)")


def test_tensorflow_ops_are_summed_by_type_and_the_executors_events_are_not(tool):
    space = _space({1000: [("encoder/dense/MatMul:MatMul", 0, 10, False),
                           ("decoder/MatMul_1:MatMul", 20, 30, False),
                           ("ExecutorState::Process", 0, 100, False),
                           ("LogSoftmax:LogSoftmax", 60, 5, False)]})
    totals, counts = tool.op_profile([space])
    assert dict(counts) == {"MatMul": 2, "LogSoftmax": 1}
    assert totals["MatMul"] == pytest.approx(40e-6)
