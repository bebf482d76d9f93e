"""tfnmt bench: training throughput and translation speed, printed as one JSON line each.

  --bench=train      target tokens/s and ms/step of `tfnmt train` on the model the flags (or
                     --model_dir's config) describe, from fresh weights, in a temporary model
                     directory; its FLOPs against the machine's matmul rate (bench/train.py);
                     only the vocabulary is written if the model directory has none
  --bench=translate  sentences/s at --decode_batch_size and batch-1 latency of a checkpoint,
                     an exported model (--saved_model) or a served one (--server) on the test split;
                     with --compare_ctranslate2, side by side with the same weights converted to
                     CTranslate2 (bench/ctranslate2.py)
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
                     --bench_reloads model reloads (bench/soak.py)
  --bench=data       the training input pipeline alone (bench/data.py): time to the first
                     batch, an epoch's target tokens/s, resume time, peak memory

The verb reads the flags and opens the model and the sentences; tfnmt/bench/ measures.
"""

import json
import resource

from tfnmt import runtime
from tfnmt.cli import common
from tfnmt.cli.flags import read, read_fields
from tfnmt.cli.options import BenchOptions, ModelDirOptions, TranslationOptions
from tfnmt.data import sources
from tfnmt.data.options import DataOptions
from tfnmt.errors import ConfigError, UserError
from tfnmt.exporters.options import ExportOptions
from tfnmt.serving.options import BatchingOptions, ClientOptions, ExportedModelOptions


def peak_rss_mb():
    """This process's peak resident memory (Linux reports ru_maxrss in KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _test_pairs(bench, data, config=None):
    """(sentences, references): the first --bench_sentences of the test split of the data the
    flags name, a trained model's `config` filling in what they leave out."""
    spec = common.data_spec(data, config)
    return sources.references(spec, common.splits(data, spec)[2], bench.bench_sentences)


def bench_train(bench):
    from tfnmt.bench.train import bench_train as measure
    from tfnmt.cli.train import model_config, new_model_from_flags
    new = new_model_from_flags()
    config, spec = model_config(new)
    return measure(bench, config, spec, common.splits(new.data, spec)[0], new.data.train_limit,
                   new.train, new.where.model_dir, peak_rss_mb)


def bench_translate(bench):
    from tfnmt.bench.translate import speed
    data, batch = read(DataOptions), read(TranslationOptions).decode_batch_size
    source = common.translator_source()
    if bench.compare_ctranslate2:
        if source.client.server:
            raise ConfigError("--compare_ctranslate2 converts a checkpoint (--model_dir) or an "
                              "export (--saved_model), not a served model")
        return compare_ctranslate2(bench, data, batch, source)
    runtime.one_thread_per_op()  # as `translate` decodes
    config, translator = common.open_backend(source)
    sentences, _ = _test_pairs(bench, data, config)
    return dict({"bench": "translate", "source": source.export.saved_model or "checkpoint"},
                **speed(translator, sentences, batch, bench.bench_latency_sentences))


def compare_ctranslate2(bench, data, batch, source):
    """The same weights decoded by tfnmt and by CTranslate2 (bench/ctranslate2.py): those of
    `source`'s export, or of its checkpoint (one model, not an ensemble)."""
    import dataclasses

    from tfnmt.bench import ctranslate2 as compare
    from tfnmt.data.vocab import load_vocabs
    from tfnmt.exporters.ctranslate2 import check_model
    from tfnmt.model_dir import read_config
    compare.imported()
    saved, model_dir = source.export.saved_model, source.where.model_dir
    if saved:
        weights, model_dir = compare.saved_model_weights(saved), None
    else:
        common.require(model_dir=model_dir)
        if common.is_ensemble(source.where):
            raise ConfigError("--compare_ctranslate2: not for an ensemble (several --model_dir or "
                              "--checkpoint): CTranslate2 converts one model")
        check_model(read_config(model_dir)["model"])
        # The checkpoint's own weights: each variant rounds them as it is made.
        config, translator = common.load_translator(
            source.where, dataclasses.replace(source.decoding, decode_dtype="float32"))
        weights = (config, translator.model, *load_vocabs(model_dir), translator.options)
    return compare.compare(weights, _test_pairs(bench, data, weights[0]), batch,
                           bench.bench_latency_sentences, data.target_lang, saved, model_dir)


def bench_decode(bench):
    from tfnmt.bench.translate import export_translators, side_by_side
    runtime.one_thread_per_op()  # as `translate` decodes
    data, batch = read(DataOptions), read(TranslationOptions).decode_batch_size
    paths = [p for p in read(ExportedModelOptions).saved_model.split(",") if p]
    if not paths:
        raise ConfigError("--bench=decode compares exports: --saved_model=DIR/NAME/VERSION[,...]")
    entries = export_translators(paths)
    sentences, _ = _test_pairs(bench, data, entries[0][2].config)
    return side_by_side(entries, sentences, batch, bench.bench_latency_sentences)


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
    return _test_pairs(bench, read(DataOptions), config)[0]


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

    from tfnmt.serving.options import ServeOptions
    batching = read(BatchingOptions)
    return [f"--enable_batching={str(batching_enabled).lower()}",
            *(f"--{name}={value}" for name, value in dataclasses.asdict(batching).items()),
            f"--rest_api_num_threads={read(ServeOptions).rest_api_num_threads}"]


def bench_serve(bench):
    """One result per server setting (a list)."""
    from tfnmt.bench.serve import measure, serve_locally
    client = read(ClientOptions)
    if client.server:
        return [measure(bench, client, client.server, client.server,
                        _serve_sentences(bench, None))]
    export_dir, _, sentences = _local_export(bench, client)
    return [serve_locally(bench, client, export_dir, sentences, _serve_flags(enabled),
                          read(BatchingOptions) if enabled else None)
            for enabled in (True, False)]


def bench_soak(bench):
    from tfnmt.bench.soak import soak
    from tfnmt.serving.options import ServeOptions
    client = read(ClientOptions)
    _, path, sentences = _local_export(bench, client)
    return soak(bench, client, path, sentences, _serve_flags(read(ServeOptions).enable_batching))


def bench_data(bench):
    from tfnmt.bench.data import bench_data as measure
    from tfnmt.cli.vocab import build_vocab
    from tfnmt.data.options import VocabOptions
    from tfnmt.training.options import TrainOptions
    model_dir = read(ModelDirOptions).model_dir
    common.require(model_dir=model_dir)
    data, options = read(DataOptions), read(TrainOptions)
    spec = common.data_spec(data)
    split = common.splits(data, spec)[0]
    return measure(bench, spec, split, data.train_limit, model_dir, options, lambda: build_vocab(
        model_dir, spec, split, data.train_limit, read(VocabOptions), options.seed))


def run():
    bench = read(BenchOptions)
    if bench.bench == "serve":
        result = bench_serve(bench)
        for one in result:
            print(json.dumps(one))
    else:
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
