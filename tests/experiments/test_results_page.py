"""docs/results/README.md quotes only what a record holds (issue 52). Every decimal figure of the
page (a number with a decimal point: 38.45, +1.30, 0.056; integers such as step counts are not
checked) must be held by a record, be derived from figures beside it, or be on QUOTED.

- Records are what docs/results/.gitignore keeps: every report.json and report.md, summary.md,
  each run's run.json, scores.json and config.json (and averaged-*/scores.json),
  each single run's DIR/RUN/*.log and *.json (transformer-tiny/, ctc_nat-averaging/), and the
  scalars of the TensorBoard events (*/*/*/logs/events.out.tfevents.*, DIR/RUN/logs/; a TF2
  scalar is a tensor),
  their validation scores only (EVENT_TAGS).
- A text record holds a figure when one of its numbers, signs aside, equals the figure as
  written or rounded to the figure's decimals (0.0557 lets the page say 0.056; a tie rounds
  either way); an events scalar holds it when it equals the figure so rounded. A figure written
  with " M" (4.36 M parameters) is compared with the records' numbers in millions.
- A derived figure (a difference, a sum, a ratio such as 0.75x) counts only when two other
  figures of its paragraph, each held by a record or on QUOTED, give it at its written precision
  by |a - b|, a + b or a / b, computed from the operands as written. A paragraph is the text
  between blank lines, each top-level list item ("- " at a line's start) on its own; a table row
  is a paragraph with its table's header row. There is no slope rule: the page writes a slope
  only as summary.md gives it.
- Fenced code blocks are skipped (commands, not figures). A token of several dots (a version,
  0.12.3.1) is never held by a record.
- QUOTED names each software version and each published paper's figure the page quotes, with the
  words it stands in and why it is there; nothing this project measured goes on it.
"""

import bisect
import glob
import os
import re
from decimal import Decimal, InvalidOperation

import pytest

from conftest import REPO

RESULTS = os.path.join(REPO, "docs", "results")
PAGE = os.path.join(RESULTS, "README.md")

TEXT_RECORDS = ("summary.md", "*/report.json", "*/report.md", "*/*/*/run.json",
                "*/*/*/scores.json", "*/*/*/config.json", "*/*/*/averaged-*/scores.json",
                "*/*/*.log", "*/*/*.json")
EVENT_RECORDS = ("*/*/*/logs/events.out.tfevents.*", "*/*/logs/events.out.tfevents.*")
# The events' scores; their training-time scalars (seconds, learning rates, losses every few
# steps) would hold nearly any figure by chance.
EVENT_TAGS = ("validation/",)

# (figure as written, the words of its paragraph it stands in, what it is and why it is here).
# Software versions and the papers' own published figures only.
QUOTED = (
    ("41.02", "Wu et al.",
     "Wu et al. 2021's Transformer-tiny, its published test2016 BLEU: the target the page "
     "compares this project's Transformers with"),
    ("2.57", "the paper has DeepLAU 2.57 ahead",
     "paper 001 (DeepLAU), its Table 4: DeepLAU 4+4's published lead over the residual "
     "DeepGRU 4+4"),
    ("2.97", "paper (+2.97 at 2+2",
     "paper 001 (DeepLAU): its published lead of DeepLAU over DeepGRU at 2+2"),
    ("4.91", "+4.91 at 4+4)",
     "paper 001 (DeepLAU): its published lead of DeepLAU over DeepGRU at 4+4"),
    ("1.25", "on 1.25 M pairs",
     "paper 001 (DeepLAU): the size of its Chinese-English training corpus"),
    ("0.99", "by up to +0.99",
     "paper 002 (deep representations): its largest published gain from aggregation"),
    ("8.57", "GRU 8.57 BLEU",
     "paper 004's report (CNN encoders): its GRU encoder-decoder's published BLEU"),
    ("0.04", "its bigram n-gram model 0.04",
     "paper 004's report (CNN encoders): its n-gram encoder's published BLEU"),
)

