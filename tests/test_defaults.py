"""Each default is declared once: the options dataclasses hold the training and decoding
defaults, the models and the search functions take values rather than repeating them, and the
checks across fields run where the options are built."""

import pytest
import tensorflow as tf

from contract import TINY, logits_of
from tfnmt.errors import ConfigError
from tfnmt.models import catalog
from tfnmt.objectives.losses import label_smoothed_cross_entropy
from tfnmt.training import trainer
from tfnmt.training.options import TrainOptions

SOURCE = tf.constant([[5, 6, 7, 3]])
TARGET_IN = tf.constant([[2, 10, 11, 12]])
TARGET_OUT = tf.constant([[10, 11, 12, 3]])


def _config(**extra):
    return dict(model="transformer", hparams=TINY["transformer"], source_vocab_size=50,
                target_vocab_size=60, **extra)


def test_training_takes_its_label_smoothing_from_the_training_options_and_a_model_none():
    # A training setting: the model built from a config (as every verb loads one) has none, so
    # a loss computed without training's setting refuses instead of taking a default of its own.
    bare = catalog.build(_config(label_smoothing=0.25))  # an older config.json recorded it
    assert bare.label_smoothing is None
    inputs = {"source": SOURCE, "target_in": TARGET_IN}
    with pytest.raises(ConfigError, match="has no label_smoothing"):
        bare.translation_loss(TARGET_OUT, logits_of(bare(inputs)))
    trained = trainer.compiled_model(_config(), TrainOptions(label_smoothing=0.25))
    assert trained.label_smoothing == 0.25
    loss, _ = trained.translation_loss(TARGET_OUT, logits_of(trained(inputs)))
    unsmoothed, _ = label_smoothed_cross_entropy(TARGET_OUT, logits_of(trained(inputs)), 0.0)
    assert float(loss) != pytest.approx(float(unsmoothed))


@pytest.mark.parametrize("change,message", [
    (dict(batch_size=8), "exactly one of --batch_tokens"),
    (dict(batch_tokens=50), "--batch_tokens=50 cannot hold one sentence"),
    (dict(best_metric="bleu", bleu_sentences=0), "--best_metric=bleu needs validation BLEU"),
    (dict(optimizer="nag", learning_rate=0.25, lr_floor=0.5), "--lr_floor must be below"),
    (dict(lr_shrink_mode="sometimes"), "choose one of on_rise, after_first_rise"),
    (dict(clip_halving=True), "--clip_halving halves --clip_norm"),
    (dict(optimizer="adadelta", lr_decay="linear"), "--lr_decay=linear shapes Adam's lr"),
])
def test_training_options_check_themselves_when_built(change, message):
    with pytest.raises(ConfigError, match=message):
        TrainOptions(**change)


def test_the_shrink_modes_are_the_options_choices():
    from tfnmt.options import declared
    from tfnmt.training import callbacks
    choices = {field.name: c for field, _, _, c in declared(TrainOptions)}["lr_shrink_mode"]
    assert callbacks.SHRINK_MODES is choices


def test_the_search_functions_take_every_decoding_setting_without_defaults_of_their_own():
    import inspect

    from tfnmt.decoding import beam_search, ctc, sampling
    from tfnmt.decoding import compiled
    for function in (beam_search.beam_search, beam_search.length_penalty, ctc.beam,
                     beam_search.next_log_probs, beam_search.step_log_probs, sampling.search,
                     sampling.sampler, compiled.greedy, compiled.beam):
        defaults = {name: p.default for name, p in inspect.signature(function).parameters.items()
                    if p.default is not p.empty}
        # `alignments` asks for the attention too, `ban` is what next_log_probs bans, `prefix`
        # the given target prefixes; none is a DecodingOptions value.
        assert set(defaults) <= {"alignments", "ban", "prefix"}, (function.__name__, defaults)


def test_a_hyper_parameter_several_families_read_has_a_help_naming_each_meaning():
    from tfnmt.cli import flags as flag_defs
    from tfnmt.cli import verbs
    help_text = flag_defs.FLAGS["dropout"].help
    for models, meaning in [("ctc_nat, deep_transformer, transformer",
                             "dropout on embeddings and sub-layer outputs"),
                            ("convs2s, densenmt", "dropout on embeddings and layer inputs"),
                            ("deepgru, deeplau", "dropout on the word embeddings"),
                            ("conv_encoder, gru_encdec",
                             "dropout on the word embeddings and on the maxout output")]:
        assert f"{models}: {meaning}" in help_text
    # hybrid reads its encoder's or decoder's, whichever it is told to use.
    assert "hybrid: its chosen part's" in help_text
    # Every model's defaults: no --model left over from an earlier command in this process.
    flag_defs.FLAGS.unparse_flags()
    flag_defs.FLAGS(["tfnmt"])
    listed = " ".join(verbs.help_text("train", flag_defs.FLAGS).split())
    assert "convs2s 0.2" in listed and "gru_encdec 0.0" in listed and "transformer 0.1" in listed
    # A name every model declares alike keeps its one help.
    assert flag_defs.FLAGS["attention_dropout"].help == "[model] dropout on attention weights"


