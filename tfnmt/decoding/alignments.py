"""Alignments from attention: words, Pharaoh pairs, JSON lines and heatmaps.

The model attends from target pieces to source pieces (SentencePiece) and the source's eos.
Words are pieces merged: a piece that starts with "▁" starts a word, any other continues the
word before it. A source word's weight is the sum of its pieces' columns (the attention it
received); a target word's row is the mean of its pieces' rows (so rows still sum to at most
1); the attention paid to the source's eos is left out. The hard alignment links each target
word to the source word it attends to most: `SRC-TGT`, 0-based word indices, in target order.
"""

import dataclasses
import json
import os

import numpy as np

WORD_START = "\u2581"
EOS = "</s>"


@dataclasses.dataclass
class Aligned:
    """One sentence's translation, its pieces and attention [T, S] (pieces x pieces, eos
    column included)."""
    translation: str
    source_tokens: list
    target_tokens: list
    attention: np.ndarray

    def __eq__(self, other):
        # The generated __eq__ would compare the arrays to an array, whose truth is ambiguous.
        if not isinstance(other, Aligned):
            return NotImplemented
        return (self.translation, self.source_tokens, self.target_tokens) == \
            (other.translation, other.source_tokens, other.target_tokens) and \
            np.array_equal(self.attention, other.attention)

    __hash__ = None

    def words(self):
        """(source words, target words, attention [target words, source words])."""
        source, source_groups = merge([t for t in self.source_tokens if t != EOS])
        target, target_groups = merge(self.target_tokens)
        pieces = self.attention[:, :len(self.source_tokens)]
        columns = np.stack([pieces[:, g].sum(axis=1) for g in source_groups], axis=1) \
            if source_groups else np.zeros((len(self.target_tokens), 0), np.float32)
        matrix = np.stack([columns[g].mean(axis=0) for g in target_groups]) \
            if target_groups else np.zeros((0, len(source)), np.float32)
        return source, target, matrix

    def hard(self):
        """Pharaoh format: `SRC-TGT` for each target word, its most attended source word."""
        source, _, matrix = self.words()
        if not source:
            return ""
        return " ".join(f"{int(i)}-{j}" for j, i in enumerate(matrix.argmax(axis=1)))

    def soft(self):
        """One JSON object: translation, source and target words, attention [target][source]."""
        source, target, matrix = self.words()
        return json.dumps({"translation": self.translation, "source": source, "target": target,
                           "attention": [[round(float(v), 4) for v in row] for row in matrix]},
                          ensure_ascii=False)


def merge(pieces):
    """(words, [the piece indices of each word]) of SentencePiece `pieces`."""
    words, groups = [], []
    for i, piece in enumerate(pieces):
        if not groups or piece.startswith(WORD_START):
            words.append(piece.lstrip(WORD_START))
            groups.append([i])
        else:
            words[-1] += piece
            groups[-1].append(i)
    return words, groups


def aligned(out):
    """The `alignments` signature's outputs (numpy or tensors) -> [Aligned] per sentence."""
    def text(values):
        return [v.decode("utf-8") for v in values if v]

    arrays = {key: np.asarray(value) for key, value in out.items()}
    result = []
    for i, translation in enumerate(arrays["translations"]):
        source, target = text(arrays["source_tokens"][i]), text(arrays["target_tokens"][i])
        result.append(Aligned(translation.decode("utf-8"), source, target,
                              arrays["attention"][i][:len(target), :len(source)]))
    return result


def line(item, mode):
    """The output line of a translation with its alignment (`mode` hard or soft)."""
    if mode == "hard":
        return f"{item.translation}\t{item.hard()}"
    return item.soft()


def plot(item, path):
    """A heatmap PNG of the word attention: source words across, target words down."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    source, target, matrix = item.words()
    figure, axes = plt.subplots(figsize=(max(3, 0.5 * len(source) + 1.5),
                                         max(2, 0.4 * len(target) + 1.5)))
    try:
        axes.imshow(matrix if matrix.size else np.zeros((1, 1)), cmap="Greys", vmin=0, vmax=1,
                    aspect="auto")
        axes.set_xticks(range(len(source)), source, rotation=60, ha="right")
        axes.set_yticks(range(len(target)), target)
        figure.tight_layout()
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        figure.savefig(path, format="png")
    finally:
        plt.close(figure)
