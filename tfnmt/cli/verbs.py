"""The verbs, and which flags each one reads: its help lists those, grouped as cli/flags.py
groups them, and a flag given ON THE COMMAND LINE that the verb would not read is refused
(`tfnmt translate --model_dir=M --d_model=512` would otherwise translate with the trained
model's width and say nothing). Flags from a --flagfile are exempt: one flagfile drives every
verb. Some flags are read only in one mode of a verb (decoding flags with a checkpoint, not with
an export, whose decoding settings were fixed when it was exported); `When` names that mode.
"""

import os
import textwrap

class When:
    """A mode of a verb: `test(FLAGS)` says whether it is on; `text` completes "read only ..."."""

    def __init__(self, test, text):
        self.test, self.text = test, text

    def __and__(self, other):
        return When(lambda f: self.test(f) and other.test(f), f"{self.text} and {other.text}")


class Verb:
    def __init__(self, summary, *reads):
        """reads: lists of flag names and groups, or (When, list) pairs for those read in one
        mode. Groups are expanded when first needed, so that `tfnmt --help` loads no model."""
        self.summary = summary
        self._reads = [r if isinstance(r, tuple) else (None, r) for r in reads]

    @property
    def reads(self):
        return [(when, _expand(names)) for when, names in self._reads]

    def names(self):
        return {name for _, names in self.reads for name in names}

    def reads_now(self, name, flag_values):
        return any(when is None or when.test(flag_values) for when in self.modes(name))

    def modes(self, name):
        """The modes in which the verb reads `name` ([None] = always; [] = never)."""
        return [when for when, names in self.reads if name in names]


class group(str):
    """A group of cli/flags.py, standing for its flags."""


def _expand(items):
    from tfnmt.cli import flags as flag_defs
    return [name for item in items
            for name in (flag_defs.GROUPS[item] if isinstance(item, group) else [item])]


def _trained_model_dir(f):
    from tfnmt import model_dir
    return bool(f.model_dir) and os.path.isfile(model_dir.config_path(f.model_dir))


DATA_SOURCE = ["data", "source_lang", "target_lang", "manual_dir", "tfds_data_dir"]
# An export or a served model decodes with the settings it was exported with.
CHECKPOINT = When(lambda f: not f.server and not f.saved_model,
                  "with a checkpoint (--model_dir), not with --saved_model or --server")
EXPORT = When(lambda f: bool(f.saved_model) and not f.server, "with --saved_model")
SERVER = When(lambda f: bool(f.server), "with --server")
# Where translations come from: a checkpoint, an export or a server (cli/common.py).
TRANSLATOR = [(CHECKPOINT, [group("model_dir"), group("decoding")]),
              (EXPORT, [group("export_in")]),
              (SERVER, [group("server")])]
# Of the decoding settings, those that change a given translation's score: the normalized score
# is over the length penalty, a source is cut as the translator cuts it, and bfloat16 rounds.
SCORING_DECODING = ["length_penalty", "length_penalty_mode", "max_input_length", "decode_dtype"]


def _bench(*kinds):
    return When(lambda f: f.bench in kinds, f"with --bench={' or '.join(kinds)}")


