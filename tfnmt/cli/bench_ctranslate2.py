"""`tfnmt bench --bench=translate --compare_ctranslate2`: the same weights decoded by tfnmt's
SavedModel and by CTranslate2 (converted as `tfnmt export --format=ctranslate2` does), on the
same test sentences and the same batches sorted by length, SentencePiece included on both
sides, timed batch by batch in turn so that a busy machine slows both alike.

Rows: beam search (--beam_size and the length penalty of the decoding flags, or of the
--saved_model's export) and greedy search (beam 1, no length penalty), each at
--decode_batch_size (sentences/s) and one sentence at a time (p50 latency). Before timing,
greedy agreement is checked: a sentence that tfnmt ends at its length limit is decoded again by
CTranslate2 with that limit (docs/export.md: CTranslate2 export, length limits).
"""

import dataclasses
import math
import os
import tempfile
import time

import numpy as np
import tensorflow as tf

from tfnmt.cli import common
from tfnmt.data import sources
from tfnmt.decoding.options import DecodingOptions
from tfnmt.errors import ConfigError


def _saved_model_weights(path):
    """(config, model, source Vocab, target Vocab, DecodingOptions) of a SavedModel export: the
    model rebuilt from its recorded config and given the export's variables by name, the
    vocabularies read from its tokenizers."""
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    from tfnmt.data.vocab import Vocab
    from tfnmt.exporters.saved_model import read_export_info
    from tfnmt.models import catalog
    info = read_export_info(path)
    if not info.get("config"):
        raise ConfigError(f"{path} records no model config (assets.extra/tfnmt_export.json)")
    config = info["config"]
    from tfnmt.exporters.ctranslate2 import check_model
    check_model(config["model"])
    module = tf.saved_model.load(path)
    model = catalog.build(config)
    saved = {v.name.split(":")[0]: v for v in module.model_variables}
    for weight in model.weights:
        if weight.path not in saved or tuple(saved[weight.path].shape) != tuple(weight.shape):
            raise ConfigError(f"{path}: no variable {weight.path} of shape {tuple(weight.shape)}")
        weight.assign(saved[weight.path].numpy())
    # The tokenizers hold their SentencePiece models as an attribute of the op that creates them.
    protos = []
    for tokenizer in module.tokenizers:
        creator = tokenizer._model_resource._create_resource
        nodes = [n for f in creator.concrete_functions for n in f.function_def.node_def
                 if n.op == "SentencepieceOp"]
        protos.append(nodes[0].attr["model"].s)
    return (config, model, Vocab(protos[0]), Vocab(protos[1]),
            DecodingOptions.from_record(info.get("decoding")))


def _checkpoint_weights(source):
    """The same as _saved_model_weights, of `source`'s checkpoint (a TranslatorSource)."""
    from tfnmt.data.vocab import load_vocabs
    from tfnmt.model_dir import read_config
    from tfnmt.exporters.ctranslate2 import check_model
    model_dir = source.where.model_dir
    common.require(model_dir=model_dir)
    check_model(read_config(model_dir)["model"])
    config, translator = common.load_translator(source.where, source.decoding)
    return (config, translator.model, *load_vocabs(model_dir), translator.options)


class _CT2:
    """Text in, text out through CTranslate2 with the decoding settings of `options`."""

    def __init__(self, translator, source_vocab, target_vocab, options):
        import sentencepiece as spm
        self.translator, self.options = translator, options
        self.source = spm.SentencePieceProcessor(model_proto=source_vocab.proto)
        self.target = spm.SentencePieceProcessor(model_proto=target_vocab.proto)

    def translate(self, lines, max_length=None):
        """`max_length`: the most tokens (eos excluded); by default the batch's longest tfnmt
        limit, so that a sentence that never ends costs both alike."""
        o = self.options
        tokens = self.source.encode(lines, out_type=str)
        max_length = max_length or max(_tfnmt_limit(o, len(t)) for t in tokens) - 1
        results = self.translator.translate_batch(
            tokens, beam_size=o.beam_size, length_penalty=o.length_penalty,
            min_decoding_length=0, max_decoding_length=max_length,
            max_input_length=o.max_input_length + 1)
        return [self.target.decode(r.hypotheses[0]) for r in results]


def _tfnmt_limit(options, pieces):
    """tfnmt's length limit (eos included) for a source of `pieces` pieces (beam_search.py)."""
    length = min(pieces, options.max_input_length)
    return max(1, min(options.max_decode_length,
                      math.ceil(length * options.max_length_ratio) + options.max_length_offset))


def _ratio_text(ours, theirs):
    ratio = ours / theirs
    return f"{ratio:.2f}x slower" if ratio >= 1 else f"{1 / ratio:.2f}x faster"


def compare(bench, data, batch, source):
    """The side-by-side result (its `table` the markdown rows): `bench` (BenchOptions) says how
    many sentences, `data` (DataOptions) which, `batch` how many at once, `source`
    (TranslatorSource) the checkpoint or export."""
    try:
        import ctranslate2
    except ImportError:
        raise ConfigError("--compare_ctranslate2 needs the ctranslate2 package: "
                          "pip install -e \".[ctranslate2]\"") from None
    saved = source.export.saved_model
    config, model, source_vocab, target_vocab, options = (
        _saved_model_weights(saved) if saved else _checkpoint_weights(source))
    options = dataclasses.replace(options, n_best=1, alignments="none", sampling=False)
    test = _test_batches(bench, data, config, source_vocab, batch)
    with tempfile.TemporaryDirectory() as tmp:
        systems, threads = _systems(ctranslate2, tmp, saved, config, model, source_vocab,
                                    target_vocab, options)
        results = {name: _timed(name, ours, theirs, test)
                   for name, (ours, theirs) in systems.items()}
    return {"bench": "translate", "compare": "ctranslate2", "model": config["model"],
            "source": saved or "checkpoint", "sentences": len(test.order),
            "batch_size": batch, "latency_sentences": len(test.singles),
            "ctranslate2_version": ctranslate2.__version__, "ctranslate2_threads": threads,
            "results": results,
            "table": _table(results, batch)}


