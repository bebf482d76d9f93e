"""tfnmt score: how likely given translations are under a model, read with teacher forcing by
`tfnmt.Translator.score`; fairseq's --score-reference, marian-scorer. The model is a checkpoint
(--model_dir, several: an ensemble), a SavedModel exported with --score (--saved_model) or a
served one (--server, --served_model), as `tfnmt translate` takes them.

--input=SOURCES --references=TARGETS writes one line per pair, `LOG_PROB<TAB>NORMALIZED`:
the sum of the target's token log-probabilities (eos included) and that over the length
penalty (of --length_penalty/--length_penalty_mode with a checkpoint, the exported one
otherwise), the score the beam search would give it.

--input=SOURCES --rerank=NBEST reads an n-best list of SOURCES as `tfnmt translate --n_best=N`
writes it (`INDEX ||| TRANSLATION ||| SCORE`, INDEX the 0-based line of --input) and writes the
same lines, each INDEX's hypotheses sorted by this model's normalized score, best first, which
replaces SCORE. The list usually comes from another model (left-to-right hypotheses reranked
by a right-to-left or a bigger model).

An export or a served model without the `score` signature is refused before any file is read
(as far as its record or metadata tells); files are read, and their line counts and n-best
lines checked, before the model is loaded. A source over --max_input_length subwords is scored
cut to it, with a warning naming its line (a checkpoint's tokenizer tells; the reference is
never cut).
"""

import sys

from absl import logging

from tfnmt.cli import common
from tfnmt.cli.flags import read
from tfnmt.cli.options import ScoreOptions, TranslationOptions
from tfnmt.cli.verbs import SCORING_DECODING
from tfnmt.data.text_files import decode_lines, read_lines
from tfnmt.decoding.results import Translation
from tfnmt.decoding.batches import n_best_lines
from tfnmt.errors import ConfigError, DataError, cannot_write
from tfnmt.serving import backends

N_BEST_FORM = "INDEX ||| TRANSLATION ||| SCORE"


def run():
    t, s = read(TranslationOptions), read(ScoreOptions)
    if bool(s.references) == bool(s.rerank):
        raise ConfigError("give one of --references=FILE (a translation of each --input line) "
                          "and --rerank=FILE (an n-best list of --input)")
    model = common.translator_source(SCORING_DECODING)
    if model.decoding is not None:
        common.require(model_dir=model.where.model_dir)
    if t.output != "-":
        common.check_output_file(t.output)
    backends.check_scorable(model.export, model.client)
    sources = _lines(t.input, "input")
    if s.references:
        targets = _lines(s.references, "references")
        if len(targets) != len(sources):
            raise DataError(f"--input has {len(sources)} lines but --references has "
                            f"{len(targets)}: give one reference per source line")
        pairs, where = list(zip(sources, targets)), _name(t.input)
    else:
        hypotheses = read_n_best(s.rerank, len(sources))
        # The pairs follow the list's lines, not --input's: a cut source is named by the first
        # list line it is the source of.
        pairs = [(sources[index], text) for index, text in hypotheses]
        where = f"the source of {_name(s.rerank)}"
    _, translator = common.open_translator(model)
    scores = translator.score([source for source, _ in pairs], [target for _, target in pairs],
                              batch_size=t.decode_batch_size, where=where)
    if s.references:
        lines = [f"{score.log_prob:.4f}\t{score.normalized:.4f}" for score in scores]
    else:
        lines = reranked(hypotheses, [score.normalized for score in scores])
    _write(t.output, lines)


def _name(path):
    return "<stdin>" if path == "-" else path


def _lines(path, flag):
    """The lines of --FLAG=PATH ('-': stdin); invalid UTF-8 is replaced, with a warning, as
    `translate` does, so that lines keep their numbers."""
    if path == "-":
        lines, problems = decode_lines(sys.stdin.buffer.read(), "<stdin>", replace_invalid=True)
    else:
        lines, problems = read_lines(path, role=flag, replace_invalid=True)
    for problem in problems:
        logging.warning("%s; scoring it with U+FFFD in place of the bad bytes", problem)
    return lines


def read_n_best(path, sources):
    """[(index, translation)] of the n-best file `path`, in its order, checked against the
    number of source lines: a line that is not `INDEX ||| TRANSLATION ||| SCORE`, or whose
    INDEX is not a source line, is a DataError naming PATH:LINE."""
    hypotheses = []
    for number, line in enumerate(_lines(path, "rerank"), start=1):
        # Exactly three fields: Moses' four-field form (with feature values) would otherwise
        # pass its features off as part of the translation.
        fields = line.split("|||")
        try:
            if len(fields) != 3:
                raise ValueError
            index, text = int(fields[0]), fields[1].strip()
            float(fields[2])
        except ValueError:
            raise DataError(f"{path}:{number}: not an n-best line `{N_BEST_FORM}` "
                            f"(as `tfnmt translate --n_best=N` writes): {line[:80]!r}") from None
        if not 0 <= index < sources:
            raise DataError(f"{path}:{number}: INDEX {index} is not a line of --input, which "
                            f"has {sources} (INDEX counts from 0)")
        hypotheses.append((index, text))
    return hypotheses


def reranked(hypotheses, scores):
    """The n-best lines of `hypotheses` [(index, text)] with their new `scores`: by INDEX, each
    INDEX's hypotheses best first (in the list's order on a tie)."""
    by_index = {}
    for (index, text), score in zip(hypotheses, scores):
        by_index.setdefault(index, []).append(Translation(text, score))
    return [n_best_lines(index, sorted(found, key=lambda t: -t.score))
            for index, found in sorted(by_index.items())]


def _write(path, lines):
    text = "".join(line + "\n" for line in lines)
    if path == "-":
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise cannot_write(path, e, "free some space or choose another --output") from None
