"""`tfnmt bench --bench=translate` and `--bench=decode`: sentences/s at a batch size and batch-1
latency, of one translator or of several exports side by side."""

import os
import time

import numpy as np
import tensorflow as tf

from tfnmt.decoding.batches import translate_sentences
from tfnmt.errors import ConfigError


def speed(translator, sentences, batch, latency_sentences):
    """The figures of `translator` (a decoding Backend) on `sentences`: `batch` at a time (by
    length, as `translate` batches them), then the first `latency_sentences` one at a time."""
    if not sentences:
        raise ConfigError("no test sentences to translate")
    translate_sentences(translator, sentences[:batch], batch)  # traces the function
    start = time.perf_counter()
    translate_sentences(translator, sentences, batch)
    batched = time.perf_counter() - start
    latencies = []
    for sentence in sentences[:latency_sentences]:
        start = time.perf_counter()
        translator.translate(tf.constant([sentence]))
        latencies.append(1000 * (time.perf_counter() - start))
    return {"sentences": len(sentences), "batch_size": batch, "beam_size": translator.beam_size,
            "sentences_per_second": round(len(sentences) / batched, 2),
            **_latency_figures(latencies, 1)}


def _latency_figures(milliseconds, digits):
    return {"batch1_latency_ms_p50": round(float(np.percentile(milliseconds, 50)), digits),
            "batch1_latency_ms_p90": round(float(np.percentile(milliseconds, 90)), digits),
            "batch1_latency_ms_mean": round(float(np.mean(milliseconds)), digits)}


def export_translators(paths):
    """[(path, signature name, translator)] of the exports at `paths`: each SavedModel's
    signatures, serving_default first, or a TFLite flatbuffer's one function."""
    from tfnmt.exporters import saved_model, tflite
    entries = []
    for path in paths:
        if os.path.isfile(os.path.join(path, tflite.MODEL_FILE)):
            entries.append((path, "tflite", tflite.TFLiteTranslator(path)))
            continue
        first = saved_model.SavedModelTranslator(path)
        # `score` reads given translations, `prefix` given starts: not a decoding of the sources.
        names = sorted((n for n in first.signatures() if n not in ("score", "prefix")),
                       key=lambda n: (n != "serving_default", n))
        entries += [(path, name, first if name == "serving_default" else
                     saved_model.SavedModelTranslator(path, name, module=first.module))
                    for name in names]
    return entries


def side_by_side(entries, sentences, batch, latency_sentences):
    """The figures of each of `entries` (export_translators) on the same `sentences`, measured
    in turn batch by batch so that a busy machine slows all alike, with each one's speed-up
    over the first (the baseline)."""
    sentences = [s for s in sentences if s.strip()]
    if not sentences:
        raise ConfigError("no test sentences to translate")
    order = sorted(sentences, key=len)
    batches = [tf.constant(order[i:i + batch]) for i in range(0, len(order), batch)]
    for _, _, translator in entries:  # first calls initialise the graphs
        translator.translate(batches[0])
        translator.translate(tf.constant(order[:1]))
    batched = [0.0] * len(entries)
    for inputs in batches:
        for i, (_, _, translator) in enumerate(entries):
            start = time.perf_counter()
            translator.translate(inputs)
            batched[i] += time.perf_counter() - start
    latencies = [[] for _ in entries]
    for sentence in sentences[:latency_sentences]:
        inputs = tf.constant([sentence])
        for i, (_, _, translator) in enumerate(entries):
            start = time.perf_counter()
            translator.translate(inputs)
            latencies[i].append(1000 * (time.perf_counter() - start))
    rows = []
    for (path, name, translator), seconds, latency in zip(entries, batched, latencies):
        rows.append({"saved_model": path, "signature": name,
                     "model": (translator.config or {}).get("model"),
                     "beam_size": translator.beam_size,
                     "sentences_per_second": round(len(sentences) / seconds, 2),
                     **_latency_figures(latency, 2)})
    base = rows[0]
    for row in rows:
        row["throughput_speedup"] = round(row["sentences_per_second"] / base["sentences_per_second"], 2)
        row["latency_speedup"] = round(base["batch1_latency_ms_p50"] / row["batch1_latency_ms_p50"], 2)
    return {"bench": "decode", "sentences": len(sentences), "batch_size": batch,
            "latency_sentences": len(latencies[0]),
            "baseline": f"{base['saved_model']}:{base['signature']}", "results": rows}
