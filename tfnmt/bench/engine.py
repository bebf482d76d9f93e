"""One engine's timings for `tfnmt bench --compare_ctranslate2`, in a process of its own:

    python -m tfnmt.bench.engine SPEC.json RESULT.json

The comparison (bench/ctranslate2.py) starts one such process per engine, variant and
round, one after the other, so that neither engine's threads, memory or caches meet the
other's. A process imports only its own engine: CTranslate2's never loads TensorFlow.

SPEC: {"engine": "tfnmt" | "ctranslate2", "variant": a tfnmt export's name or a CTranslate2
compute type, "decodes": {name: the tfnmt SavedModel's path, or CTranslate2's beam_size and
length_penalty}, "batches": [[line, ...], ...], "singles": [line, ...], and for
CTranslate2 "model_dir", "source_spm", "target_spm", "compute_type" (default: the variant),
"threads" (intra_threads), "max_input_length", each line's
"limits" (tfnmt's length limit, eos excluded) and "own_limits" (whether to decode each line with
its own limit too), "parallel": batches in flight at once in the timed pass (1: one after
another; N: submitted from N threads, CTranslate2's inter_threads)}.

RESULT: {"pid", "engine", "variant", "decodes": {name: {"outputs": the batches' translations,
"batched": [{"seconds", "others"}], "single": [{"latencies_ms", "others"}] (one timed pass each:
the comparison joins its rounds' lists), and for CTranslate2 with "own_limits"
"own_limit_outputs": each line decoded with its own limit}}}.
A warm-up pass over every batch and single line comes first and is not timed.
"""

import json
import os
import sys
import time


def _machine_busy_seconds():
    """(CPU seconds all processes have used since boot, number of CPUs), from /proc/stat; None
    where there is no /proc/stat."""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    # user nice system idle iowait irq softirq steal: all but idle and iowait are busy, steal
    # included (a hypervisor's other guests slow this one down as much as a local process).
    user, nice, system, _, _, irq, softirq, steal = (int(x) for x in lines[0].split()[1:9])
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK"), cpus


class MachineLoad:
    """Over a `with` block: `seconds` (wall time) and `others`, the share of the machine's CPUs
    that other processes used meanwhile (all CPUs' busy time minus this process's own, over
    wall time x CPUs; None where it cannot be read). /proc/stat counts in clock ticks (10 ms)."""

    def __enter__(self):
        self._start = (time.perf_counter(), time.process_time(), _machine_busy_seconds())
        return self

    def __exit__(self, *exc_info):
        wall, own, busy = time.perf_counter(), time.process_time(), _machine_busy_seconds()
        self.seconds = wall - self._start[0]
        if busy is None or self._start[2] is None:
            self.others = None
            return
        others = (busy[0] - self._start[2][0]) - (own - self._start[1])
        # Clock ticks make a pass of a few ticks read anywhere from 0 to over 100%.
        self.others = round(min(1.0, max(0.0, others) / (self.seconds * busy[1])), 4)


def _tfnmt_engine(path):
    import tensorflow as tf

    from tfnmt.exporters.saved_model import SavedModelTranslator
    translator = SavedModelTranslator(path)

    def translate(lines):
        out = translator.translate(tf.constant(lines))["translations"].numpy()
        return [t.decode("utf-8") for t in out]
    return translate


def _ctranslate2_engine(spec, decode):
    import ctranslate2
    import sentencepiece as spm
    model = ctranslate2.Translator(spec["model_dir"], device="cpu",
                                   compute_type=spec.get("compute_type", spec["variant"]),
                                   intra_threads=spec["threads"], inter_threads=spec["parallel"])
    source = spm.SentencePieceProcessor(model_file=spec["source_spm"])
    target = spm.SentencePieceProcessor(model_file=spec["target_spm"])
    limits = spec["limits"]

    def translate(lines, max_length=None):
        """`max_length` (eos excluded): by default the batch's longest tfnmt limit, so that a
        sentence that never ends costs both engines alike."""
        results = model.translate_batch(
            source.encode(lines, out_type=str), beam_size=decode["beam_size"],
            # The same rule: eos is banned at steps t < min_decoding_length in both engines.
            length_penalty=decode["length_penalty"],
            min_decoding_length=decode["min_decode_length"],
            max_decoding_length=max_length or max(limits[line] for line in lines),
            max_input_length=spec["max_input_length"] + 1)
        return [target.decode(r.hypotheses[0]) for r in results]
    return translate


def _own_limits(translate, lines, limits, batch):
    """Each line decoded with its own length limit: lines grouped by limit, in batches."""
    by_limit = {}
    for line in lines:
        by_limit.setdefault(limits[line], []).append(line)
    out = {}
    for limit, group in by_limit.items():
        for i in range(0, len(group), batch):
            out.update(zip(group[i:i + batch], translate(group[i:i + batch], limit)))
    return [out[line] for line in lines]


def measure(translate, batches, singles, parallel=1):
    """The timings of one decode: a warm-up pass, then one timed pass over every batch (in turn,
    or `parallel` at a time from as many threads) and one over every single line in turn, each
    with the machine's load over it."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(parallel) as pool:
        outputs = [t for out in pool.map(translate, batches) for t in out]
        for line in singles:
            translate([line])
        with MachineLoad() as load:
            list(pool.map(translate, batches))
    batched = {"seconds": round(load.seconds, 4), "others": load.others}
    latencies = []
    with MachineLoad() as load:
        for line in singles:
            start = time.perf_counter()
            translate([line])
            latencies.append(round(1000 * (time.perf_counter() - start), 3))
    single = {"latencies_ms": latencies, "others": load.others}
    return {"outputs": outputs, "batched": [batched], "single": [single]}


def run(spec):
    decodes = {}
    for name, decode in spec["decodes"].items():
        if spec["engine"] == "tfnmt":
            translate = _tfnmt_engine(decode)
        else:
            translate = _ctranslate2_engine(spec, decode)
        decodes[name] = measure(translate, spec["batches"], spec["singles"],
                                spec.get("parallel", 1))
        if spec["engine"] == "ctranslate2" and spec["own_limits"]:
            lines = [line for lines in spec["batches"] for line in lines]
            decodes[name]["own_limit_outputs"] = _own_limits(
                translate, lines, spec["limits"], max(len(b) for b in spec["batches"]))
    return {"pid": os.getpid(), "engine": spec["engine"], "variant": spec["variant"],
            "decodes": decodes}


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        result = run(json.load(f))
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(result, f)
