"""The allowed values of a number, declared once beside a flag or a model hyper-parameter.

    Range.parse(">= 1")      1, 2, ...
    Range.parse("> 0")       any positive number
    Range.parse("[0, 1)")    0 <= x < 1
    Range.parse("[0, 65535]")

The same object checks values (flag parsing, model configs) and describes them (errors, help).
"""

import math
import re

_BOUND = r"\s*(-?inf|-?[0-9.eE+-]+)\s*"
_INTERVAL = re.compile(r"^\s*([\[(])" + _BOUND + "," + _BOUND + r"([\])])\s*$")
_HALF = re.compile(r"^\s*(>=|>|<=|<)" + _BOUND + "$")


class Range:
    def __init__(self, low=-math.inf, high=math.inf, low_open=False, high_open=False):
        if low > high:
            raise ValueError(f"empty range: low {low} > high {high}")
        self.low, self.high = low, high
        self.low_open, self.high_open = low_open, high_open

    @classmethod
    def parse(cls, text):
        half = _HALF.match(text)
        if half:
            op, bound = half.group(1), _number(half.group(2))
            if op.startswith(">"):
                return cls(low=bound, low_open=op == ">")
            return cls(high=bound, high_open=op == "<")
        interval = _INTERVAL.match(text)
        if not interval:
            raise ValueError(f"not a range: {text!r} (e.g. '>= 1', '> 0', '[0, 1)')")
        return cls(_number(interval.group(2)), _number(interval.group(3)),
                   interval.group(1) == "(", interval.group(4) == ")")

    def __contains__(self, value):
        if value is None:
            return True  # "unset": the model's or the flag's own default applies
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def __eq__(self, other):
        return isinstance(other, Range) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def _key(self):
        return self.low, self.high, self.low_open, self.high_open

    def hull(self, other):
        """The smallest range holding both (one flag for a name that models bound differently)."""
        low, low_open = min((self.low, self.low_open), (other.low, other.low_open))
        high, high_open = max((self.high, not self.high_open), (other.high, not other.high_open))
        return Range(low, high, low_open, not high_open)

    def __str__(self):
        if self.high == math.inf:
            return f"{'>' if self.low_open else '>='} {_text(self.low)}"
        if self.low == -math.inf:
            return f"{'<' if self.high_open else '<='} {_text(self.high)}"
        return (f"in {'(' if self.low_open else '['}{_text(self.low)}, {_text(self.high)}"
                f"{')' if self.high_open else ']'}")

    def describe(self, kind):
        """'an integer >= 1', 'a number in [0, 1)'."""
        return f"{'an integer' if kind is int else 'a number'} {self}"


def _number(text):
    value = float(text)
    return int(value) if value.is_integer() else value


def _text(value):
    return str(int(value)) if float(value).is_integer() else repr(value)
