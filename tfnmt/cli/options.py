"""The settings only the commands themselves read (where the model is, what to translate and
where to, averaging, benchmarks), declared once like the library's (tfnmt/options.py); their
flags are generated from these fields (cli/flags.py)."""

import dataclasses

from tfnmt.decoding.options import DECODE_BATCH_SIZE
from tfnmt.options import option
from tfnmt.training import distribution


@dataclasses.dataclass(frozen=True)
class ModelDirOptions:
    model_dir: str = option(
        None, "Directory of the model: config, vocabulary, checkpoints. To translate, evaluate, "
        "score or export (a SavedModel): several, comma-separated, decode as one ensemble "
        "(docs/decoding.md: Ensembles).")
    checkpoint: str = option(
        "", "Checkpoint to use: '' (latest), 'best' or a path; several, comma-separated, for an "
        "ensemble: one for each --model_dir, or all of one --model_dir.")


@dataclasses.dataclass(frozen=True)
class ModelOptions:
    model: str = option(None, "Registered model name (`tfnmt info` without --model lists them).")


@dataclasses.dataclass(frozen=True)
class TrainRunOptions:
    """How `tfnmt train` runs, beside what it trains with (TrainOptions)."""
    evaluate_at_end: bool = option(True, "After training, score the test split with sacreBLEU.")
    distribution: str = option(
        "none", "Data-parallel training on tf.distribute: none (one device), mirrored (every GPU "
        "of this host), multi_worker (the hosts of $TF_CONFIG). --batch_tokens and --batch_size "
        "are per replica.", choices=distribution.CHOICES)


@dataclasses.dataclass(frozen=True)
class TranslationOptions:
    input: str = option("-", "File to translate ('-' = stdin).")
    output: str = option("-", "Where translations go ('-' = stdout).")
    decode_batch_size: int = option(DECODE_BATCH_SIZE, "Sentences per decoding batch.",
                                    bounds=">= 1")
    plot_dir: str = option("", "With --alignments=soft: write each line's attention as a "
                           "heatmap, DIR/LINE.png (LINE counted from 1).")
    target_prefix: str = option(
        "", "A file of target prefixes, one per line of --input (an empty line: none): each "
        "translation starts with its line's prefix as given and continues it (README: Target "
        "prefix). The best translation only; autoregressive models, or a SavedModel exported "
        "with --prefix.")
    interactive: bool = option(
        False, "Answer each line of stdin as soon as it is read: its translation is written "
        "and flushed before the next line is read. On by itself when --input=- is a terminal "
        "(--nointeractive turns it off).")


@dataclasses.dataclass(frozen=True)
class ScoreOptions:
    """What `tfnmt score` reads beside --input: the translations to score, or an n-best list."""
    references: str = option("", "The translations to score, one per line of --input.")
    rerank: str = option(
        "", "Instead of --references: an n-best list of --input as `translate --n_best=N` "
        "writes it (INDEX ||| TRANSLATION ||| SCORE), written back with each hypothesis scored "
        "by this model, best first per INDEX.")


@dataclasses.dataclass(frozen=True)
class AverageOptions:
    average_from: str = option(
        "last", "Average the last N or the N best (by the --best_metric training used).",
        choices=("last", "best"))
    num_checkpoints: int = option(5, "How many checkpoints `average` averages.", bounds=">= 1")
    output_dir: str = option(
        None, "Model directory that `average` writes; text corpus directory that `distill` "
        "writes.")


@dataclasses.dataclass(frozen=True)
class BenchOptions:
    bench: str = option(
        "translate", "What `tfnmt bench` measures (decode: several --saved_model=A,B,... side by "
        "side; serve: a REST load test; soak: a server's memory under load, with a reload; data: the "
        "training input pipeline alone).",
        choices=("train", "translate", "decode", "serve", "soak", "data"))
    bench_steps: int = option(30, "Timed training steps (after 5 warm-up steps).", bounds=">= 1")
    bench_sentences: int = option(
        256, "Test sentences translated for the speed benchmark.", bounds=">= 1")
    bench_latency_sentences: int = option(
        50, "Sentences translated one by one for latency.", bounds=">= 1")
    compare_ctranslate2: bool = option(
        False, "--bench=translate: convert the model (a plain transformer) to CTranslate2 and "
        "print a side-by-side table of both decoding the same sentences, beam and greedy, each "
        "engine alone in its own process, with their agreement and the machine's other load "
        "(pip install -e \".[ctranslate2]\").")
    bench_resume_at: float = option(
        0.9, "--bench=data: time a resume after this share of an epoch's batches.",
        bounds="[0, 1]")
    bench_tfds_mock: int = option(
        0, "--bench=data with --data=tfds:NAME: run on TFDS's mock data (tfds.testing.mock_data), "
        "this many random examples per split, instead of the prepared dataset (0: the dataset).",
        bounds=">= 0")
    bench_output: str = option(
        "", "Also write the result (the JSON printed last) to this file, indented.")
    bench_clients: int = option(8, "Concurrent clients of the load test.", bounds=">= 1")
    bench_seconds: float = option(20.0, "How long each load runs.", bounds="> 0")
    bench_request_sentences: int = option(
        1, "Sentences per request of the load test.", bounds=">= 1")
    bench_reloads: int = option(
        1, "--bench=soak: new versions of the model rolled in, evenly spread over the load.",
        bounds="[0, 100]")