VERBS = {
    "vocab": Verb(
        "train the SentencePiece vocabulary",
        ["model_dir", *DATA_SOURCE, "train_split", "train_limit", group("vocabulary"), "seed"]),
    "train": Verb(
        "train or resume a model (builds the vocabulary if missing)",
        ["model_dir", *DATA_SOURCE, "train_split", "valid_split", "test_split", "train_limit",
         "valid_limit", group("vocabulary"), group("model"), group("training"), group("decoding"),
         "bleu_tokenize", "data_service"],  # validation BLEU
        (When(lambda f: f.evaluate_at_end, "with --evaluate_at_end"),
         ["checkpoint", "test_limit", "decode_batch_size", "output", group("evaluation")])),
    "evaluate": Verb(
        "sacreBLEU and chrF on the test split",
        *TRANSLATOR,
        [*DATA_SOURCE, "test_split", "test_limit", "decode_batch_size", "output",
         group("evaluation")]),
    "translate": Verb(
        "translate a file or stdin",
        *TRANSLATOR,
        [group("translation")]),
    "score": Verb(
        "log-probability of given translations, or rerank an n-best list",
        (CHECKPOINT, ["model_dir", "checkpoint", *SCORING_DECODING]),
        (EXPORT, ["saved_model"]),  # its `score` signature, not --signature's
        (SERVER, [group("server")]),
        ["input", "output", "decode_batch_size", group("score")]),
    "export": Verb(
        "export a SavedModel for TF Serving, a TFLite flatbuffer or a CTranslate2 model",
        [group("model_dir"), group("decoding"), "n_best", "alignments", group("export")]),
    "serve": Verb(
        "serve exported models over TF Serving's REST API",
        ["export_dir", group("serving")]),
    "average": Verb(
        "average the last or best checkpoints",
        ["model_dir", group("average")]),
    "distill": Verb(
        "translate the training data with a teacher into a new text corpus",
        *TRANSLATOR,
        ["output_dir", *DATA_SOURCE, "train_split", "valid_split", "test_split", "train_limit",
         "decode_batch_size"]),
    "experiment": Verb(
        "train, score and compare systems over seeds at one budget (configs/experiments/)",
        [group("experiment"), "train_steps", "batch_tokens", "batch_size", "accumulate_steps",
         "best_metric", "early_stopping_patience", "validate_every", "bleu_sentences",
         *DATA_SOURCE, "test_limit", "decode_batch_size", "length_buckets", "bleu_tokenize",
         group("decoding")]),
    "info": Verb(
        "list models, or count a model's parameters",
        ["model_dir"],
        (When(lambda f: not _trained_model_dir(f),
              "for a model not trained yet (no config.json in --model_dir)"),
         [group("model"), "vocab_size"])),
    "upgrade": Verb(
        "rewrite an older model directory's config.json in today's format",
        ["model_dir"]),
    "data-service": Verb(
        "run a tf.data service dispatcher or worker that makes training batches",
        [group("data_service")]),
    "bench": Verb(
        "measure training and translation speed",
        ["bench", "bench_output"],
        (_bench("train"),
         ["model_dir", group("model"), *DATA_SOURCE, "train_split", "train_limit",
          group("vocabulary"), "seed", "init_from", "label_smoothing", "precision", "optimizer",
          "learning_rate", "warmup_steps", "lr_decay", "adam_beta2", "momentum", "clip_norm",
          "accumulate_steps", "deterministic", "jit_compile", "batch_tokens", "batch_size",
          "shuffle_buffer", "max_source_length", "max_target_length", "bench_steps"]),
        *[(_bench("translate") & when, names) for when, names in TRANSLATOR],
        (_bench("translate"), [*DATA_SOURCE, "test_split", "bench_sentences",
                               "bench_latency_sentences", "decode_batch_size",
                               "compare_ctranslate2"]),
        (_bench("decode"), ["saved_model", *DATA_SOURCE, "test_split", "bench_sentences",
                            "bench_latency_sentences", "decode_batch_size"]),
        (_bench("serve", "soak"),
         ["served_model", "server_timeout", "bench_clients", "bench_seconds",
          "bench_request_sentences", "input"]),
        (_bench("serve"), ["model_version"]),
        (_bench("serve") & SERVER, ["server"]),
        (When(lambda f: f.bench == "soak" or (f.bench == "serve" and not f.server),
              "with --bench=soak, or serve without --server"),
         ["export_dir", "max_batch_size", "batch_timeout_micros", "num_batch_threads",
          "max_enqueued_batches", "rest_api_num_threads"]),
        (_bench("soak"), ["enable_batching", "bench_reloads"]),
        (_bench("serve", "soak") & When(lambda f: f.input == "-", "without --input"),
         [*DATA_SOURCE, "test_split", "bench_sentences"]),
        (_bench("data"), ["model_dir", *DATA_SOURCE, "train_split", "train_limit",
                          group("vocabulary"), "seed", "batch_tokens", "batch_size",
                          "shuffle_buffer", "max_source_length", "max_target_length",
                          "bench_resume_at", "bench_tfds_mock"])),
}


def command_line_flags(args, flag_values):
    """Names of the flags set by `args` themselves (not by a --flagfile they name)."""
    names = []
    for arg in args:
        if arg == "--":
            break
        if not arg.startswith("-"):
            continue
        name = arg.lstrip("-").split("=", 1)[0]
        if name not in flag_values and name.startswith("no") and name[2:] in flag_values:
            name = name[2:]
        if name in flag_values:
            names.append(name)
    return names


def unread_flag(verb, args, flag_values):
    """The message for the first flag of `args` that `verb` would not read, or None."""
    from tfnmt.cli import flags as flag_defs
    spec = VERBS[verb]
    ours = {name for names in flag_defs.GROUPS.values() for name in names}
    for name in command_line_flags(args, flag_values):
        if name not in ours:
            continue
        if spec.reads_now(name, flag_values):
            continue
        if name == "model" and spec.reads_now("served_model", flag_values):
            return ("--model names an architecture, not a served model: name the served model "
                    "with --served_model")
        modes = spec.modes(name)
        if modes:
            return (f"--{name} would be ignored: `tfnmt {verb}` reads it only "
                    + "; or ".join(when.text for when in modes))
        readers = [v for v, s in VERBS.items() if name in s.names()]
        return (f"--{name} would be ignored: `tfnmt {verb}` does not read it"
                + (f" ({', '.join(readers)} do)" if readers else "")
                + "; a --flagfile may hold flags a command does not read, the command line "
                  "may not")
    return None


