"""`tfnmt bench --bench=translate --compare_ctranslate2`: the same weights decoded by tfnmt's
SavedModel and by CTranslate2 (converted as `tfnmt export --format=ctranslate2` does), on the
same test sentences and batches sorted by length, SentencePiece included on both sides.

Each engine runs alone in a process of its own (bench/engine.py), one after the other:
tfnmt float32 (the default export, then with --xla_decoding), tfnmt --decode_dtype=bfloat16 on a
CPU with bfloat16 instructions, each with TensorFlow's defaults and again with one thread per op
(VARIANT_ENV), and with one thread per op and as many batches in flight as cores (from as many
caller threads); then CTranslate2 in every compute type the CPU supports, float32 first, each
as its documentation advises for latency (intra_threads = cores) and for throughput (one thread
per batch, inter_threads = cores, the batches submitted at once). They take
turns in REPEATS rounds (`_interleaved`), each engine making a warm-up and a timed pass per
round, and measure over each pass the share of the machine other processes used; the table
gives medians, float32 against float32 and each
engine's fastest variant against the other's (of its variants whose BLEU on the sentences is
within MAX_BLEU_LOSS of its float32's), and no ratio if others used more than MAX_OTHERS of the
machine during any pass. Figures that cannot all be true (`incoherent`) fail the bench.
The figures, the table and those judgements: bench/comparison.py.

Rows: beam search (--beam_size and the length penalty of the decoding flags, or of the
--saved_model's export) and greedy search (beam 1, no length penalty), each at
--decode_batch_size (sentences/s) and one sentence at a time (p50 and p90 latency). Greedy
output must agree (docs/export.md: CTranslate2 export, length limits).
"""

import dataclasses
import math
import os
import tempfile

import tensorflow as tf

from tfnmt import runtime
from tfnmt.bench import comparison
from tfnmt.decoding.options import DecodingOptions
from tfnmt.errors import ConfigError
from tfnmt.evaluation import bleu as bleu_lib


def imported():
    """The ctranslate2 module, or the error that says how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise ConfigError("--compare_ctranslate2 needs the ctranslate2 package: "
                          "pip install -e \".[ctranslate2]\"") from None
    return ctranslate2


def saved_model_weights(path):
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
        weight.assign(tf.cast(saved[weight.path], weight.dtype))  # a bfloat16 export's too
    # The tokenizers hold their SentencePiece models as an attribute of the op that creates them.
    protos = []
    for tokenizer in module.tokenizers:
        creator = tokenizer._model_resource._create_resource
        nodes = [n for f in creator.concrete_functions for n in f.function_def.node_def
                 if n.op == "SentencepieceOp"]
        protos.append(nodes[0].attr["model"].s)
    return (config, model, Vocab(protos[0]), Vocab(protos[1]),
            DecodingOptions.from_record(info.get("decoding")))


def _shortlist_table(model_dir, config, source_vocab, target_vocab):
    """The shortlist variants' table, or None where there is none to make (an export's, with no
    `model_dir`, is in its graph; an untied output layer has no matrix to cut; no training data
    at hand)."""
    from tfnmt.errors import UserError
    from tfnmt.serving import backends
    if not model_dir or not config["hparams"].get("tie_output", True):
        return None
    try:
        return backends.shortlist_table(model_dir, config, source_vocab, target_vocab)
    except UserError:
        return None


def _tfnmt_limit(options, pieces):
    """tfnmt's length limit (eos included) for a source of `pieces` pieces (beam_search.py)."""
    length = min(pieces, options.max_input_length)
    return max(1, min(options.max_decode_length,
                      math.ceil(length * options.max_length_ratio) + options.max_length_offset))


def compare(weights, test_pairs, batch, latency_sentences, target_lang, saved=None,
            model_dir=None):
    """The side-by-side result (its `table` the markdown rows) of `weights` ((config, model,
    source Vocab, target Vocab, DecodingOptions): `saved_model_weights` of the export `saved`, or
    those of `model_dir`'s checkpoint) on `test_pairs` ((sentences, references)), `batch`
    sentences at once and the first `latency_sentences` one at a time."""
    ctranslate2 = imported()
    config, model, source_vocab, target_vocab, options = weights
    lists = _shortlist_table(model_dir, config, source_vocab, target_vocab)
    options = dataclasses.replace(options, n_best=1, alignments="none", sampling=False)
    decodes = {"beam": options,
               "greedy": dataclasses.replace(options, beam_size=1, length_penalty=0.0)}
    test = _test_batches(*test_pairs, latency_sentences, source_vocab, batch)
    bleu = bleu_lib.metric(target_lang=target_lang)
    here = machine()
    with tempfile.TemporaryDirectory() as tmp:
        specs = _specs(ctranslate2, tmp, saved, config, model, (source_vocab, target_vocab, lists),
                       decodes, test, here["instructions"])
        engines = _interleaved(specs, tmp)
    result = {"bench": "translate", "compare": "ctranslate2", "model": config["model"],
              "source": saved or "checkpoint", "sentences": len(test.order),
              "batch_size": batch, "latency_sentences": len(test.singles), "repeats": REPEATS,
              "machine": here, "ctranslate2_version": ctranslate2.__version__,
              "decodes": {name: {"beam_size": o.beam_size, "length_penalty": o.length_penalty,
                                 "length_penalty_mode": o.length_penalty_mode}
                          for name, o in decodes.items()},
              "engines": [comparison.summary(engine, test, batch, bleu) for engine in engines]}
    result["agreement"] = comparison.agreement(engines, test)
    result["busiest"] = comparison.busiest(result["engines"])
    result["table"] = comparison.table(result)
    result["incoherent"] = comparison.incoherent(result)
    return result


