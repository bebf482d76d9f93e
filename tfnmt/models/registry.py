"""The catalog of models: `--model NAME` -> class, and each model's hyper-parameter flags.

A model class declares `HPARAMS = {"name": (default, "help")}`, or `(default, "help", RANGE)`
for a number (RANGE as tfnmt/ranges.py reads it: ">= 1", "[0, 1)"). Every declared name becomes
an absl flag (default None = "the model's own default"), so flagfiles can set any of them and a
flag that the chosen model does not use is an error rather than silently ignored. A flag refuses
values outside every model's range when it is parsed; `Seq2SeqModel.with_defaults` holds each
model to its own range (a name several models share may be bounded differently by each).
"""

from absl import flags

from tfnmt.errors import ConfigError
from tfnmt.ranges import NumberParser, Range

_MODELS = {}


def register(name):
    def decorator(cls):
        if name in _MODELS:
            raise ValueError(f"model {name!r} registered twice")
        cls.registry_name = name
        _MODELS[name] = cls
        return cls
    return decorator


def names():
    _load_catalog()
    return sorted(_MODELS)


def get(name):
    _load_catalog()
    if name not in _MODELS:
        raise ConfigError(f"unknown model {name!r}; known models: {', '.join(sorted(_MODELS))}")
    return _MODELS[name]


def _load_catalog():
    # Importing the family modules fills the registry.
    from tfnmt.models import catalog  # noqa: F401


def hparam_range(cls, name):
    """The Range a model declares for a numeric hyper-parameter, or None."""
    spec = cls.HPARAMS[name]
    return Range.parse(spec[2]) if len(spec) > 2 else None


def check_hparams(cls, hparams):
    """Raises ConfigError for a value outside the range the model declares for it."""
    for name, value in sorted(hparams.items()):
        bounds = hparam_range(cls, name) if name in cls.HPARAMS else None
        if bounds is not None and value not in bounds:
            kind = type(cls.HPARAMS[name][0])
            raise ConfigError(f"--{name}={value}: model {cls.registry_name!r} needs "
                              f"{bounds.describe(kind)}")


def define_hparam_flags(flag_values=flags.FLAGS):
    """Defines one flag per hyper-parameter name over all registered models; a numeric flag
    takes the values any model allows (the hull of their ranges)."""
    _load_catalog()
    types, ranges, helps = {}, {}, {}
    for cls in _MODELS.values():
        for name, spec in cls.HPARAMS.items():
            kind = type(spec[0])
            if types.setdefault(name, kind) is not kind:
                raise ValueError(f"hyper-parameter {name!r} declared as {types[name].__name__} "
                                 f"and {kind.__name__}")
            helps.setdefault(name, spec[1])
            if kind in (int, float):
                bounds = hparam_range(cls, name)
                if bounds is None:
                    raise ValueError(f"{cls.__name__}.HPARAMS[{name!r}] declares no range")
                ranges[name] = ranges[name].hull(bounds) if name in ranges else bounds
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
    _load_catalog()
    return {model: cls.HPARAMS[name][0] for model, cls in sorted(_MODELS.items())
            if name in cls.HPARAMS}


def hparams_from_flags(cls, flag_values=flags.FLAGS):
    """The model's hyper-parameters: its defaults overridden by the flags the user set."""
    given = {}
    for name in sorted({n for c in _MODELS.values() for n in c.HPARAMS}):
        value = flag_values[name].value
        if value is None:
            continue
        if name not in cls.HPARAMS:
            raise ConfigError(f"--{name} is not a hyper-parameter of model {cls.registry_name!r}")
        given[name] = value
    return cls.with_defaults(given)
