"""tools/profile_decode.py's sums of a profile: the XLA ops of a compiled search, inside its loop
and outside it, however XLA spreads them over threads."""

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


def test_ops_inside_the_loop_on_any_thread_count_as_the_loops_and_set_the_steps(tool):
    space = _space({
        # The thread that runs the loop: two passes of its body, a loop within it, the
        # encoder's matmul before it, and TensorFlow's own event around everything.
        1000: [("translate", 0, 5000, False), ("MatMul.7", 10, 40, True),
               ("while.1", 100, 200, True), ("while.4", 110, 20, True),
               ("dot.3", 110, 10, True), ("add_fusion.2", 130, 5, True),
               ("dot.3", 200, 12, True), ("add_fusion.2", 220, 5, True),
               ("compare_fusion.9", 240, 3, True)],
        # Another thread, its clock 50 ns later: the body's third op, twice, inside the loop
        # by absolute time (offsets 90 and 190 are 140 and 240 on the first thread's clock),
        # and one op after the loop.
        1050: [("softmax_fusion.5", 90, 8, True), ("softmax_fusion.5", 190, 8, True),
               ("copy.8", 400, 30, True)],
    })
    profile = tool.hlo_profile([space])
    loop_ms, loop_counts = profile["loop"]
    outside_ms, outside_counts = profile["outside"]
    assert profile["steps"] == 2  # most body ops ran twice; the branch's once
    assert dict(loop_counts) == {"dot": 2, "add_fusion": 2, "softmax_fusion": 2,
                                 "compare_fusion": 1}
    assert loop_ms["dot"] == pytest.approx(22e-6)  # ms
    assert loop_ms["softmax_fusion"] == pytest.approx(16e-6)
    assert dict(outside_counts) == {"MatMul": 1, "copy": 1}
    assert outside_ms["MatMul"] == pytest.approx(40e-6)
    # The inner loop lies within the outer one: 200 ns of loop, not 220.
    assert profile["loops_ms"] == pytest.approx(200e-6)


def test_the_hlo_table_splits_the_wall_time_into_loop_ops_loop_and_rest(tool, capsys):
    ms = 1_000_000  # ns
    space = _space({1000: [("while.1", 0, 10 * ms, True), ("dot.3", 0, 3 * ms, True),
                           ("dot.3", 5 * ms, 3 * ms, True), ("fusion.2", 8 * ms, ms // 2, True),
                           ("fusion.2", 9 * ms, ms // 2, True),
                           ("MatMul.7", 20 * ms, 5 * ms, True)]})
    tool.print_hlo_table(tool.hlo_profile([space]), wall_ms=40.0, sentences=2, heading="h")
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == ("wall 40.0 ms (20.00 ms a sentence): the loop's HLO ops 7.0 ms (3.500 a "
                    "step), the loop between them 3.0 ms (1.500 a step), HLO ops outside the "
                    "loop 5.0 ms, the rest (TensorFlow ops, tokenizer, runtime) 25.0 ms")


def test_tensorflow_ops_are_summed_by_type_and_the_executors_events_are_not(tool):
    space = _space({1000: [("encoder/dense/MatMul:MatMul", 0, 10, False),
                           ("decoder/MatMul_1:MatMul", 20, 30, False),
                           ("ExecutorState::Process", 0, 100, False),
                           ("LogSoftmax:LogSoftmax", 60, 5, False)]})
    totals, counts = tool.op_profile([space])
    assert dict(counts) == {"MatMul": 2, "LogSoftmax": 1}
    assert totals["MatMul"] == pytest.approx(40e-6)
