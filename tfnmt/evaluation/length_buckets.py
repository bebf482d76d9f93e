"""BLEU by source-sentence length, the analysis of the DeepLAU paper (sec. "About Length").

Length is counted in whitespace-separated source words, as papers do, not in subwords (which
depend on the vocabulary). Two views of the same test set:
  buckets      sentences of 1-10, 11-20, ... words, and the rest: each sentence in one row;
  longer than  sentences longer than each edge (the paper's curve over >10, >20, ... words).
"""

from tfnmt.errors import ConfigError
from tfnmt.evaluation import bleu


def parse_edges(text):
    """'10,20,30' -> [10, 20, 30]; strictly increasing positive integers."""
    try:
        edges = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"--length_buckets={text!r}: give word counts such as 10,20,30") from None
    if not edges or edges[0] < 1 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ConfigError(f"--length_buckets={text!r}: give increasing positive word counts "
                          "such as 10,20,30")
    return edges


def _row(label, index, hypotheses, references, scoring):
    row = {"bucket": label, "sentences": len(index), "bleu": None}
    if index:
        row["bleu"] = bleu.score([hypotheses[i] for i in index], [references[i] for i in index],
                                 **scoring)["bleu"]
    return row


def bucket_scores(sources, hypotheses, references, edges, **scoring):
    """Returns (buckets, longer_than): lists of {"bucket", "sentences", "bleu"} (bleu None for
    an empty row)."""
    lengths = [len(s.split()) for s in sources]
    bounds = [0] + list(edges)
    buckets = []
    for low, high in zip(bounds, bounds[1:]):
        index = [i for i, n in enumerate(lengths) if low < n <= high]
        buckets.append(_row(f"{low + 1}-{high}", index, hypotheses, references, scoring))
    index = [i for i, n in enumerate(lengths) if n > edges[-1]]
    buckets.append(_row(f">{edges[-1]}", index, hypotheses, references, scoring))
    longer = [_row(f">{edge}", [i for i, n in enumerate(lengths) if n > edge], hypotheses,
                   references, scoring) for edge in edges]
    return buckets, longer


def format_table(title, rows):
    lines = [title]
    for row in rows:
        score = "-" if row["bleu"] is None else f"{row['bleu']:.2f}"
        lines.append(f"  {row['bucket']:>8} words  {row['sentences']:>6} sentences  BLEU {score}")
    return "\n".join(lines)
