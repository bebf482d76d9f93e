"""Options declared once: a dataclass field carries its default, help and allowed values, and the
command line's flags are generated from the fields (cli/flags.py), so that a default is written
in one place and a numeric range is checked where the flag is parsed.

    @dataclasses.dataclass(frozen=True)
    class DecodingOptions:
        beam_size: int = option(4, "Beam size (1 = greedy).", bounds=">= 1")

`bounds` is a tfnmt/ranges.py range for an int or float field; `choices` the allowed strings of a
str field. `check(instance)` holds values built in code (not parsed from flags) to the same
declarations, so a library caller gets the error a flag would give.
"""

import dataclasses
import os

from tfnmt.errors import ConfigError
from tfnmt.ranges import Range


def option(default, help, *, bounds=None, choices=None):
    """A dataclass field with its help and, for a number, its range (`bounds`) or, for a string,
    its `choices`."""
    if bounds is not None:
        Range.parse(bounds)  # a malformed range fails when the class is defined
    return dataclasses.field(default=default, metadata={"help": help, "bounds": bounds,
                                                        "choices": tuple(choices or ())})


def declared(cls):
    """[(field, help, Range or None, choices)] of an options dataclass, in declaration order."""
    out = []
    for field in dataclasses.fields(cls):
        meta = field.metadata
        if "help" not in meta:
            raise TypeError(f"{cls.__name__}.{field.name} is not declared with option()")
        bounds = Range.parse(meta["bounds"]) if meta["bounds"] else None
        out.append((field, meta["help"], bounds, meta["choices"]))
    return out


def kind(field):
    """The Python type of a field (its annotation may be a string under postponed evaluation)."""
    names = {"int": int, "float": float, "str": str, "bool": bool}
    return names.get(field.type, field.type) if isinstance(field.type, str) else field.type


def check_value(field, bounds, choices, value):
    """Raises ConfigError, as `--name=value`, for a value outside the field's declaration."""
    if bounds is not None and value not in bounds:
        raise ConfigError(f"--{field.name}={value}: must be {bounds.describe(kind(field))}")
    if choices and value not in choices:
        raise ConfigError(f"--{field.name}={value!r}: choose one of {', '.join(choices)}")


def check(instance):
    """Raises ConfigError naming the first value outside its declaration, as `--name=value`."""
    for field, _, bounds, choices in declared(type(instance)):
        check_value(field, bounds, choices, getattr(instance, field.name))
    return instance


def names(cls):
    return [field.name for field in dataclasses.fields(cls)]


def from_values(cls, values):
    """An instance of `cls` from a mapping holding at least its field names (e.g. absl FLAGS
    via `{name: FLAGS[name].value}`), checked."""
    return check(cls(**{field.name: values[field.name] for field in dataclasses.fields(cls)}))


def find_relative(path, start_dirs):
    """Where a path a file names is: as given when absolute or found from the current directory,
    else from the first of `start_dirs` (that file's directory), or a directory above it, that
    holds it; None where none does. The repository's flagfiles name each other from its root
    (`configs/...`), so they are found wherever the command runs from."""
    if os.path.isabs(path) or os.path.exists(path):
        return path
    for start in start_dirs:
        directory = os.path.abspath(start)
        while True:
            candidate = os.path.join(directory, path)
            if os.path.exists(candidate):
                return candidate
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
    return None


def not_found_from(path, start_dirs):
    """Where `find_relative(path, start_dirs)` looked, for the error that it found nothing."""
    return (f"not in the current directory ({os.getcwd()}) nor in "
            + " or ".join(os.path.abspath(d) for d in start_dirs) + " or any directory above it")