CORES = os.cpu_count() or 1
# The shortlist variants' --shortlist (from a checkpoint only: an export's table is in its graph).
SHORTLIST = 20
PARALLEL = ", parallel batches"
# tfnmt's exports: (name, the decoding options that make it).
TFNMT_VARIANTS = (("float32", {}), ("float32 xla", {"xla_decoding": True}),
                  ("bfloat16", {"decode_dtype": "bfloat16"}),
                  ("float32 intra-op 1", {}), ("float32 xla intra-op 1", {"xla_decoding": True}),
                  ("bfloat16 intra-op 1", {"decode_dtype": "bfloat16"}),
                  ("float32 intra-op 1" + PARALLEL, {}),
                  ("bfloat16 intra-op 1" + PARALLEL, {"decode_dtype": "bfloat16"}),
                  ("float32 intra-op 1, shortlist", {"shortlist": SHORTLIST}),
                  ("bfloat16 intra-op 1, shortlist", {"decode_dtype": "bfloat16",
                                                      "shortlist": SHORTLIST}))
# A variant's process environment beside the default: TensorFlow's runtime settings. One
# thread per op, two ops at a time (inter-op, TensorFlow's default on two cores), was 1.35x
# as fast at beam 5, batch 32 as TensorFlow's default on the 2-core machine
# (docs/benchmarks.md, "One thread per op").
ONE_THREAD_PER_OP = {"TF_NUM_INTRAOP_THREADS": "1"}
VARIANT_ENV = {name: ONE_THREAD_PER_OP for name, _ in TFNMT_VARIANTS if "intra-op 1" in name}
# What a variant does not name is as in the default export.
_VARIANT_DEFAULTS = {"xla_decoding": False, "decode_dtype": "float32", "shortlist": 0}
# Rounds, each a timed pass per engine and decode; the figures are their medians.
REPEATS = 3


@dataclasses.dataclass
class _Test:
    """The test sentences: by length (`order`), in batches of that order, the first for
    latency (`singles`), each one's SentencePiece count (`pieces`), and the references in the
    order of `order`."""
    order: list
    batches: list
    singles: list
    pieces: dict
    references: list


def _test_batches(sentences, targets, latency_sentences, source_vocab, batch):
    pairs = [(s, t) for s, t in zip(sentences, targets) if s.strip()]
    if not pairs:
        raise ConfigError("no test sentences to translate")
    pieces = {s: len(source_vocab.encode(s)) for s, _ in pairs}
    pairs.sort(key=lambda pair: pieces[pair[0]])
    order = [s for s, _ in pairs]
    return _Test(order, [order[i:i + batch] for i in range(0, len(order), batch)],
                 [s for s in sentences if s.strip()][:latency_sentences], pieces,
                 [t for _, t in pairs])


def _specs(ctranslate2, tmp, saved, config, model, vocabularies, decodes, test, instructions):
    """What each engine process is given: tfnmt's SavedModels of each of TFNMT_VARIANTS the CPU
    runs natively (a --saved_model is the beam decode of the variant it was exported as; the
    shortlist variants where `vocabularies` (source, target, shortlist table) has a table), and
    the model converted to CTranslate2 once, for each compute type the CPU has, float32
    first."""
    source_vocab, target_vocab, table = vocabularies
    from tfnmt.decoding.translator import Translator
    from tfnmt.exporters import ctranslate2 as ct2_export
    from tfnmt.exporters import saved_model
    common_spec = {"batches": test.batches, "singles": test.singles}
    specs = []
    exported = {}  # (decode, its options) -> the export's path: variants may share one
    for variant, changes in native_variants(instructions):
        if changes.get("shortlist") and table is None:
            continue
        wanted = {name: variant_options(o, changes) for name, o in decodes.items()}
        for name, o in wanted.items():
            if (name, o) not in exported:
                exported[name, o] = (
                    saved if saved and name == "beam" and o == decodes["beam"] else
                    saved_model.export(Translator(model, source_vocab, target_vocab, o,
                                                  table if o.shortlist else None), tmp,
                                       f"{name}-{variant}".replace(" ", "-").replace(",", ""),
                                       1, config))
        specs.append(dict(common_spec, engine="tfnmt", variant=variant,
                          env=VARIANT_ENV.get(variant, {}),
                          parallel=CORES if variant.endswith(PARALLEL) else 1,
                          decodes={name: exported[name, o] for name, o in wanted.items()}))
    ct2_dir = os.path.join(tmp, "ctranslate2")
    ct2_export.save(model, source_vocab, target_vocab, decodes["beam"], ct2_dir)
    spm_files = ct2_export.vocab_files(source_vocab, target_vocab)
    spm_paths = [os.path.join(ct2_dir, name) for name in spm_files]
    o = decodes["beam"]
    ct2_spec = dict(
        common_spec, engine="ctranslate2", model_dir=ct2_dir, source_spm=spm_paths[0],
        target_spm=spm_paths[-1], max_input_length=o.max_input_length,
        limits={line: _tfnmt_limit(o, test.pieces[line]) - 1 for line in test.pieces},
        decodes={name: {"beam_size": d.beam_size, "length_penalty": d.length_penalty,
                        "min_decode_length": d.min_decode_length}
                 for name, d in decodes.items()})
    return specs + [dict(ct2_spec, **setting)
                    for setting in ctranslate2_settings(ctranslate2.get_supported_compute_types("cpu"))]