# An optional sign, digits (thousands by commas), a point and digits; a token of more dots (a
# version) is matched whole; " M" after it writes millions.
FIGURE = re.compile(r"(?<![\w.])([+\-\u2212]?)(\d{1,3}(?:,\d{3})+|\d+)((?:\.\d+)+)(\s?M\b)?")
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
FENCE = re.compile(r"^\s*```")
TABLE_RULE = re.compile(r"^\|[\s\-:|]+\|$")
MILLION = Decimal(1000000)


class Figure:
    """One decimal figure of the page: as written, its line, its value (sign aside), and half a
    unit of its last digit (what lies within it of the value rounds to the figure)."""

    def __init__(self, match, line):
        self.text = match.group(0).strip()
        self.line = line
        self.digits = match.group(2).replace(",", "") + match.group(3)
        self.version = match.group(3).count(".") > 1
        self.millions = bool(match.group(4))
        self.value = None if self.version else Decimal(self.digits)
        self.half = Decimal(5).scaleb(-len(match.group(3)))


def paragraphs(page_text):
    """Lists of (line number, text): the page's paragraphs, code blocks left out."""
    found, current, header, fenced = [], [], None, False

    def close():
        if current:
            found.append(list(current))
            current.clear()

    for number, line in enumerate(page_text.splitlines(), start=1):
        if FENCE.match(line):
            close()
            fenced = not fenced
        elif fenced:
            continue
        elif line.startswith("|"):
            close()
            if header is None:
                header = (number, line)
                found.append([header])
            elif not TABLE_RULE.match(line):
                found.append([header, (number, line)])
        else:
            header = None
            if not line.strip() or line.startswith("- "):
                close()
            if line.strip():
                current.append((number, line))
    close()
    return found


def page_figures(paragraph):
    """The paragraph's figures; a table row's header is read as a paragraph of its own."""
    table_row = len(paragraph) == 2 and paragraph[0][1].startswith("|")
    lines = paragraph[1:] if table_row else paragraph
    return [Figure(m, number) for number, line in lines for m in FIGURE.finditer(line)]


def _numbers(text):
    for token in NUMBER.findall(text):
        try:
            yield Decimal(token)
        except InvalidOperation:
            continue


def _event_scalars(paths):
    """The validation scalars of the runs whose event files are `paths`, read as the reports
    read them (experiments/report.py)."""
    from tfnmt.experiments import report
    for run in sorted({os.path.dirname(os.path.dirname(path)) for path in paths}):
        for tag, values in report.read_scalars(run).items():
            if tag.startswith(EVENT_TAGS):
                yield from (abs(Decimal(repr(value))) for value in values.values())


class Records:
    """The numbers of a results directory's records, and whether they hold a figure."""

    def __init__(self, records_dir):
        self.written = set()
        for pattern in TEXT_RECORDS:
            for path in sorted(glob.glob(os.path.join(records_dir, pattern))):
                with open(path, encoding="utf-8", errors="replace") as f:
                    self.written.update(_numbers(f.read()))
        events = [path for pattern in EVENT_RECORDS
                  for path in sorted(glob.glob(os.path.join(records_dir, pattern)))]
        self.numbers = sorted(self.written.union(_event_scalars(events)))

    def hold(self, figure):
        if figure.version:
            return False
        if not figure.millions and figure.value in self.written:
            return True
        scale = MILLION if figure.millions else 1
        low, high = (figure.value - figure.half) * scale, (figure.value + figure.half) * scale
        i = bisect.bisect_left(self.numbers, low)
        return i < len(self.numbers) and self.numbers[i] <= high


def _quoted(figure, paragraph_text):
    return any(figure.digits == digits and words in paragraph_text
               for digits, words, _ in QUOTED)


