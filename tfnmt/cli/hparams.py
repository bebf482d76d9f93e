"""The model hyper-parameters' flags: one absl flag per name any registered model declares
(models/catalog.py), default None = "the model's own default", so that a flagfile can set any of
them, and a flag that the chosen model does not use is an error rather than silently ignored.

A numeric flag refuses values outside every model's range when it is parsed; each model is then
held to its own declaration (Seq2SeqModel.with_defaults). A name several models declare with
different help (dropout: where each family drops) gets a help that says what each one means by
it; `tfnmt VERB --help` lists each model's default beside it (cli/verbs.py).
"""

from absl import flags, logging

from tfnmt import formats, model_dir
from tfnmt.errors import ConfigError
from tfnmt.models import catalog
from tfnmt.cli.parsers import NumberParser

HELP_PREFIX = "[model] "
# How the help and the defaults name a model that reads a name with its chosen part's meaning.
CHOSEN_PART = "its chosen part's"


def flag_help(name):
    """The help of hyper-parameter `name`: its declaration's, or, when the models that declare
    it say different things, each text with the models that say it."""
    texts = {}
    for model, spec in catalog.declarations(name).items():
        texts.setdefault(spec.describe(), []).append(model)
    choosing = catalog.part_choosing(name)
    if len(texts) == 1 and not choosing:
        return next(iter(texts))
    return "; ".join([f"{', '.join(models)}: {text}" for text, models in texts.items()]
                     + [f"{model}: {CHOSEN_PART}" for model in choosing])


def define_flags(flag_values=flags.FLAGS):
    """Defines one flag per hyper-parameter name over all models; a numeric flag takes the
    values any model allows (the hull of their ranges). Returns the names, sorted."""
    names = catalog.hparam_names()
    for name in names:
        if name in flag_values:
            continue
        specs = [cls.HPARAMS[name] for cls in catalog.MODELS.values() if name in cls.HPARAMS]
        kinds = {spec.kind for spec in specs}
        if len(kinds) > 1:
            raise ValueError(f"hyper-parameter {name!r} declared as "
                             f"{' and '.join(sorted(k.__name__ for k in kinds))}")
        kind, text = kinds.pop(), HELP_PREFIX + flag_help(name)
        ranges = [spec.range for spec in specs if spec.range is not None]
        if ranges:
            hull = ranges[0]
            for bounds in ranges[1:]:
                hull = hull.hull(bounds)
            flags.DEFINE(NumberParser(kind, hull), name, None, text, flag_values=flag_values,
                         serializer=flags.ArgumentSerializer())
        else:
            definer = {bool: flags.DEFINE_boolean, str: flags.DEFINE_string}[kind]
            definer(name, None, text, flag_values=flag_values)
    return names


def set_by_flags(cls, flag_values=flags.FLAGS):
    """{name: value} of the hyper-parameters the user set, all of model class `cls`; a renamed
    one (an older flagfile's, formats.py) is kept, for `model_dir.renamed`, with a warning."""
    given = {}
    for name in catalog.hparam_names():
        value = flag_values[name].value
        if value is None:
            continue
        if name not in cls.HPARAMS:
            new = formats.RENAMED_HPARAMS.get(name)
            if new not in cls.HPARAMS:
                raise ConfigError(f"--{name} is not a hyper-parameter of model {cls.registry_name!r}")
            logging.warning("--%s is --%s for model %r: read as --%s=%s", name, new,
                            cls.registry_name, new, value)
        given[name] = value
    return given


def from_flags(cls, flag_values=flags.FLAGS):
    """The hyper-parameters of model class `cls`: its defaults overridden by the flags the user
    set."""
    return cls.with_defaults(model_dir.renamed(cls, set_by_flags(cls, flag_values)))
