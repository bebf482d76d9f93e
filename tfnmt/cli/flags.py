"""Every tfnmt flag, defined once, with its group and, for a number, the range it must lie in.
All commands share one flag namespace, so one flagfile can drive vocab, train, evaluate,
translate and export alike; which flags each command reads is declared in cli/verbs.py.

A value out of its range stops the command while the flags are parsed, before any model or
data is loaded: `tfnmt VERB: error: --beam_size=0: must be an integer >= 1`.
"""

import os

from absl import flags

from tfnmt import options as tfnmt_options
from tfnmt.cli.options import (AverageOptions, BenchOptions, ModelDirOptions, ModelOptions,
                               ScoreOptions, TrainRunOptions, TranslationOptions)
from tfnmt.data.options import DataOptions, DataServiceOptions, VocabOptions
from tfnmt.decoding.options import DecodingOptions
from tfnmt.evaluation.options import ScoringOptions
from tfnmt.exporters.options import ExportOptions
from tfnmt.experiments.options import ExperimentOptions
from tfnmt.cli import hparams
from tfnmt.cli.parsers import NumberParser
from tfnmt.serving.options import (BatchingOptions, ClientOptions, ExportedModelOptions,
                                   ServeOptions)
from tfnmt.training.options import TrainOptions

FLAGS = flags.FLAGS

# The flagfiles the latest parse read (reset by the caller): an experiment finds its --systems
# paths from them.
FLAGFILES_READ = []


def _finding_nested_flagfiles(read_file):
    """absl reads a --flagfile= line inside a flagfile from the current directory; this reads it
    from the including file's directory or above when the current directory does not hold it
    (options.find_relative). absl calls `_get_flag_file_lines` for every file it reads, with
    the stack of the files including it."""
    def get_flag_file_lines(filename, parsed_file_stack=None):
        if parsed_file_stack and filename:
            including = parsed_file_stack[-1]
            start = [os.path.dirname(os.path.abspath(including))]
            found = tfnmt_options.find_relative(filename, start)
            if found is None:
                raise flags.CantOpenFlagFileError(
                    f"{filename}, included by {including}: "
                    f"{tfnmt_options.not_found_from(filename, start)}")
            filename = found
        if filename:
            FLAGFILES_READ.append(filename)
        return read_file(filename, parsed_file_stack)
    return get_flag_file_lines


# FlagValues.__setattr__ sets flags: the method goes into the instance's __dict__ directly.
FLAGS.__dict__["_get_flag_file_lines"] = _finding_nested_flagfiles(FLAGS._get_flag_file_lines)

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
    flags.DEFINE(NumberParser(kind, bounds), name, default, help_text,
                 serializer=flags.ArgumentSerializer())
    _add(name)


def string(name, default, help_text):
    flags.DEFINE_string(name, default, help_text)
    _add(name)


def boolean(name, default, help_text):
    flags.DEFINE_boolean(name, default, help_text)
    _add(name)


def enum(name, default, choices, help_text):
    flags.DEFINE_enum(name, default, choices, help_text)
    _add(name)


OPTION_CLASSES = []  # every options dataclass that declares flags, in order


def options(cls, only=None, skip=()):
    """One flag per field of an options dataclass (tfnmt/options.py), in the current group:
    the fields named in `only` (default all) but not in `skip`."""
    if cls not in OPTION_CLASSES:
        OPTION_CLASSES.append(cls)
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


def read(cls, values=None):
    """The options dataclass `cls` as the parsed flags (or another parse, `values`) give it."""
    values = FLAGS if values is None else values
    return tfnmt_options.from_values(cls, {name: values[name].value
                                           for name in tfnmt_options.names(cls)})


def read_fields(cls, names, values=None):
    """{name: value} of some fields of `cls`, each held to its declaration but not to the checks
    across fields: for a verb that reads only these (`translate --server` reads --n_best, not
    the --beam_size it would be checked against)."""
    values = FLAGS if values is None else values
    for field, _, bounds, choices in tfnmt_options.declared(cls):
        if field.name in names:
            tfnmt_options.check_value(field, bounds, choices, values[field.name].value)
    return {name: values[name].value for name in names}


def given(cls, values=None):
    """The fields of `cls` that the parsed flags (or `values`) set, on the command line or in a
    flagfile: where a recorded setting gives way only to the user's."""
    values = FLAGS if values is None else values
    return {name for name in tfnmt_options.names(cls) if values[name].present}


# --- where things are --------------------------------------------------------------------------
_group("model_dir", "model directory")
options(ModelDirOptions)

_group("data", "data")
options(DataOptions)

_group("data_service", "tf.data service (training batches made on other machines)")
options(DataServiceOptions)

# --- vocabulary ---------------------------------------------------------------------------------
_group("vocabulary", "vocabulary (`train` trains one when the model directory has none)")
options(VocabOptions)

# --- the model ------------------------------------------------------------------------------------
_group("model", "model (the architecture of a new model)")
options(ModelOptions)

# --- training -----------------------------------------------------------------------------------
_group("training", "training")
# Validation BLEU's tokenizer is declared with the training options and listed under scoring.
options(TrainOptions, skip=("bleu_tokenize",))
options(TrainRunOptions)

# --- decoding -----------------------------------------------------------------------------------
_group("decoding", "decoding")
options(DecodingOptions, skip=("n_best", "alignments"))

_group("translation", "input and output")
options(TranslationOptions)
# Read from a checkpoint, an export and a server alike.
options(DecodingOptions, only=("n_best", "alignments"))

_group("score", "given translations")
options(ScoreOptions)

_group("export_in", "an exported model instead of a checkpoint")
options(ExportedModelOptions)

_group("server", "a served model instead of a checkpoint")
options(ClientOptions)

_group("evaluation", "scoring")
options(ScoringOptions, only=("lowercase",))
options(TrainOptions, only=("bleu_tokenize",))
options(ScoringOptions, skip=("lowercase",))

# --- export, average ----------------------------------------------------------------------------
_group("export", "export")
options(ExportOptions)

_group("average", "averaging and distillation")
options(AverageOptions)

# --- serve ---------------------------------------------------------------------------------------
_group("serving", "serving")
options(ServeOptions)
options(BatchingOptions)

# --- experiment ----------------------------------------------------------------------------------
_group("experiment", "experiment (configs/experiments/)")
options(ExperimentOptions)

# --- bench ---------------------------------------------------------------------------------------
_group("bench", "benchmark")
options(BenchOptions)

# --- model hyper-parameters: one flag per name declared by any registered model ----------------
HPARAM_NAMES = hparams.define_flags()
GROUPS["model"] += HPARAM_NAMES