def ctranslate2_settings(types):
    """CTranslate2's variants: each compute type of `types` (int8_float32 is int8 on a CPU),
    float32 first, with intra_threads = cores (`threads`; CTranslate2's default is 4 whatever
    the cores) and one batch at a time, then one thread per batch and as many batches at once as
    cores (`parallel`: its inter_threads), as its documentation advises for throughput."""
    types = set(types)
    if "int8" in types:
        types.discard("int8_float32")
    types = sorted(types, key=lambda t: (t != "float32", t))
    return [setting for t in types for setting in (
        {"variant": t, "threads": CORES, "parallel": 1},
        {"variant": t + PARALLEL, "compute_type": t, "threads": 1, "parallel": CORES})]


def native_variants(instructions):
    """The TFNMT_VARIANTS a CPU with `instructions` (machine()) runs natively: no bfloat16
    variant where TensorFlow would emulate its products, slower than float32's."""
    bfloat16 = runtime.native_bfloat16(frozenset(instructions))
    return [(name, changes) for name, changes in TFNMT_VARIANTS
            if bfloat16 or changes.get("decode_dtype") != "bfloat16"]


def variant_options(options, changes):
    """`options` (DecodingOptions) as a variant's `changes` make them, from the default export:
    so an export of another variant given as --saved_model is not taken for this one."""
    return dataclasses.replace(options, **{**_VARIANT_DEFAULTS, **changes})


def _interleaved(specs, tmp):
    """Each engine's RESULT (bench/engine.py) over REPEATS rounds: in each round every
    engine in turn, in a process of its own, warms up and makes one timed pass of each decode.

    The machine's own speed drifts within a run (the host's other guests, which no load figure
    inside sees; a third round slower for every engine, docs/benchmarks.md): three passes in a
    row per engine put such a drift on one engine, taking turns spreads it over all of them.
    The translations compared are the first round's."""
    merged = [None] * len(specs)
    for round_ in range(REPEATS):
        for i, spec in enumerate(specs):
            result = _run_engine(dict(spec, own_limits=round_ == 0), tmp)
            pid = result.pop("pid")
            if merged[i] is None:
                merged[i] = dict(result, pids=[pid])
                continue
            merged[i]["pids"].append(pid)
            for name, decode in result["decodes"].items():
                for passes in ("batched", "single"):
                    merged[i]["decodes"][name][passes] += decode[passes]
    return merged


def _run_engine(spec, tmp):
    """One engine's RESULT (bench/engine.py), measured in a process of its own."""
    import json
    import subprocess
    import sys

    import tfnmt
    spec_path, out_path = os.path.join(tmp, "spec.json"), os.path.join(tmp, "result.json")
    with open(spec_path, "w", encoding="utf-8") as f:
        json.dump(spec, f)
    root = os.path.dirname(os.path.dirname(os.path.abspath(tfnmt.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p), **spec.get("env", {}))
    print(f"measuring {spec['engine']} {spec['variant']} in a process of its own",
          file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, "-m", "tfnmt.bench.engine", spec_path, out_path],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise ConfigError(f"measuring {spec['engine']} {spec['variant']} failed: {last}")
    with open(out_path, encoding="utf-8") as f:
        return json.load(f)


def machine():
    """What the figures were measured on: CPU, cores, the instruction sets that decide the
    fast paths, the versions, and this checkout's commit if it is one."""
    import platform
    import subprocess

    import tfnmt
    cpu, flags = runtime.cpuinfo_field("model name") or platform.processor(), runtime.cpu_flags()
    root = os.path.dirname(os.path.dirname(os.path.abspath(tfnmt.__file__)))
    commit = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"],
                            capture_output=True, text=True)
    return {"cpu": cpu, "cores": os.cpu_count(),
            "instructions": sorted(flags & {"avx2", "avx512f", "avx512_bf16", "avx512_vnni",
                                            "amx_bf16", "amx_int8"}),
            "tensorflow": tf.__version__, "tfnmt": tfnmt.__version__,
            "commit": commit.stdout.strip() if commit.returncode == 0 else None}


