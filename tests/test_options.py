"""Options are declared once (tfnmt/options.py): the flags are generated from the dataclass
fields, with the same defaults, help and ranges, and values built in code meet the same checks."""

import dataclasses

import pytest

from tfnmt import options
from tfnmt.cli import flags as flag_defs
from tfnmt.decoding.options import DecodingOptions
from tfnmt.errors import ConfigError
from tfnmt.training.options import TrainOptions

# Every class cli/flags.py generates flags from; a new one is covered by being used there.
DECLARED = flag_defs.OPTION_CLASSES


@pytest.mark.parametrize("cls", DECLARED)
def test_every_field_is_a_flag_with_its_default_and_help(cls):
    for field, help_text, bounds, _ in options.declared(cls):
        flag = flag_defs.FLAGS[field.name]
        assert flag.default == field.default, field.name
        assert flag.help.endswith(help_text), field.name  # an enum's help starts with its choices
        assert getattr(flag.parser, "range", None) == bounds, field.name


def test_every_flag_is_declared_once_in_an_options_class():
    """Only the registered models' hyper-parameters are declared elsewhere (cli/hparams.py);
    no field name is declared by two classes."""
    fields = [name for cls in DECLARED for name in options.names(cls)]
    assert len(DECLARED) >= 15 and len(fields) == len(set(fields))
    defined = {name for names in flag_defs.GROUPS.values() for name in names}
    assert defined - set(fields) == set(flag_defs.HPARAM_NAMES)


def test_a_flag_refuses_a_value_outside_the_declared_range():
    values = flag_defs.flags.FlagValues()
    flag_defs.flags.DEFINE_flag(flag_defs.FLAGS["beam_size"], flag_values=values)
    with pytest.raises(flag_defs.flags.IllegalFlagValueError, match="an integer >= 1"):
        values(["prog", "--beam_size=0"])


def test_flags_read_into_the_dataclass():
    flag_defs.FLAGS.unparse_flags()
    flag_defs.FLAGS(["tfnmt", "--beam_size=7", "--learning_rate=0.5"])
    try:
        assert flag_defs.read(DecodingOptions) == DecodingOptions(beam_size=7)
        assert flag_defs.read(TrainOptions).learning_rate == 0.5
    finally:
        flag_defs.FLAGS.unparse_flags()


@pytest.mark.parametrize("change,message", [
    (dict(beam_size=0), "--beam_size=0: must be an integer >= 1"),
    (dict(length_penalty_mode="cubic"), "--length_penalty_mode='cubic': choose one of gnmt, length"),
])
def test_values_built_in_code_meet_the_declarations(change, message):
    with pytest.raises(ConfigError, match=message):
        options.check(DecodingOptions(**change))
    assert options.check(DecodingOptions()) == DecodingOptions()


def test_a_field_without_help_is_refused():
    @dataclasses.dataclass
    class Loose:
        size: int = 3
    with pytest.raises(TypeError, match="Loose.size is not declared with option"):
        options.declared(Loose)
