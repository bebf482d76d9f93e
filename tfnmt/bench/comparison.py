"""The CTranslate2 comparison's figures (bench/ctranslate2.py runs it): each engine's medians
and BLEU, each engine's fastest variant within MAX_BLEU_LOSS of its float32, the markdown table,
and its judgement of itself: no ratio where other processes used more than MAX_OTHERS of the
machine, and figures that cannot all be true (`incoherent`).
"""

import numpy as np


# Above this share of the machine used by other processes during any timed pass, no ratio is
# printed: CTranslate2's OpenMP threads slow down far more under outside load than
# TensorFlow's (a quiet 279 sentences/s fell to 6.9 beside a process holding one core).
MAX_OTHERS = 0.10
# A variant faster than its engine's float32 counts as the engine's fastest only if its BLEU
# on the test sentences is at most this much lower (int8 may cost more).
MAX_BLEU_LOSS = 0.3


def _ratio_text(ours, theirs):
    ratio = ours / theirs
    return f"{ratio:.2f}x slower" if ratio >= 1 else f"{1 / ratio:.2f}x faster"


def summary(engine, test, batch, bleu):
    """An engine's figures per decode: the medians over the rounds of sentences/s at `batch`
    and of batch-1 latency p50 and p90, the BLEU of its translations (sacreBLEU `bleu`), and the
    largest share of the machine others used during any timed pass (None if it could not be
    read)."""
    decodes = {}
    for name, d in engine["decodes"].items():
        loads = [run["others"] for run in d["batched"] + d["single"]]
        decodes[name] = {
            "bleu": round(bleu.corpus_score(d["outputs"], [test.references]).score, 2),
            "sentences_per_second": round(float(np.median(
                [len(test.order) / run["seconds"] for run in d["batched"]])), 2),
            "batch1_latency_ms_p50": round(float(np.median(
                [np.percentile(run["latencies_ms"], 50) for run in d["single"]])), 2),
            "batch1_latency_ms_p90": round(float(np.median(
                [np.percentile(run["latencies_ms"], 90) for run in d["single"]])), 2),
            "others_max": None if None in loads else max(loads),
            "runs": {"batched": d["batched"], "single": d["single"]}}
    return {"engine": engine["engine"], "variant": engine["variant"], "pids": engine["pids"],
            "decodes": decodes}


def agreement(engines, test):
    """Sentences on which tfnmt float32 and CTranslate2 float32 give the same translation, per
    decode. CTranslate2 stops a whole batch at its longest tfnmt limit; a sentence that tfnmt
    ended at its own limit is compared with CTranslate2's decode under that limit."""
    ours, theirs = (next(e for e in engines if (e["engine"], e["variant"]) == key)
                    for key in (("tfnmt", "float32"), ("ctranslate2", "float32")))
    out = {}
    for name, d in ours["decodes"].items():
        t = theirs["decodes"][name]
        same = sum(a in (b, c) for a, b, c in zip(d["outputs"], t["outputs"],
                                                  t["own_limit_outputs"]))
        out[name] = f"{same}/{len(test.order)}"
    return out


def busiest(engines):
    """(the largest share of the machine others used in any timed pass, whose pass) or
    (None, None) if some pass's could not be read."""
    loads = [(d["others_max"], f"{e['engine']} {e['variant']}, {name}")
             for e in engines for name, d in e["decodes"].items()]
    if any(share is None for share, _ in loads):
        return None, None
    return max(loads)


def _fastest(engines, engine, decode, key):
    """(figure, variant) of `engine`'s fastest variant by `key`, of those whose BLEU is within
    MAX_BLEU_LOSS of its float32's."""
    mine = [e for e in engines if e["engine"] == engine]
    floor = next(e for e in mine if e["variant"] == "float32")["decodes"][decode]["bleu"]
    rows = [(e["decodes"][decode][key], e["variant"]) for e in mine
            if e["decodes"][decode]["bleu"] >= floor - MAX_BLEU_LOSS - 1e-9]
    return (max if key == "sentences_per_second" else min)(rows)