def _derived(figure, operands):
    """Whether two operands, other figures of the paragraph, give the figure at its precision."""
    values = [o.value for o in operands
              if o is not figure and not o.version and o.millions == figure.millions]
    for i, a in enumerate(values):
        for j, b in enumerate(values):
            if i != j and any(abs(result - figure.value) <= figure.half
                              for result in (abs(a - b), a + b, a / b if b else None)
                              if result is not None):
                return True
    return False


def unheld_figures(page_text, records_dir):
    """(line number, figure as written) of the page's figures that no record holds, no two
    figures beside them give and QUOTED does not name."""
    records = Records(records_dir)
    failing = []
    for paragraph in paragraphs(page_text):
        text = " ".join(line.strip() for _, line in paragraph)
        figures = page_figures(paragraph)
        known = [f for f in figures if _quoted(f, text) or records.hold(f)]
        failing += [(f.line, f.text) for f in figures
                    if f not in known and (f.version or not _derived(f, known))]
    return sorted(set(failing))


def test_quoted_figures_are_few_and_each_says_why():
    assert len(QUOTED) <= 12 and len({digits for digits, _, _ in QUOTED}) == len(QUOTED)
    assert all(words and len(why) > 30 for _, words, why in QUOTED)


@pytest.mark.slow
def test_every_figure_of_the_results_page_is_held_by_a_record():
    with open(PAGE, encoding="utf-8") as f:
        failing = unheld_figures(f.read(), RESULTS)
    assert not failing, "figures of docs/results/README.md that no record holds:\n" + "\n".join(
        f"  line {line}: {text}" for line, text in failing)


def _records(tmp_path):
    run = tmp_path / "exp" / "A" / "seed1"
    run.mkdir(parents=True)
    (tmp_path / "exp" / "report.json").write_text(
        '{"A": {"bleu_mean": 38.4501, "p": 9.999000099990002e-05}, "B": {"bleu_mean": 37.15}}')
    (run / "scores.json").write_text('{"bleu": 36.55, "parameters": 4360512}')
    (tmp_path / "exp" / "notes.json").write_text('{"bleu": 12.34}')  # not a record


def test_the_check_names_a_drifted_figure_and_a_derived_one_without_operands(tmp_path):
    _records(tmp_path)
    page = "\n".join([
        "# Results",                                                                    # 1
        "",
        "A scores 38.45 (p 0.0001) on 4.36 M parameters, B 37.2: +1.30 over B's 37.15.",  # 3
        "",
        "A gained +1.90 in its last 500 steps; it scored 12.34 elsewhere.",               # 5
        "",
        "```",
        "tfnmt evaluate --length_penalty=0.6",                                            # 8
        "```",
        "",
        "| system | BLEU |",
        "|---|---|",
        "| A | 36.55 |",                                                                   # 13
        "| B | 36.56 |",                                                                   # 14
        "",
        "- A is 1.9 ahead of its seed (38.45 against 36.55).",                            # 16
        "- A is 1.9 ahead again, with no operands in this item;",                         # 17
        "  - a nested item is part of it: 38.45 and 37.15, 1.30 apart.",                 # 18
        "",
        "Wu et al. publish 41.02, 2.57 above A's 38.45 (0.5 below their 41.02); on 2.6.0.",  # 20
    ])
    assert unheld_figures(page, str(tmp_path)) == [
        (5, "+1.90"), (5, "12.34"), (14, "36.56"), (17, "1.9"), (20, "0.5"), (20, "2.6.0")]


@pytest.mark.slow
def test_an_events_scalar_holds_the_figure_it_rounds_to(tmp_path):
    import tensorflow as tf
    logs = tmp_path / "exp" / "A" / "seed1" / "logs"
    writer = tf.summary.create_file_writer(str(logs))
    with writer.as_default():
        tf.summary.scalar("validation/bleu", 29.558631, step=1500)
    writer.close()
    page = "Validation BLEU 29.56 at step 1,500, 29.6 rounded; not 29.55 nor 29.57."
    assert unheld_figures(page, str(tmp_path)) == [(1, "29.55"), (1, "29.57")]
