"""How `evaluate` scores, beyond the BLEU tokenizer (declared with the training options, which
validate with it): declared once, the flags generated from these fields (cli/flags.py)."""

import dataclasses

from tfnmt.options import option


@dataclasses.dataclass(frozen=True)
class ScoringOptions:
    lowercase: bool = option(False, "Case-insensitive BLEU (the default is cased).")
    length_buckets: str = option(
        "", "evaluate: also BLEU by source length in words, with these bucket edges, e.g. "
        "10,20,30,40 ('' = off).")
