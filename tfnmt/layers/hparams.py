"""Model hyper-parameters declared once, with their type, help and allowed values, in the words
of tfnmt/options.py (which declares the training, data and decoding options):

    "d_model": HParam(512, "model width", bounds=">= 1")
    "cell": HParam("lau", "recurrent cell", choices=("lau", "gru"))

The type is the default's. A number needs `bounds` (a tfnmt/ranges.py range), a string may have
`choices`. An encoder or decoder declares what it reads (its HPARAMS), a model the union of its
parts' and its own; a name several parts or models read is declared once and shared, a model
that wants another default or help says so with `.but(default=...)`. Every name becomes a flag
(cli/hparams.py), and `check` holds a value to its declaration: no model writes range or
choice checks of its own.
"""

import dataclasses

from tfnmt.errors import ConfigError
from tfnmt.ranges import Range


@dataclasses.dataclass(frozen=True)
class HParam:
    default: object
    help: str
    bounds: str = None
    choices: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "choices", tuple(self.choices))
        if self.kind in (int, float) and self.bounds is None:
            raise TypeError(f"numeric hyper-parameter {self.help!r} declares no bounds")
        if self.bounds is not None:
            Range.parse(self.bounds)  # a malformed range fails when the part is defined
        if self.choices and self.default not in self.choices:
            raise TypeError(f"default {self.default!r} is not one of {self.choices}")

    @property
    def kind(self):
        return type(self.default)

    @property
    def range(self):
        return Range.parse(self.bounds) if self.bounds is not None else None

    def but(self, **changes):
        """This declaration with another default, help, range or choices (one model's)."""
        return dataclasses.replace(self, **changes)

    def describe(self):
        """The help with the allowed values, as --help shows it."""
        return f"{self.help} ({' | '.join(self.choices)})" if self.choices else self.help

    def check(self, name, value, model):
        """Raises ConfigError, one line naming the flag, for a value the declaration refuses
        (`model`: how the message names the model)."""
        bounds = self.range
        if bounds is not None and value not in bounds:
            raise ConfigError(f"--{name}={value}: model {model} needs {bounds.describe(self.kind)}")
        if self.choices and value not in self.choices:
            raise ConfigError(f"--{name}={value!r}: choose one of {', '.join(self.choices)}")


# The depth of every stack: each family's encoder and decoder take these with its own default.
ENCODER_LAYERS = HParam(6, "number of encoder layers", bounds=">= 1")
DECODER_LAYERS = HParam(6, "number of decoder layers", bounds=">= 1")

# Names several families read, each where and as much as its paper does: a part takes the shared
# declaration (its kind and range) with its own default and help, `.but(default=..., help=...)`,
# and the flag's help says what each model means by it (cli/hparams.py). A new meaning takes a
# new name: the convolutional families' residual-layer width is `residual_dim` (conv_blocks.py),
# not the recurrent state width `hidden_dim`, since a hybrid may read both.
DROPOUT = HParam(0.1, "dropout rate", bounds="[0, 1)")
EMBED_DIM = HParam(512, "word embedding width", bounds=">= 1")
HIDDEN_DIM = HParam(512, "recurrent state width", bounds=">= 1")
ATTENTION_DIM = HParam(512, "attention width", bounds=">= 1")
