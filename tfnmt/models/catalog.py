"""Every model, by name: `--model NAME` -> class, building a model from its config, and which
models declare a hyper-parameter (with what default and help). Importing a family registers its
models: a new family is one line here. The hyper-parameters' flags are cli/hparams.py's.
"""

from tfnmt.errors import ConfigError
from tfnmt.models import (conv_encoder, convs2s, ctc_nat, deep_transformer, deeplau,  # noqa: F401
                          densenmt, hybrid, transformer)
from tfnmt.models.base import Seq2SeqModel
from tfnmt.models.registry import registered

MODELS = registered()


def names():
    return sorted(MODELS)


def get(name):
    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}")
    return MODELS[name]


def build(config):
    """The model a config (model_dir.new_config, a model directory's config.json) describes,
    with fresh weights and every variable created."""
    cls = get(config["model"])
    model = cls(config["source_vocab_size"], config["target_vocab_size"], **config["hparams"])
    model.build_with_dummy_batch()
    return model


def chooses_parts(cls):
    """Whether the model's declarations depend on its hyper-parameters (hybrid: those of the
    encoder and decoder it is told to use)."""
    return cls.declared.__func__ is not Seq2SeqModel.declared.__func__


def declarations(name):
    """{model name: its HParam} of the models that declare hyper-parameter `name`. A model that
    chooses its parts (hybrid) is among them when the others agree on one declaration, which
    it then reads whichever part it uses; else `part_choosing` names it."""
    declaring = {model: cls for model, cls in sorted(MODELS.items()) if name in cls.HPARAMS}
    fixed = {model: cls.HPARAMS[name] for model, cls in declaring.items()
             if not chooses_parts(cls)}
    if len(set(fixed.values())) > 1:
        return fixed
    return {model: cls.HPARAMS[name] for model, cls in declaring.items()}


def part_choosing(name):
    """The models that read `name` with the declaration of the part they are told to use, when
    the parts' declarations differ."""
    return [model for model, cls in sorted(MODELS.items())
            if name in cls.HPARAMS and model not in declarations(name)]


def declaring(name):
    """{model name: its default} of the models that declare hyper-parameter `name` whatever
    their other settings."""
    return {model: spec.default for model, spec in declarations(name).items()}


def hparam_names():
    """Every hyper-parameter name any registered model declares, sorted."""
    return sorted({name for cls in MODELS.values() for name in cls.HPARAMS})