@dataclasses.dataclass
class _Test:
    """The test sentences: by length (`order`), in batches of that order, the first for
    latency (`singles`), and each one's SentencePiece count (`pieces`)."""
    order: list
    batches: list
    singles: list
    pieces: dict


def _test_batches(bench, data, config, source_vocab, batch):
    spec = common.data_spec(data, config)
    sentences, _ = sources.references(spec, common.splits(data, spec)[2], bench.bench_sentences)
    sentences = [s for s in sentences if s.strip()]
    if not sentences:
        raise ConfigError("no test sentences to translate")
    pieces = {s: len(source_vocab.encode(s)) for s in sentences}
    order = sorted(sentences, key=lambda s: pieces[s])
    return _Test(order, [order[i:i + batch] for i in range(0, len(order), batch)],
                 sentences[: bench.bench_latency_sentences], pieces)


def _systems(ctranslate2, tmp, saved, config, model, source_vocab, target_vocab, options):
    """({beam|greedy: (tfnmt SavedModelTranslator, _CT2)}, CTranslate2's threads): the model
    converted to CTranslate2 once, and exported per decoding (the beam of a --saved_model is
    that export)."""
    from tfnmt.decoding.translator import Translator
    from tfnmt.exporters import ctranslate2 as ct2_export
    from tfnmt.exporters import saved_model
    decodes = {"beam": options,
               "greedy": dataclasses.replace(options, beam_size=1, length_penalty=0.0)}
    ct2_dir = os.path.join(tmp, "ctranslate2")
    ct2_export.save(model, source_vocab, target_vocab, options, ct2_dir)
    # As many threads as TensorFlow uses (CTranslate2's default is 4 whatever the cores).
    threads = os.cpu_count() or 1
    ct2_model = ctranslate2.Translator(ct2_dir, device="cpu", compute_type="float32",
                                       intra_threads=threads)
    systems = {}
    for name, opts in decodes.items():
        path = (saved if saved and name == "beam" else
                saved_model.export(Translator(model, source_vocab, target_vocab, opts), tmp,
                                   name, 1, config))
        ours = saved_model.SavedModelTranslator(path)
        systems[name] = (ours, _CT2(ct2_model, source_vocab, target_vocab, ours.options))
    return systems, threads


def _tfnmt_run(translator, lines):
    return [t.decode("utf-8") for t in
            translator.translate(tf.constant(lines))["translations"].numpy()]


def _timed(name, ours, theirs, test):
    """One row's numbers: both systems timed batch by batch in turn, then sentence by sentence,
    and how many translations agree."""
    _tfnmt_run(ours, test.batches[0])  # first calls initialise the graphs
    theirs.translate(test.batches[0])
    runs = (lambda x: _tfnmt_run(ours, x), theirs.translate)
    seconds, outputs = [0.0, 0.0], [[], []]
    for lines in test.batches:
        for i, run in enumerate(runs):
            start = time.perf_counter()
            outputs[i] += run(lines)
            seconds[i] += time.perf_counter() - start
    latencies = [[], []]
    for line in test.singles:
        for i, run in enumerate(runs):
            start = time.perf_counter()
            run([line])
            latencies[i].append(1000 * (time.perf_counter() - start))
    agree = 0
    for line, a, b in zip(test.order, *outputs):
        if a != b and name == "greedy":  # tfnmt may have stopped it at its limit
            b = theirs.translate([line], _tfnmt_limit(ours.options, test.pieces[line]) - 1)[0]
        agree += a == b
    count = len(test.order)
    return {"beam_size": ours.options.beam_size,
            "length_penalty": ours.options.length_penalty,
            "length_penalty_mode": ours.options.length_penalty_mode,
            "agreement": f"{agree}/{count}",
            "tfnmt_sentences_per_second": round(count / seconds[0], 2),
            "ct2_sentences_per_second": round(count / seconds[1], 2),
            "tfnmt_batch1_latency_ms_p50": round(float(np.percentile(latencies[0], 50)), 1),
            "ct2_batch1_latency_ms_p50": round(float(np.percentile(latencies[1], 50)), 1)}


def _table(results, batch):
    rows = ["| | tfnmt SavedModel | CTranslate2 | tfnmt / CT2 |", "|---|---|---|---|"]
    for name, r in results.items():
        label = f"beam {r['beam_size']}" if name == "beam" else "greedy"
        rows.append(f"| {label}, batch {batch} | {r['tfnmt_sentences_per_second']} sent/s | "
                    f"{r['ct2_sentences_per_second']} sent/s | "
                    f"{r['tfnmt_sentences_per_second'] / r['ct2_sentences_per_second']:.2f} |")
        ours, theirs = r["tfnmt_batch1_latency_ms_p50"], r["ct2_batch1_latency_ms_p50"]
        rows.append(f"| {label}, batch 1, p50 | {ours} ms | {theirs} ms | "
                    f"{_ratio_text(ours, theirs)} |")
    beam = results["beam"]
    rows.append("")
    rows.append(f"Same output: greedy {results['greedy']['agreement']} sentences (must be all); "
                f"beam {beam['agreement']} (length penalty {beam['length_penalty']}, tfnmt "
                f"mode {beam['length_penalty_mode']}; CTranslate2 divides by |y|^alpha).")
    return "\n".join(rows)
