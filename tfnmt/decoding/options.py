"""How a translation is decoded: every setting and its default, declared once. The CLI's
decoding flags are generated from these fields (cli/flags.py), the Translator takes one
`DecodingOptions`, and an export records it (export_info.json "decoding")."""

import dataclasses

from tfnmt.options import option

LONG_INPUT_MODES = ("chunk", "error")


@dataclasses.dataclass(frozen=True)
class DecodingOptions:
    beam_size: int = option(4, "Beam size (1 = greedy).", bounds=">= 1")
    length_penalty: float = option(0.6, "Length penalty exponent alpha (0 = none).",
                                   bounds=">= 0")
    length_penalty_mode: str = option(
        "gnmt", "gnmt: ((5+|y|)/6)^alpha; length: |y|^alpha (alpha 1 = average log-prob).",
        choices=("gnmt", "length"))
    max_length_ratio: float = option(1.5, "Decode at most ratio x source length + offset "
                                     "tokens.", bounds=">= 0")
    max_length_offset: int = option(10, "See --max_length_ratio.", bounds=">= 0")
    max_decode_length: int = option(256, "Hard cap on generated tokens.", bounds=">= 1")
    max_input_length: int = option(1024, "Source subwords beyond this are cut, with a warning.",
                                   bounds=">= 1")
    long_input: str = option(
        "chunk", "A source longer than the model's source window (conv_encoder's k̄): translate "
        "it in chunks and join them, or stop with an error. Other models read any length.",
        choices=LONG_INPUT_MODES)
