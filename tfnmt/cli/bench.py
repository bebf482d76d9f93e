"""tfnmt bench: training throughput and translation speed, printed as one JSON line each.

  --bench=train      target tokens/s and ms/step of `tfnmt train` on the model the flags (or
                     --model_dir's config) describe, from fresh weights, in a temporary model
                     directory; its FLOPs against the machine's matmul rate (cli/bench_train.py);
                     only the vocabulary is written if the model directory has none
  --bench=translate  sentences/s at --decode_batch_size and batch-1 latency of a checkpoint,
                     an exported model (--saved_model) or a served one (--server) on the test split;
                     with --compare_ctranslate2, side by side with the same weights converted to
                     CTranslate2 (cli/bench_ctranslate2.py)
  --bench=decode     the same two numbers for several exports side by side
                     (--saved_model=A,B,...; every signature of each, e.g. a non-autoregressive
                     model's greedy serving_default and its beam), on the same test sentences,
                     measured in turn batch by batch so that a busy machine slows all alike,
                     with each one's speed-up over the first (the baseline)
  --bench=serve      a load test of the REST API on loopback: --bench_clients concurrent clients
                     send requests of --bench_request_sentences sentences for --bench_seconds;
                     requests/s and latency percentiles. With --export_dir and --served_model it
                     starts `tfnmt serve` twice (batching on, then off); with --server it loads that
                     server. Sentences: --input, else the model's test split.
  --bench=soak       the memory of one `tfnmt serve` under that load for --bench_seconds, with
                     --bench_reloads model reloads (cli/bench_soak.py)
  --bench=data       the training input pipeline alone (cli/bench_data.py): time to the first
                     batch, an epoch's target tokens/s, resume time, peak memory
"""

import json
import resource
import time

import numpy as np
import tensorflow as tf

from tfnmt import runtime
from tfnmt.cli import common
from tfnmt.cli.flags import read, read_fields
from tfnmt.cli.options import BenchOptions, TranslationOptions
from tfnmt.data import sources
from tfnmt.data.options import DataOptions
from tfnmt.decoding.batches import translate_sentences
from tfnmt.errors import ConfigError, UserError
from tfnmt.exporters.options import ExportOptions
from tfnmt.serving.options import BatchingOptions, ClientOptions, ExportedModelOptions



def peak_rss_mb():
    """This process's peak resident memory (Linux reports ru_maxrss in KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def bench_train(bench):
    from tfnmt.cli import bench_train as training
    from tfnmt.cli.train import model_config, new_model_from_flags
    new = new_model_from_flags()
    config, spec = model_config(new)
    return training.bench_train(bench, new, config, spec, peak_rss_mb)


def bench_translate(bench):
    data, batch = read(DataOptions), read(TranslationOptions).decode_batch_size
    source = common.translator_source()
    if bench.compare_ctranslate2:
        if source.client.server:
            raise ConfigError("--compare_ctranslate2 converts a checkpoint (--model_dir) or an "
                              "export (--saved_model), not a served model")
        from tfnmt.cli import bench_ctranslate2
        return bench_ctranslate2.compare(bench, data, batch, source)
    runtime.one_thread_per_op()  # as `translate` decodes
    config, translator = common.open_backend(source)
    spec = common.data_spec(data, config)
    sentences, _ = sources.references(spec, common.splits(data, spec)[2], bench.bench_sentences)
    if not sentences:
        raise ConfigError("no test sentences to translate")
    translate_sentences(translator, sentences[:batch], batch)  # traces the function
    start = time.perf_counter()
    translate_sentences(translator, sentences, batch)
    batched = time.perf_counter() - start
    latencies = []
    for sentence in sentences[: bench.bench_latency_sentences]:
        start = time.perf_counter()
        translator.translate(tf.constant([sentence]))
        latencies.append(1000 * (time.perf_counter() - start))
    return {"bench": "translate", "source": source.export.saved_model or "checkpoint",
            "sentences": len(sentences), "batch_size": batch,
            "beam_size": translator.beam_size,
            "sentences_per_second": round(len(sentences) / batched, 2),
            "batch1_latency_ms_p50": round(float(np.percentile(latencies, 50)), 1),
            "batch1_latency_ms_p90": round(float(np.percentile(latencies, 90)), 1),
            "batch1_latency_ms_mean": round(float(np.mean(latencies)), 1)}


def _export_translators(path):
    """[(signature name, translator)] of one export: a SavedModel's signatures, serving_default
    first, or a TFLite flatbuffer's one function."""
    import os

    from tfnmt.exporters import saved_model, tflite
    if os.path.isfile(os.path.join(path, tflite.MODEL_FILE)):
        return [("tflite", tflite.TFLiteTranslator(path))]
    first = saved_model.SavedModelTranslator(path)
    # `score` reads given translations, `prefix` given starts: not a decoding of the sources.
    names = sorted((n for n in first.signatures() if n not in ("score", "prefix")),
                   key=lambda n: (n != "serving_default", n))
    return [(name, first if name == "serving_default" else
             saved_model.SavedModelTranslator(path, name, module=first.module)) for name in names]


