"""Naming a model class (`@register(NAME)`) and holding a model to its declared hyper-parameters.

A leaf: it imports no model. `tfnmt/models/catalog.py` imports every family (which registers
them) and answers `--model NAME`.

A model class declares `HPARAMS = {"name": (default, "help")}`, or `(default, "help", RANGE)`
for a number (RANGE as tfnmt/ranges.py reads it: ">= 1", "[0, 1)"). `Seq2SeqModel.with_defaults`
holds each model to its own range (a name several models share may be bounded differently by
each).
"""

from tfnmt.errors import ConfigError
from tfnmt.ranges import Range

_MODELS = {}


def register(name):
    def decorator(cls):
        if name in _MODELS:
            raise ValueError(f"model {name!r} registered twice")
        cls.registry_name = name
        _MODELS[name] = cls
        return cls
    return decorator


def registered():
    """{name: class} of the models registered so far (catalog.py imports them all)."""
    return dict(_MODELS)


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