def _ratio(ours, theirs, key):
    if key == "sentences_per_second":
        return f"{ours / theirs:.2f}x"
    return _ratio_text(ours, theirs)


def table(result):
    """The markdown table: per decode, sentences/s at the batch size and batch-1 latency p50
    and p90; float32 against float32, then each engine's fastest variant; no ratio when the
    machine was not quiet."""
    engines, batch = result["engines"], result["batch_size"]
    share, where = result["busiest"]
    quiet = was_quiet(result)
    rows = ["| | tfnmt float32 | CTranslate2 float32 | tfnmt / CT2 | tfnmt fastest | "
            "CTranslate2 fastest | tfnmt / CT2 |", "|---|---|---|---|---|---|---|"]
    measures = (("sentences_per_second", f"batch {batch}", "sent/s"),
                ("batch1_latency_ms_p50", "batch 1, p50", "ms"),
                ("batch1_latency_ms_p90", "batch 1, p90", "ms"))
    for name, decode in result["decodes"].items():
        label = f"beam {decode['beam_size']}" if name == "beam" else "greedy"
        for key, what, unit in measures:
            cells = []
            for pick in ("float32", "fastest"):
                pair = []
                for engine in ("tfnmt", "ctranslate2"):
                    if pick == "float32":
                        value = next(e for e in engines if (e["engine"], e["variant"]) ==
                                     (engine, "float32"))["decodes"][name][key]
                        pair.append((value, f"{value} {unit}"))
                    else:
                        value, variant = _fastest(engines, engine, name, key)
                        pair.append((value, f"{value} {unit} ({variant})"))
                ratio = _ratio(pair[0][0], pair[1][0], key) if quiet else "-"
                cells += [pair[0][1], pair[1][1], ratio]
            rows.append(f"| {label}, {what} | " + " | ".join(cells) + " |")
    beam = result["decodes"]["beam"]
    rows.append("")
    rows.append(f"Fastest: of an engine's variants whose BLEU is within {MAX_BLEU_LOSS} of its "
                "float32's.")
    rows.append(f"Same output (float32): greedy {result['agreement']['greedy']} sentences (must "
                f"be all); beam {result['agreement']['beam']} (length penalty "
                f"{beam['length_penalty']}, tfnmt mode {beam['length_penalty_mode']}; "
                f"CTranslate2 divides by |y|^alpha).")
    if share is None:
        rows.append("No ratio: the machine's load could not be read (/proc/stat).")
    elif not quiet:
        rows.append(f"No ratio: other processes used {100 * share:.0f}% of the machine during "
                    f"{where} (at most {100 * MAX_OTHERS:.0f}% for a comparison); measure on a "
                    f"quiet machine.")
    else:
        rows.append(f"Quiet machine: other processes used at most {100 * share:.1f}% of it "
                    f"during any timed pass. Each engine ran alone in its own process.")
    return "\n".join(rows)


def was_quiet(result):
    share = result["busiest"][0]
    return share is not None and share <= MAX_OTHERS


def incoherent(result):
    """The figures of a quiet run that cannot all be true, each as a sentence: sentences/s at
    batch B > 1 below one sentence at a time's 1000 / p50 latency would mean batching slows
    decoding down. (A loaded run's figures are already refused: CTranslate2's batches slow
    down under outside load far more than its single sentences.)"""
    problems = []
    if result["batch_size"] <= 1 or not was_quiet(result):
        return problems
    for e in result["engines"]:
        for name, d in e["decodes"].items():
            alone = 1000 / d["batch1_latency_ms_p50"]
            if d["sentences_per_second"] < alone:
                problems.append(
                    f"{e['engine']} {e['variant']} {name}: {d['sentences_per_second']} "
                    f"sentences/s at batch {result['batch_size']} is below the {alone:.1f} of "
                    f"one at a time at {d['batch1_latency_ms_p50']} ms p50")
    return problems
