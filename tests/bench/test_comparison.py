"""The CTranslate2 comparison's judgement of its own figures (bench/comparison.py,
bench/engine.py): the machine's other load, and figures that cannot all be true."""

import subprocess
import sys
import time

import pytest

from tfnmt.bench import comparison
from tfnmt.bench import ctranslate2 as compare
from tfnmt.bench.engine import MachineLoad


def test_machine_load_counts_a_busy_sibling_and_not_this_process():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # the sibling is running
        with MachineLoad() as sleeping:
            time.sleep(1.0)
    finally:
        busy.kill()
    # One of the two cores: half the machine, less what the rest of the suite takes from it.
    assert sleeping.others > 0.25, sleeping.others
    assert sleeping.seconds == pytest.approx(1.0, abs=0.2)


def _engine(engine, variant, sps, p50, others=0.01, bleu=30.0):
    d = {"sentences_per_second": sps, "batch1_latency_ms_p50": p50,
         "batch1_latency_ms_p90": p50 * 1.5, "others_max": others, "bleu": bleu}
    return {"engine": engine, "variant": variant, "pids": [1], "decodes": {"beam": d, "greedy": d}}


def _result(engines, batch=32):
    result = {"batch_size": batch, "engines": engines,
              "decodes": {"beam": {"beam_size": 5, "length_penalty": 0.6,
                                   "length_penalty_mode": "length"},
                          "greedy": {"beam_size": 1, "length_penalty": 0.0,
                                     "length_penalty_mode": "length"}},
              "agreement": {"beam": "9/10", "greedy": "10/10"}}
    result["busiest"] = comparison.busiest(engines)
    return result


QUIET = [_engine("tfnmt", "float32", 154.0, 35.0), _engine("ctranslate2", "float32", 279.0, 8.2),
         _engine("ctranslate2", "int8", 173.0, 7.5)]


def test_a_quiet_run_prints_both_ratios_and_each_engines_fastest():
    rows = comparison.table(_result(QUIET)).splitlines()
    beam = rows[2].strip("|").split(" | ")
    assert [c.strip() for c in beam] == [
        "beam 5, batch 32", "154.0 sent/s", "279.0 sent/s", "0.55x",
        "154.0 sent/s (float32)", "279.0 sent/s (float32)", "0.55x"]
    p50 = [c.strip() for c in rows[3].strip("|").split(" | ")]
    assert p50[3] == "4.27x slower" and p50[5] == "7.5 ms (int8)" and p50[6] == "4.67x slower"
    assert rows[-1].startswith("Quiet machine: other processes used at most 1.0%")
    assert comparison.incoherent(_result(QUIET)) == []


def test_a_faster_variant_that_loses_bleu_is_not_the_fastest():
    engines = [_engine("tfnmt", "float32", 100.0, 30.0),
               _engine("ctranslate2", "float32", 120.0, 10.0, bleu=30.0),
               _engine("ctranslate2", "int8", 200.0, 5.0, bleu=29.6),
               _engine("ctranslate2", "float32, parallel batches", 150.0, 12.0, bleu=29.75)]
    assert comparison._fastest(engines, "ctranslate2", "beam", "sentences_per_second") == (
        150.0, "float32, parallel batches")
    assert comparison._fastest(engines, "ctranslate2", "beam", "batch1_latency_ms_p50") == (
        10.0, "float32")
    engines[2]["decodes"]["beam"]["bleu"] = 29.7  # a loss of 0.3 is allowed
    assert comparison._fastest(engines, "ctranslate2", "beam", "sentences_per_second") == (
        200.0, "int8")


def test_ctranslate2_runs_each_compute_type_for_latency_and_for_throughput(monkeypatch):
    monkeypatch.setattr(compare, "CORES", 2)
    settings = compare.ctranslate2_settings({"int8", "float32", "int8_float32"})
    assert settings == [
        {"variant": "float32", "threads": 2, "parallel": 1},
        {"variant": "float32, parallel batches", "compute_type": "float32", "threads": 1,
         "parallel": 2},
        {"variant": "int8", "threads": 2, "parallel": 1},
        {"variant": "int8, parallel batches", "compute_type": "int8", "threads": 1,
         "parallel": 2}]


def test_parallel_batches_are_in_flight_together_and_keep_their_order():
    import threading

    from tfnmt.bench.engine import measure
    running, most, lock = [0], [0], threading.Lock()

    def translate(lines):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return [line.upper() for line in lines]
    batches = [["a", "b"], ["c"], ["d", "e"], ["f"]]
    result = measure(translate, batches, ["x"], parallel=2)
    assert result["outputs"] == ["A", "B", "C", "D", "E", "F"] and most[0] == 2
    most[0] = 0
    measure(translate, batches, ["x"])
    assert most[0] == 1


def test_a_loaded_run_prints_no_ratio():
    engines = QUIET[:2] + [_engine("ctranslate2", "int8", 173.0, 7.5, others=0.37)]
    rows = comparison.table(_result(engines)).splitlines()
    assert all(row.strip("|").split(" | ")[3].strip() == "-" for row in rows[2:8])
    assert rows[-1].startswith("No ratio: other processes used 37% of the machine during "
                               "ctranslate2 int8, ")


def test_an_unreadable_load_prints_no_ratio():
    engines = QUIET[:2] + [_engine("ctranslate2", "int8", 173.0, 7.5, others=None)]
    assert comparison.table(_result(engines)).splitlines()[-1] == (
        "No ratio: the machine's load could not be read (/proc/stat).")


