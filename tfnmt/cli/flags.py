"""Every tfnmt flag, defined once, with its group and, for a number, the range it must lie in.
All commands share one flag namespace, so one flagfile can drive vocab, train, evaluate,
translate and export alike; which flags each command reads is declared in cli/verbs.py.

A value out of its range stops the command while the flags are parsed, before any model or
data is loaded: `tfnmt VERB: error: --beam_size=0: must be an integer >= 1`.
"""

from absl import flags

from tfnmt import options as tfnmt_options
from tfnmt.decoding.options import DecodingOptions
from tfnmt.models import catalog
from tfnmt.training.options import TrainOptions
from tfnmt.ranges import NumberParser, Range

FLAGS = flags.FLAGS

# Group -> its flags, in the order `tfnmt VERB --help` lists them.
GROUPS = {}
TITLES = {}
_current = []


def _group(name, title):
    TITLES[name] = title
    _current[:] = [GROUPS.setdefault(name, [])]


def _add(name):
    _current[0].append(name)


def _number(kind, name, default, bounds, help_text):
    bounds = Range.parse(bounds) if isinstance(bounds, str) else bounds
    flags.DEFINE(NumberParser(kind, bounds), name, default, help_text,
                 serializer=flags.ArgumentSerializer())
    _add(name)


def integer(name, default, bounds, help_text):
    _number(int, name, default, bounds, help_text)


def real(name, default, bounds, help_text):
    _number(float, name, default, bounds, help_text)


def string(name, default, help_text):
    flags.DEFINE_string(name, default, help_text)
    _add(name)


def boolean(name, default, help_text):
    flags.DEFINE_boolean(name, default, help_text)
    _add(name)


def enum(name, default, choices, help_text):
    flags.DEFINE_enum(name, default, choices, help_text)
    _add(name)


def options(cls, only=None, skip=()):
    """One flag per field of an options dataclass (tfnmt/options.py), in the current group:
    the fields named in `only` (default all) but not in `skip`."""
    for field, help_text, bounds, choices in tfnmt_options.declared(cls):
        if (only is not None and field.name not in only) or field.name in skip:
            continue
        kind = tfnmt_options.kind(field)
        if bounds is not None:
            _number(kind, field.name, field.default, bounds, help_text)
        elif choices:
            enum(field.name, field.default, list(choices), help_text)
        elif kind is bool:
            boolean(field.name, field.default, help_text)
        else:
            string(field.name, field.default, help_text)


def read(cls):
    """The options dataclass `cls` as the parsed flags give it."""
    return tfnmt_options.from_values(cls, {name: FLAGS[name].value
                                           for name in tfnmt_options.names(cls)})


# --- where things are --------------------------------------------------------------------------
_group("model_dir", "model directory")
string("model_dir", None, "Directory of the model: config, vocabulary, checkpoints.")
string("checkpoint", "", "Checkpoint to use: '' (latest), 'best' or a path.")

_group("data", "data")
string("data", "multi30k", "Data source: multi30k, iwslt14, tfds:NAME or text:DIR.")
string("source_lang", "en", "Source language code.")
string("target_lang", "de", "Target language code.")
string("manual_dir", "", "Local copy of a dataset's files, for offline machines "
       "(defaults to $TFNMT_MULTI30K_DIR / $TFNMT_IWSLT14_DIR for those builders).")
string("tfds_data_dir", "", "Where TFDS stores prepared datasets (default: TFDS's).")
string("train_split", "", "Training split (default: train).")
string("valid_split", "", "Validation split (default: validation; valid for text:DIR).")
string("test_split", "", "Test split (default: test).")
integer("train_limit", 0, ">= 0", "Use only the first N training pairs (0 = all).")
integer("valid_limit", 0, ">= 0", "Use only the first N validation pairs (0 = all).")
integer("test_limit", 0, ">= 0", "Use only the first N test pairs (0 = all).")

# --- vocabulary ---------------------------------------------------------------------------------
_group("vocabulary", "vocabulary (`train` trains one when the model directory has none)")
integer("vocab_size", 8000, ">= 5", "SentencePiece vocabulary size (a soft limit; ids 0-3 are "
        "reserved).")
enum("vocab_type", "unigram", ["unigram", "bpe", "char", "word"], "SentencePiece model type.")
boolean("joint_vocab", True, "One vocabulary for both languages (else one per side).")
integer("vocab_max_sentences", 2_000_000, ">= 1", "Sentences sampled to train SentencePiece.")

# --- the model ------------------------------------------------------------------------------------
_group("model", "model (the architecture of a new model)")
string("model", None, "Registered model name (`tfnmt info` without --model lists them); with "
       "--server, the served model's name.")

# --- training -----------------------------------------------------------------------------------
_group("training", "training")
# Validation BLEU's tokenizer is declared with the training options and listed under scoring.
options(TrainOptions, skip=("bleu_tokenize",))
boolean("evaluate_at_end", True, "After training, score the test split with sacreBLEU.")
enum("distribution", "none", ["none", "mirrored", "multi_worker"],
     "Data-parallel training on tf.distribute: none (one device), mirrored (every "
     "GPU of this host), multi_worker (the hosts of $TF_CONFIG). --batch_tokens and "
     "--batch_size are per replica.")

# --- decoding -----------------------------------------------------------------------------------
_group("decoding", "decoding")
options(DecodingOptions)