def chosen_model_hparams(flag_values):
    """{name: HParam} of the model --model names (of the parts the flags choose, for a hybrid),
    or None without a known --model."""
    from tfnmt.cli import flags as flag_defs
    from tfnmt.models import catalog
    if flag_values["model"].value not in catalog.names():
        return None
    given = {name: flag_values[name].value for name in flag_defs.HPARAM_NAMES
             if flag_values[name].value is not None}
    from tfnmt.errors import ConfigError
    try:
        return catalog.get(flag_values["model"].value).declared(given)
    except ConfigError:  # parts a hybrid cannot pair: the command itself will say so
        return None


def _default_text(flag, model_hparams=None):
    from tfnmt.cli import flags as flag_defs
    if model_hparams is not None and flag.name in model_hparams:
        return f"default {_value(model_hparams[flag.name].default)}"
    if flag.name in flag_defs.HPARAM_NAMES:
        from tfnmt.cli.hparams import CHOSEN_PART
        from tfnmt.models import catalog
        return ", ".join([f"{model} {_value(v)}" for model, v in catalog.declaring(flag.name).items()]
                         + [f"{model} {CHOSEN_PART}" for model in catalog.part_choosing(flag.name)])
    return f"default {_value(flag.default)}"


def _value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None or value == "":
        return "none" if value is None else "''"
    return str(value)


def _flag_help(name, text):
    """`  --name   text`, wrapped to 100 columns under a 28-column name field."""
    lead = f"  {name} ".ljust(28)
    if len(lead) > 28:
        return "\n".join([lead.rstrip()] + textwrap.wrap(text, 100, initial_indent=" " * 28,
                                                         subsequent_indent=" " * 28))
    return "\n".join(textwrap.wrap(text, 100, initial_indent=lead, subsequent_indent=" " * 28))


def _flag_text(flag, when, model_hparams=None):
    facts = [_default_text(flag, model_hparams)]
    from tfnmt.cli.hparams import HELP_PREFIX
    text = flag.help[len(HELP_PREFIX):] if flag.help.startswith(HELP_PREFIX) else flag.help
    own = (model_hparams or {}).get(flag.name)
    if own is not None:  # the chosen model's help and range, not every model's
        text = own.describe()
        if own.range is not None:
            facts.append(own.range.describe(own.kind))
    elif getattr(flag.parser, "range", None) is not None:
        facts.append(flag.parser.syntactic_help)
    if when is not None:
        facts.append(f"only {when.text}")
    return f"{text} [{'; '.join(facts)}]"


def help_text(verb, flag_values):
    """`tfnmt VERB --help`: the flags the verb reads, by group, with defaults and ranges; a mode
    that all flags of a group share is named once, after the group's title. With --model=X,
    the model's hyper-parameters are X's alone, with X's defaults."""
    from tfnmt.cli import flags as flag_defs
    spec = VERBS[verb]
    model_hparams = chosen_model_hparams(flag_values)
    hidden = (set() if model_hparams is None
              else set(flag_defs.HPARAM_NAMES) - set(model_hparams))
    lines = [f"tfnmt {verb}: {spec.summary}", "",
             f"usage: tfnmt {verb} [--flag=value ...] [--flagfile=FILE]", ""]
    for group_name, names in flag_defs.GROUPS.items():
        read = {n: spec.modes(n) for n in names if spec.modes(n) and n not in hidden}
        if not read:
            continue
        whens = {id(m[0]): m[0] for m in read.values() if len(m) == 1 and m[0] is not None}
        shared = next(iter(whens.values())) if len(whens) == 1 and all(
            len(m) == 1 and m[0] is not None for m in read.values()) else None
        title = flag_defs.TITLES[group_name]
        if group_name == "model" and model_hparams is not None:
            title += f", the flags of --model={flag_values['model'].value}"
        lines.append(f"{title}, only {shared.text}:" if shared else f"{title}:")
        for name, modes in read.items():
            when = None if shared or None in modes or len(modes) != 1 else modes[0]
            flag = flag_values[name]
            shown = f"--[no]{name}" if flag.boolean else f"--{name}"
            lines.append(_flag_help(shown, _flag_text(flag, when, model_hparams)))
        lines.append("")
    lines.append("general:")
    lines.append(_flag_help("--flagfile=FILE", "Read flags from FILE, one per line; a flagfile "
                            "may set flags this verb does not read, the command line may not."))
    lines.append(_flag_help("--verbosity=N", "0 (the default): tfnmt's own progress and "
                            "warnings; 1: also the detail (TensorFlow's and TFDS's log lines, "
                            "every checkpoint saved); -1: warnings only."))
    return "\n".join(lines)