def test_batching_slower_than_one_at_a_time_is_incoherent():
    # 20 sentences/s at batch 32, where one at a time takes 35 ms (28.6 sentences/s).
    doctored = [_engine("tfnmt", "float32", 20.0, 35.0)] + QUIET[1:]
    problems = comparison.incoherent(_result(doctored))
    assert len(problems) == 2 and problems[0].startswith(
        "tfnmt float32 beam: 20.0 sentences/s at batch 32 is below the 28.6 of one at a time")
    assert comparison.incoherent(_result(doctored, batch=1)) == []
    loaded = doctored[:2] + [_engine("ctranslate2", "int8", 173.0, 7.5, others=0.37)]
    assert comparison.incoherent(_result(loaded)) == []  # already refused, as the table says


def test_an_incoherent_measurement_fails_the_bench(monkeypatch, capsys):
    from conftest import run_cli

    from tfnmt.cli import bench
    doctored = _result([_engine("tfnmt", "float32", 20.0, 35.0)] + QUIET[1:])
    doctored.update(table="the table", incoherent=comparison.incoherent(doctored))
    monkeypatch.setattr(bench, "bench_translate", lambda options: doctored)
    assert run_cli("bench", "--bench=translate") == 2
    out, err = capsys.readouterr()
    assert out.startswith("the table\n")  # the figures are still shown
    assert err.strip().splitlines() == [
        "tfnmt bench: error: incoherent measurement, do not use these figures: "
        + "; ".join(doctored["incoherent"])]


def test_the_bfloat16_variant_is_measured_where_the_cpu_has_bfloat16_products():
    names = [name for name, _ in compare.native_variants(["avx2", "avx512f"])]
    assert names == ["float32", "float32 xla", "float32 intra-op 1", "float32 xla intra-op 1",
                     "float32 intra-op 1, parallel batches", "float32 intra-op 1, shortlist"]
    names = [name for name, _ in compare.native_variants(["avx512f", "avx512_bf16"])]
    assert names == ["float32", "float32 xla", "bfloat16", "float32 intra-op 1",
                     "float32 xla intra-op 1", "bfloat16 intra-op 1",
                     "float32 intra-op 1, parallel batches", "bfloat16 intra-op 1, parallel batches",
                     "float32 intra-op 1, shortlist", "bfloat16 intra-op 1, shortlist"]
    assert "bfloat16" in [name for name, _ in compare.native_variants(["amx_bf16"])]


def test_an_engine_process_starts_with_its_variants_environment(monkeypatch, tmp_path):
    """One thread per op is a TensorFlow runtime setting, not an export: the variant's engine
    process starts with TF_NUM_INTRAOP_THREADS=1, the others with the environment as it is."""
    import json
    started = []

    def run(args, env, **kwargs):
        started.append(env.get("TF_NUM_INTRAOP_THREADS"))
        with open(args[-1], "w", encoding="utf-8") as f:
            json.dump({"pid": 0}, f)
        return subprocess.CompletedProcess(args, 0, "", "")
    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    variants = [name for name, _ in compare.TFNMT_VARIANTS]
    assert set(compare.VARIANT_ENV) <= set(variants)
    for variant in variants:
        compare._run_engine({"engine": "tfnmt", "variant": variant,
                             "env": compare.VARIANT_ENV.get(variant, {})}, str(tmp_path))
    assert started == [None, None, None, "1", "1", "1", "1", "1", "1", "1"]


def test_a_saved_model_stands_for_its_own_variant_only():
    from tfnmt.decoding.options import DecodingOptions
    variants = dict(compare.TFNMT_VARIANTS)
    exported = DecodingOptions(beam_size=5, decode_dtype="bfloat16")
    assert compare.variant_options(exported, variants["bfloat16"]) == exported
    for name in ("float32", "float32 xla"):
        made = compare.variant_options(exported, variants[name])
        assert made != exported and made.decode_dtype == "float32" and made.beam_size == 5
    assert compare.variant_options(exported, variants["float32 xla"]).xla_decoding


def test_the_engines_take_turns_round_by_round_and_each_rounds_pass_is_kept(monkeypatch):
    # Three passes in a row per engine put a change in the machine's own speed on one engine.
    calls = []

    def one_round(spec, tmp):
        calls.append((spec["variant"], spec["own_limits"]))
        seconds = len(calls)  # each call's pass told apart by its time
        d = {"outputs": ["x"], "batched": [{"seconds": seconds, "others": 0.0}],
             "single": [{"latencies_ms": [float(seconds)], "others": 0.0}]}
        return {"pid": 100 + len(calls), "engine": "e", "variant": spec["variant"],
                "decodes": {"beam": d}}
    monkeypatch.setattr(compare, "_run_engine", one_round)
    merged = compare._interleaved([{"variant": "a"}, {"variant": "b"}], "tmp")
    assert calls == [("a", True), ("b", True)] + [("a", False), ("b", False)] * 2
    a, b = merged
    assert [run["seconds"] for run in a["decodes"]["beam"]["batched"]] == [1, 3, 5]
    assert [run["latencies_ms"] for run in b["decodes"]["beam"]["single"]] == [[2.0], [4.0], [6.0]]
    assert a["pids"] == [101, 103, 105] and b["pids"] == [102, 104, 106] and "pid" not in a