def test_parts_that_share_a_name_share_its_declaration():
    from tfnmt.layers import hparams
    from tfnmt.models.catalog import MODELS
    shared = {"dropout": hparams.DROPOUT, "embed_dim": hparams.EMBED_DIM,
              "attention_dim": hparams.ATTENTION_DIM}
    for cls in MODELS.values():
        for name, base in shared.items():
            if name in cls.HPARAMS:
                spec = cls.HPARAMS[name]
                assert (spec.kind, spec.bounds) == (base.kind, base.bounds), (cls, name)


@pytest.mark.slow
def test_no_module_below_the_cli_defines_or_parses_flags():
    import ast
    import os

    from conftest import REPO
    found = []
    for directory, _, files in os.walk(os.path.join(REPO, "tfnmt")):
        for name in files:
            path = os.path.join(directory, name)
            if not name.endswith(".py") or os.path.relpath(path, REPO).startswith(
                    os.path.join("tfnmt", "cli")):
                continue
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if isinstance(node, ast.ImportFrom) and node.module == "absl" and any(
                        a.name == "flags" for a in node.names):
                    found.append(os.path.relpath(path, REPO))
                if isinstance(node, ast.Import) and any(a.name == "absl.flags" for a in node.names):
                    found.append(os.path.relpath(path, REPO))
    assert found == []


@pytest.mark.parametrize("change,message", [
    (dict(quantize="dynamic"), "--quantize applies to --format=tflite only"),
    (dict(format="ctranslate2", quantize="float16"),
     "--quantize does not apply to --format=ctranslate2"),
    (dict(format="onnx"), "--format='onnx': choose one of saved_model, tflite, ctranslate2"),
    (dict(format="tflite", score=True), "--score adds a SavedModel signature: not with "
                                        "--format=tflite"),
    (dict(format="ctranslate2", prefix=True), "--prefix adds a SavedModel signature: not with "
                                              "--format=ctranslate2"),
])
def test_export_options_check_themselves_when_built(change, message):
    from tfnmt.exporters.options import ExportOptions
    with pytest.raises(ConfigError, match=message):
        ExportOptions(**change)
    assert ExportOptions(format="tflite", quantize="dynamic").quantize == "dynamic"


def _cli_sources():
    import ast
    import glob
    import os

    from conftest import REPO
    for path in sorted(glob.glob(os.path.join(REPO, "tfnmt", "cli", "*.py"))):
        yield os.path.basename(path), ast.parse(open(path, encoding="utf-8").read())


def test_the_verbs_read_typed_options_not_flag_values():
    """cli/flags.py turns the flags into the options dataclasses (`read`); a verb reads those.
    Left: main.py parses, experiment.py forwards the flags themselves to each run."""
    import ast

    from tfnmt.cli import flags as flag_defs
    names = {name for group in flag_defs.GROUPS.values() for name in group}
    reads = []
    for name, tree in _cli_sources():
        if name in ("flags.py", "hparams.py"):
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "FLAGS" and node.attr in names):
                reads.append(f"{name}:{node.lineno} FLAGS.{node.attr}")
            if (isinstance(node, ast.Attribute) and node.attr == "value"
                    and isinstance(node.value, ast.Subscript)
                    and getattr(node.value.value, "id", None) == "FLAGS"):
                reads.append(f"{name}:{node.lineno} FLAGS[...].value")
    assert reads == []


def test_the_backend_factory_takes_the_declared_options():
    import inspect

    from tfnmt.serving import backends
    from tfnmt.serving.options import ClientOptions, ExportedModelOptions
    defaults = {name: p.default for name, p in
                inspect.signature(backends.open_backend).parameters.items()}
    assert defaults["export"] == ExportedModelOptions() and defaults["client"] == ClientOptions()
    for function in (backends.from_export, backends.from_server):
        assert all(p.default is p.empty
                   for p in inspect.signature(function).parameters.values()), function


def test_the_optimizer_and_the_tflite_converter_take_the_declared_options():
    import inspect

    from tfnmt.exporters import options as export_options
    from tfnmt.exporters import tflite
    from tfnmt.training.optimizers import make_optimizer
    assert list(inspect.signature(make_optimizer).parameters) == ["options", "epsilon"]
    nag = make_optimizer(TrainOptions(optimizer="nag", learning_rate=0.5))
    assert nag.nesterov and float(nag.momentum) == pytest.approx(TrainOptions.momentum)
    assert inspect.signature(tflite.convert).parameters["quantize"].default is inspect._empty
    assert tflite.QUANTIZATIONS is export_options.QUANTIZATIONS
