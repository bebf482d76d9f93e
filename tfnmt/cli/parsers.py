"""The absl parser of a number flag held to its declared Range (tfnmt/ranges.py)."""

import math

from absl import flags


class NumberParser(flags.ArgumentParser):
    """absl parser of an integer or float flag in a Range: an out-of-range value stops parsing
    with 'flag --NAME=VALUE: must be an integer >= 1' (absl adds the flag and value). nan, inf
    and -inf are refused whatever the range."""

    def __init__(self, kind, bounds):
        self.kind = kind
        self.range = bounds
        self._number = flags.IntegerParser() if kind is int else flags.FloatParser()
        self.syntactic_help = bounds.describe(kind)

    def parse(self, argument):
        value = self._number.parse(argument)
        # Before: inf passed '> 0' and `--learning_rate=inf` trained until the loss was nan.
        if self.kind is float and not math.isfinite(value):
            raise ValueError(f"must be a finite number: {self.syntactic_help}")
        if value not in self.range:
            raise ValueError(f"must be {self.syntactic_help}")
        return value

    def flag_type(self):
        return self._number.flag_type()
