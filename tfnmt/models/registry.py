"""The catalog of models: `--model NAME` -> class, and each model's hyper-parameter flags.

A model class declares `HPARAMS = {"name": (default, "help")}`. Every declared name becomes an
absl flag (default None = "the model's own default"), so flagfiles can set any of them and a
flag that the chosen model does not use is an error rather than silently ignored.
"""

from absl import flags

from tfnmt.errors import ConfigError

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


def define_hparam_flags(flag_values=flags.FLAGS):
    """Defines one flag per hyper-parameter name over all registered models."""
    _load_catalog()
    types = {}
    for cls in _MODELS.values():
        for name, (default, help_text) in cls.HPARAMS.items():
            kind = type(default)
            if name in types:
                if types[name] is not kind:
                    raise ValueError(f"hyper-parameter {name!r} declared as {types[name].__name__} "
                                     f"and {kind.__name__}")
                continue
            types[name] = kind
            if name in flag_values:
                continue
            definer = {bool: flags.DEFINE_boolean, int: flags.DEFINE_integer,
                       float: flags.DEFINE_float, str: flags.DEFINE_string}[kind]
            definer(name, None, f"[model] {help_text}", flag_values=flag_values)
    return sorted(types)


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