_group("translation", "input and output")
string("input", "-", "File to translate ('-' = stdin).")
string("output", "-", "Where translations go ('-' = stdout).")
integer("decode_batch_size", 32, ">= 1", "Sentences per decoding batch.")

_group("export_in", "an exported model instead of a checkpoint")
string("saved_model", "", "Use this export (SavedModel or TFLite, DIR/NAME/VERSION) "
       "instead of a checkpoint (`bench --bench=decode`: several, comma-separated).")
string("signature", "serving_default", "Signature of a --saved_model to translate "
       "with (a non-autoregressive model's export also has `beam`).")

_group("server", "a served model instead of a checkpoint")
string("server", "", "Translate through TF Serving or `tfnmt serve` at this URL "
       "(http://HOST:8501) instead of a local model; --model names the served model.")
integer("model_version", 0, ">= 0", "With --server: the served version to ask for (0 = the newest).")
integer("server_retries", 5, ">= 0", "With --server: retries of a request after a connection "
        "error or a 503, with exponential back-off from 0.5 s (at most 8 s apart).")
real("server_timeout", 300.0, "> 0", "With --server: seconds to wait for one answer.")

_group("evaluation", "scoring")
boolean("lowercase", False, "Case-insensitive BLEU (the default is cased).")
options(TrainOptions, only=("bleu_tokenize",))
string("length_buckets", "", "evaluate: also BLEU by source length in words, with "
       "these bucket edges, e.g. 10,20,30,40 ('' = off).")

# --- export, average ----------------------------------------------------------------------------
_group("export", "export")
enum("format", "saved_model", ["saved_model", "tflite"],
     "Export format: a TF Serving SavedModel (text in, text out) or a TFLite "
     "flatbuffer for phones (ids in, ids out; SentencePiece model beside it).")
enum("quantize", "none", ["none", "dynamic", "float16"],
     "TFLite weights: float32, dynamic-range int8, or float16.")
string("export_dir", None, "Export base directory; the model goes to DIR/NAME/VERSION.")
string("export_name", "", "Served model name (default: the model's registry name).")
integer("export_version", 0, ">= 0", "Version directory (0 = one more than the newest there).")

_group("average", "averaging and distillation")
integer("num_checkpoints", 5, ">= 1", "How many checkpoints `average` averages.")
enum("average_from", "last", ["last", "best"],
     "Average the last N or the N best (by the --best_metric training used).")
string("output_dir", None, "Model directory that `average` writes; text corpus "
       "directory that `distill` writes.")

# --- serve ---------------------------------------------------------------------------------------
# Names follow TF Serving's tensorflow_model_server flags where it has one.
_group("serving", "serving")
string("model_config_file", "", "tfnmt serve: a TF Serving model config (models.config) "
       "naming the served models; instead of --export_dir (which serves every model in it).")
string("rest_api_host", "127.0.0.1", "tfnmt serve: address to listen on (0.0.0.0 = every interface).")
integer("rest_api_port", 8501, "[0, 65535]", "tfnmt serve: port (0 = any free port; the URL is "
        "printed).")
integer("rest_api_num_threads", 16, ">= 1", "tfnmt serve: threads answering HTTP requests.")
integer("rest_api_timeout_in_ms", 30000, ">= 1", "tfnmt serve: a request not answered by then "
        "fails with 504.")
integer("file_system_poll_wait_seconds", 1, ">= 0", "tfnmt serve: how often to look for new "
        "versions and models (0 = never).")
boolean("enable_batching", True, "tfnmt serve: merge concurrent requests into batches.")
string("batching_parameters_file", "", "tfnmt serve: TF Serving batching parameters "
       "(export/tf_serving/batching.config); its values override the four flags below.")
integer("max_batch_size", 32, ">= 1", "tfnmt serve: sentences per merged batch.")
integer("batch_timeout_micros", 5000, ">= 0", "tfnmt serve: how long a batch waits to fill.")
integer("num_batch_threads", 1, ">= 1", "tfnmt serve: batches run at once (per model version).")
integer("max_enqueued_batches", 100, ">= 1", "tfnmt serve: batches that may wait; beyond, 503.")
integer("max_request_bytes", 1 << 20, ">= 1", "tfnmt serve: largest request body (400 beyond).")
integer("max_sentences_per_request", 256, ">= 1", "tfnmt serve: most sentences in one request "
        "(400 beyond).")
integer("max_sentence_chars", 2000, ">= 1", "tfnmt serve: longest sentence, in characters "
        "(400 beyond).")

# --- bench ---------------------------------------------------------------------------------------
_group("bench", "benchmark")
enum("bench", "translate", ["train", "translate", "decode", "serve"],
     "What `tfnmt bench` measures (decode: several --saved_model=A,B,... side by "
     "side; serve: a REST load test).")
integer("bench_steps", 30, ">= 1", "Timed training steps (after 5 warm-up steps).")
integer("bench_sentences", 256, ">= 1", "Test sentences translated for the speed benchmark.")
integer("bench_latency_sentences", 50, ">= 1", "Sentences translated one by one for latency.")
integer("bench_clients", 8, ">= 1", "--bench=serve: concurrent clients.")
real("bench_seconds", 20.0, "> 0", "--bench=serve: how long each load runs.")
integer("bench_request_sentences", 1, ">= 1", "--bench=serve: sentences per request.")

# --- model hyper-parameters: one flag per name declared by any registered model ----------------
HPARAM_NAMES = catalog.define_hparam_flags()
GROUPS["model"] += HPARAM_NAMES
