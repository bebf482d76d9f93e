"""Every model, by name: `--model NAME` -> class, building a model from its config, and the
hyper-parameter flags of all models. Importing a family registers its models: a new family is
one line here.

Every declared hyper-parameter name becomes an absl flag (default None = "the model's own
default"), so flagfiles can set any of them, and a flag that the chosen model does not use is an
error rather than silently ignored. A numeric flag refuses values outside every model's range
when it is parsed; each model is then held to its own declaration (Seq2SeqModel.with_defaults).
"""

from absl import flags

from tfnmt.errors import ConfigError
from tfnmt.models import (conv_encoder, convs2s, ctc_nat, deep_transformer, deeplau,  # noqa: F401
                          densenmt, hybrid, transformer)
from tfnmt.models.registry import registered
from tfnmt.ranges import NumberParser

MODELS = registered()


def names():
    return sorted(MODELS)


def get(name):
    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}")
    return MODELS[name]


def upgrade(config):
    """A config (a model directory's config.json) in today's hyper-parameter names."""
    renamed = getattr(MODELS.get(config.get("model")), "RENAMED", {})
    if not renamed:
        return config
    return dict(config, hparams={renamed.get(k, k): v for k, v in config["hparams"].items()})


def build(config):
    """The model a config (model_dir.new_config, a model directory's config.json) describes,
    with fresh weights and every variable created."""
    cls = get(config["model"])
    model = cls(config["source_vocab_size"], config["target_vocab_size"],
                label_smoothing=config.get("label_smoothing"), **config["hparams"])
    model.build_with_dummy_batch()
    return model


def define_hparam_flags(flag_values=flags.FLAGS):
    """Defines one flag per hyper-parameter name over all models; a numeric flag takes the
    values any model allows (the hull of their ranges)."""
    types, ranges, helps = {}, {}, {}
    for cls in MODELS.values():
        for name, spec in cls.HPARAMS.items():
            kind = spec.kind
            if types.setdefault(name, kind) is not kind:
                raise ValueError(f"hyper-parameter {name!r} declared as {types[name].__name__} "
                                 f"and {kind.__name__}")
            helps.setdefault(name, spec.describe())
            if spec.range is not None:
                ranges[name] = ranges[name].hull(spec.range) if name in ranges else spec.range
    for name, kind in types.items():
        if name in flag_values:
            continue
        if name in ranges:
            flags.DEFINE(NumberParser(kind, ranges[name]), name, None, f"[model] {helps[name]}",
                         flag_values=flag_values, serializer=flags.ArgumentSerializer())
        else:
            definer = {bool: flags.DEFINE_boolean, str: flags.DEFINE_string}[kind]
            definer(name, None, f"[model] {helps[name]}", flag_values=flag_values)
    return sorted(types)


def declaring(name):
    """{model name: its default} of the models that declare hyper-parameter `name`."""
    return {model: cls.HPARAMS[name].default for model, cls in sorted(MODELS.items())
            if name in cls.HPARAMS}


def hparams_from_flags(cls, flag_values=flags.FLAGS):
    """The model's hyper-parameters: its defaults overridden by the flags the user set."""
    given = {}
    for name in sorted({n for c in MODELS.values() for n in c.HPARAMS}):
        value = flag_values[name].value
        if value is None:
            continue
        if name not in cls.HPARAMS:
            raise ConfigError(f"--{name} is not a hyper-parameter of model {cls.registry_name!r}")
        given[name] = value
    return cls.with_defaults(given)
