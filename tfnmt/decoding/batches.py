"""Many sentences through a backend (decoding/backend.py: a Translator, an export, a TFLite
flatbuffer) in batches of similar lengths, each result back at its sentence's index: what
`translate`, `evaluate`, validation, experiments and the Python API share.
"""

import re

import tensorflow as tf
from absl import logging

from tfnmt.decoding import chunking
from tfnmt.decoding.alignments import aligned
from tfnmt.decoding.results import Translation
from tfnmt.errors import DataError

# `translate` sorts by length within windows of this many batches rather than over the whole
# file, so that its output can be written in input order while it runs: an interrupted run keeps
# all but the last window's lines. Within a window, batches are still of similar lengths.
STREAM_WINDOW_BATCHES = 8


def translations(translator, sentences, batch_size, progress=None, window=0, n_best=0,
                 alignments=False, prefixes=None):
    """Yields (index, result) of `sentences` (list of str), a batch at a time, where a result is
    a `Translation` (decoding/results.py) or, with `n_best` N > 0, the list of a sentence's N
    best, best first; with `alignments`, each carries its `alignments.Aligned`.

    Batches are formed from sentences of similar length, so padding and the longest hypothesis
    of a batch cost less: sorted over the whole list, or over each `window` sentences in turn
    (0 = the whole list). With `prefixes` (a str per sentence, "" for none), each translation
    starts with its sentence's (Translator.prefix_signature); not with `n_best` or
    `alignments`. `translator` is a backend (decoding/backend.py). `progress` (a tqdm
    bar, progress lines, or anything with `update(n)`) is told of every batch. Once all are
    done, the count of empty translations of non-empty sources is logged, if any.
    """
    for batch in translated_batches(translator, sentences, batch_size, progress, window, n_best,
                                    alignments, prefixes):
        yield from batch


def translated_batches(translator, sentences, batch_size, progress=None, window=0, n_best=0,
                       alignments=False, prefixes=None):
    """`translations`, a list of (index, result) per batch."""
    window = window or max(len(sentences), 1)
    empty = 0
    for first in range(0, len(sentences), window):
        span = range(first, min(first + window, len(sentences)))
        order = sorted(span, key=lambda i: len(sentences[i]))
        for start in range(0, len(order), batch_size):
            index = order[start:start + batch_size]
            batch = [sentences[i] for i in index]
            if alignments:
                out = _aligned_batch(translator, batch)
            elif n_best:
                out = _translate_batch(translator.translate_n_best, batch, n_best)
            elif prefixes is not None:
                out = [row[0] for row in _translate_batch(
                    translator.translate_prefix, batch, tf.constant([prefixes[i] for i in index]))]
            else:
                out = [row[0] for row in _translate_batch(translator.translate, batch)]
                empty += sum(not t.text and bool(source.strip()) for t, source in zip(out, batch))
            yield list(zip(index, out))
            if progress is not None:
                progress.update(len(index))
    if empty:
        # A CTC model chooses its labels all at once: only the autoregressive ones take a
        # minimum length.
        logging.warning("%d of %d translations are empty where the source is not "
                        "(--min_decode_length holds eos back in autoregressive models)",
                        empty, len(sentences))


def n_best_lines(index, hypotheses):
    """A sentence's hypotheses (Translation, best first) in Moses' n-best format, one line
    each: `INDEX ||| TRANSLATION ||| SCORE`, INDEX the sentence's 0-based line in the input."""
    return "\n".join(f"{index} ||| {t.text} ||| {t.score:.4f}" for t in hypotheses)


def _translate_batch(translate, batch, *n_best):
    """[[Translation] per hypothesis (one without `n_best`)] per sentence."""
    out = _call(translate, batch, *n_best)
    texts = out["translations"].numpy().reshape(len(batch), -1)
    scores = out["scores"].numpy().reshape(len(batch), -1).tolist()
    return [[Translation(text.decode("utf-8"), score) for text, score in zip(*row)]
            for row in zip(texts, scores)]


def _aligned_batch(translator, batch):
    out = _call(translator.translate_alignments, batch)
    return [Translation(item.translation, score, tuple(item.target_tokens), item)
            for item, score in zip(aligned(out), out["scores"].numpy().tolist())]


def _call(translate, batch, *args):
    try:
        return translate(tf.constant(batch), *args)
    except tf.errors.InvalidArgumentError as error:
        # --long_input=error: a user error, reported in one line rather than a traceback.
        refused = re.search(r"\[([^\]]*%s[^\]]*)\]" % chunking.TOO_LONG, error.message)
        if not refused:
            raise
        raise DataError(refused.group(1)) from None


def translate_sentences(translator, sentences, batch_size, progress=None):
    """Translations of `sentences` (list of str) in their order (see `translations`)."""
    results = [""] * len(sentences)
    for i, translation in translations(translator, sentences, batch_size, progress):
        results[i] = translation.text
    return results