def bench_decode(bench):
    runtime.one_thread_per_op()  # as `translate` decodes
    data, batch = read(DataOptions), read(TranslationOptions).decode_batch_size
    paths = [p for p in read(ExportedModelOptions).saved_model.split(",") if p]
    if not paths:
        raise ConfigError("--bench=decode compares exports: --saved_model=DIR/NAME/VERSION[,...]")
    entries = [(path, name, translator) for path in paths
               for name, translator in _export_translators(path)]
    spec = common.data_spec(data, entries[0][2].config)
    sentences, _ = sources.references(spec, common.splits(data, spec)[2], bench.bench_sentences)
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
    for sentence in sentences[: bench.bench_latency_sentences]:
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
                     "batch1_latency_ms_p50": round(float(np.percentile(latency, 50)), 2),
                     "batch1_latency_ms_p90": round(float(np.percentile(latency, 90)), 2),
                     "batch1_latency_ms_mean": round(float(np.mean(latency)), 2)})
    base = rows[0]
    for row in rows:
        row["throughput_speedup"] = round(row["sentences_per_second"] / base["sentences_per_second"], 2)
        row["latency_speedup"] = round(base["batch1_latency_ms_p50"] / row["batch1_latency_ms_p50"], 2)
    return {"bench": "decode", "sentences": len(sentences), "batch_size": batch,
            "latency_sentences": len(latencies[0]),
            "baseline": f"{base['saved_model']}:{base['signature']}", "results": rows}


def _serve_sentences(bench, export_path):
    """The sentences sent: --input's lines, else the test split of the export's data."""
    path = read(TranslationOptions).input
    if path != "-":
        from tfnmt.data.text_files import read_lines
        return read_lines(path, role="input", replace_invalid=True)[0]
    config = None
    if export_path:
        from tfnmt.exporters.saved_model import read_export_info
        config = read_export_info(export_path).get("config") or None
    data = read(DataOptions)
    spec = common.data_spec(data, config)
    return sources.references(spec, common.splits(data, spec)[2], bench.bench_sentences)[0]


def _measure(bench, client_options, url, label, sentences):
    from tfnmt.serving.client import ServingClient, load_test
    client = ServingClient(url, client_options.served_model, client_options.model_version,
                           retries=0, timeout=client_options.server_timeout)
    for sentence in sentences[:4]:  # first calls of each path are slower
        client.predict([sentence])
    result = load_test(client, sentences, clients=bench.bench_clients,
                       seconds=bench.bench_seconds,
                       sentences_per_request=bench.bench_request_sentences)
    return dict({"bench": "serve", "model": client_options.served_model, "server": label},
                **result)


def _local_export(bench, client):
    """(export base directory, newest version's path, sentences) of --export_dir/--served_model."""
    import os

    from tfnmt.serving.models import version_dirs
    export_dir = read_fields(ExportOptions, ("export_dir",))["export_dir"]
    common.require(export_dir=export_dir, served_model=client.served_model)
    versions = version_dirs(os.path.join(export_dir, client.served_model))
    if not versions:
        raise ConfigError(f"no exported versions of {client.served_model} under {export_dir}")
    sentences = _serve_sentences(bench, versions[max(versions)])
    if not sentences:
        raise ConfigError("no sentences to send")
    return export_dir, versions[max(versions)], sentences


def _serve_flags(batching_enabled):
    """`tfnmt serve`'s batching and thread flags as this command's flags set them."""
    import dataclasses

    from tfnmt.serving.options import BatchingOptions, ServeOptions
    batching = read(BatchingOptions)
    return [f"--enable_batching={str(batching_enabled).lower()}",
            *(f"--{name}={value}" for name, value in dataclasses.asdict(batching).items()),
            f"--rest_api_num_threads={read(ServeOptions).rest_api_num_threads}"]


def bench_serve(bench):
    """One result per server setting (a list)."""
    client = read(ClientOptions)
    if client.server:
        return [_measure(bench, client, client.server, client.server,
                         _serve_sentences(bench, None))]
    export_dir, _, sentences = _local_export(bench, client)
    return [_serve_locally(bench, client, export_dir, sentences, enabled)
            for enabled in (True, False)]


def bench_soak(bench):
    from tfnmt.cli.bench_soak import soak
    client = read(ClientOptions)
    _, path, sentences = _local_export(bench, client)
    from tfnmt.serving.options import ServeOptions
    return soak(bench, client, path, sentences, _serve_flags(read(ServeOptions).enable_batching))


def _serve_locally(bench, client, export_dir, sentences, batching_enabled):
    """The load test of `tfnmt serve --export_dir` started here, batching on or off."""
    import tempfile

    from tfnmt.serving import server as server_lib
    with tempfile.NamedTemporaryFile(suffix=".log") as log:
        process, url = server_lib.spawn(
            [f"--export_dir={export_dir}", "--rest_api_host=127.0.0.1", "--rest_api_port=0",
             "--file_system_poll_wait_seconds=0", *_serve_flags(batching_enabled)],
            log_path=log.name)
        try:
            result = _measure(bench, client, url,
                              f"tfnmt serve, batching {'on' if batching_enabled else 'off'}",
                              sentences)
        finally:
            server_lib.stop(process)
    result["batching"] = batching_enabled
    if batching_enabled:
        batching = read(BatchingOptions)
        result.update(max_batch_size=batching.max_batch_size,
                      batch_timeout_micros=batching.batch_timeout_micros)
    return result


def run():
    bench = read(BenchOptions)
    if bench.bench == "serve":
        result = bench_serve(bench)
        for one in result:
            print(json.dumps(one))
    else:
        from tfnmt.cli.bench_data import bench_data
        benches = {"train": bench_train, "translate": bench_translate, "decode": bench_decode,
                   "data": bench_data, "soak": bench_soak}
        result = benches[bench.bench](bench)
        if "table" in result:
            print(result["table"])
        print(json.dumps(result))
    if bench.bench_output:
        with open(bench.bench_output, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    if isinstance(result, dict) and result.get("incoherent"):
        raise UserError("incoherent measurement, do not use these figures: "
                        + "; ".join(result["incoherent"]))
    return result
