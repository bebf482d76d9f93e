"""What a translation or a score is, as the Python API (tfnmt.Translator) returns it and the
`translate` command writes it. No TensorFlow here: `from tfnmt import Translation` stays cheap."""

import dataclasses
from typing import Optional, Tuple

from tfnmt.decoding.alignments import Aligned


@dataclasses.dataclass(frozen=True)
class Translation:
    """One hypothesis.

    text: the translation (detokenized); "" for an empty source.
    score: its length-penalised log-probability, as the search ranked it: the sum of its
      tokens' log-probabilities, eos included, over the length penalty of the decoding
      options (GNMT's ((5 + |y|) / 6) ** alpha by default, |y| counting eos); with
      length_penalty=0 it is that sum itself. 0 for an empty source.
    tokens: its target pieces (SentencePiece), without eos, or None where the backend does not
      tell: with alignments, the pieces the model generated; otherwise, from a model directory,
      the pieces the target vocabulary splits `text` into (those `Translator.score` reads).
    alignment: with alignments=True, an `Aligned` (decoding/alignments.py): the source and
      target pieces, the attention [target pieces, source pieces] with the source's eos column,
      and its word-level forms (`words()`, `hard()` Pharaoh pairs, `soft()` JSON); else None.
    """
    text: str
    score: float
    tokens: Optional[Tuple[str, ...]] = None
    alignment: Optional[Aligned] = None


@dataclasses.dataclass(frozen=True)
class Score:
    """How likely a given target is under the model, read with teacher forcing.

    log_prob: the sum of the log-probabilities of the target's tokens and of eos after them.
    normalized: log_prob over the length penalty of the translator's decoding options
      (length_penalty, length_penalty_mode; |y| counting eos): the score the beam search gives
      this target when it finds it (`Translation.score`). Equal to log_prob with
      length_penalty=0; with length_penalty=1 and length_penalty_mode="length", the mean
      log-probability per token.
    tokens: the target pieces scored, without eos.
    """
    log_prob: float
    normalized: float
    tokens: Tuple[str, ...]
