"""Text in, text out: tokenizer, encoder, beam search and detokenizer in one tf.function.

The same `Translator` serves `tfnmt translate` (from a checkpoint, in-process) and the exported
SavedModel, so the two give the same translations by construction.
"""

import re

import tensorflow as tf

from tfnmt.data.vocab import EOS_ID, PAD_ID
from tfnmt.decoding import chunking
from tfnmt.decoding.beam_search import beam_search, max_lengths
from tfnmt.errors import DataError

LONG_INPUT_MODES = ("chunk", "error")


class Translator(tf.Module):
    """Wraps a trained model and its vocabularies.

    `translate(text [B] string) -> {"translations": string [B], "scores": float32 [B]}`.
    Empty (or whitespace-only) inputs translate to the empty string with score 0.
    Inputs longer than `max_source_length` subwords are truncated to it (the model never saw
    longer sentences); the CLI warns about them before calling.
    A model with a `source_window` (models/base.py) gets longer inputs in chunks whose
    translations are joined (`long_input="chunk"`), or refuses them (`"error"`).
    """

    def __init__(self, model, source_vocab, target_vocab, *, beam_size=4, length_penalty=0.6,
                 penalty_mode="gnmt", max_length_ratio=1.5, max_length_offset=10,
                 max_decode_length=256, max_source_length=1024, long_input="chunk"):
        super().__init__(name="translator")
        self.model = model
        self.source_tokenizer = source_vocab.tokenizer()
        self.target_tokenizer = target_vocab.tokenizer()
        self.beam_size = beam_size
        self.length_penalty = length_penalty
        self.penalty_mode = penalty_mode
        self.max_length_ratio = max_length_ratio
        self.max_length_offset = max_length_offset
        self.max_decode_length = max_decode_length
        self.max_source_length = max_source_length
        if long_input not in LONG_INPUT_MODES:
            raise ValueError(f"long_input must be one of {LONG_INPUT_MODES}, not {long_input!r}")
        self.long_input = long_input

    def decoding_options(self):
        return {"beam_size": self.beam_size, "length_penalty": self.length_penalty,
                "penalty_mode": self.penalty_mode, "max_length_ratio": self.max_length_ratio,
                "max_length_offset": self.max_length_offset,
                "max_decode_length": self.max_decode_length,
                "max_source_length": self.max_source_length, "long_input": self.long_input}

    def tokenize(self, text):
        """string [B] -> (int32 [B, S] padded source ids ending in eos, int32 [B] lengths)."""
        ids = self.source_tokenizer.tokenize(text)[:, : self.max_source_length]
        eos = tf.RaggedTensor.from_tensor(tf.fill([ids.nrows(), 1], EOS_ID))
        ids = tf.concat([ids, eos], axis=1)
        return ids.to_tensor(default_value=PAD_ID), tf.cast(ids.row_lengths(), tf.int32) - 1

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def translate(self, text):
        return self._translate(text, self.beam_size)

    def export_signatures(self):
        """{signature name: (concrete function, beam size)} for a SavedModel.

        `serving_default` decodes with the translator's settings. A non-autoregressive model
        decodes greedily there (its parallel, fast path) and adds `beam`, the model's own beam
        search with `beam_size`, when that is above 1.
        """
        if self.model.autoregressive or self.beam_size == 1:
            return {"serving_default": (self.translate.get_concrete_function(), self.beam_size)}
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def greedy(text):
            return self._translate(text, 1)
        return {"serving_default": (greedy.get_concrete_function(), 1),
                "beam": (self.translate.get_concrete_function(), self.beam_size)}

    def _translate(self, text, beam_size):
        source, lengths = self.tokenize(text)
        ids, scores = self.translate_ids(source, lengths, beam_size)
        ragged = tf.RaggedTensor.from_tensor(ids, padding=PAD_ID)
        translations = self.target_tokenizer.detokenize(ragged)
        empty = tf.equal(lengths, 0)
        return {"translations": tf.where(empty, "", translations),
                "scores": tf.where(empty, 0.0, scores)}

    def translate_ids(self, source, lengths, beam_size=None):
        """Padded source ids [B, S] (eos-terminated) and their lengths without eos [B] ->
        (ids [B, T] padded with PAD_ID, scores [B]). Shared by the SavedModel and TFLite exports.
        `beam_size` defaults to the translator's."""
        beam_size = beam_size or self.beam_size
        window = self.model.source_window
        if not window:
            return self._translate_ids(source, lengths, beam_size)
        if self.long_input == "error":
            tf.debugging.assert_less_equal(
                lengths, window - 1, message=f"a source is {chunking.TOO_LONG} ({window - 1} "
                "subwords and eos) and --long_input=error; --long_input=chunk translates it in "
                "pieces")
        chunks, chunk_lengths, sentence = chunking.split(source, lengths, window)
        ids, scores = self._translate_ids(chunks, chunk_lengths, beam_size)
        return chunking.join(ids, scores, sentence, tf.shape(lengths)[0])

    def _translate_ids(self, source, lengths, beam_size):
        memory = self.model.encode(source, training=False)
        if not self.model.autoregressive:
            return self.model.predict_ids(memory, beam_size)
        limit = max_lengths(lengths, self.max_length_ratio, self.max_length_offset,
                            self.max_decode_length)
        ids, scores = beam_search(self.model, memory, limit, beam_size,
                                  self.length_penalty, self.penalty_mode)
        return ids[:, 0], scores[:, 0]


# `translate` sorts by length within windows of this many batches rather than over the whole
# file, so that its output can be written in input order while it runs: an interrupted run keeps
# all but the last window's lines. Within a window, batches are still of similar lengths.
STREAM_WINDOW_BATCHES = 8


def translations(translator, sentences, batch_size, progress=False, window=0):
    """Yields (index, translation) of `sentences` (list of str), a batch at a time.

    Batches are formed from sentences of similar length, so padding and the longest hypothesis
    of a batch cost less: sorted over the whole list, or over each `window` sentences in turn
    (0 = the whole list). `translator` is a Translator or anything with the same `translate`.
    """
    window = window or max(len(sentences), 1)
    bar = None
    if progress:
        import sys

        from tqdm import tqdm
        bar = tqdm(total=len(sentences), unit="sent", file=sys.stderr)
    try:
        for first in range(0, len(sentences), window):
            span = range(first, min(first + window, len(sentences)))
            order = sorted(span, key=lambda i: len(sentences[i]))
            for start in range(0, len(order), batch_size):
                index = order[start:start + batch_size]
                for i, text in zip(index, _translate_batch(translator, [sentences[i] for i in index])):
                    yield i, text
                if bar is not None:
                    bar.update(len(index))
    finally:
        if bar is not None:
            bar.close()


def _translate_batch(translator, batch):
    try:
        out = translator.translate(tf.constant(batch))["translations"]
    except tf.errors.InvalidArgumentError as error:
        # --long_input=error: a user error, reported in one line rather than a traceback.
        refused = re.search(r"\[([^\]]*%s[^\]]*)\]" % chunking.TOO_LONG, error.message)
        if not refused:
            raise
        raise DataError(refused.group(1)) from None
    return [text.decode("utf-8") for text in out.numpy()]


def translate_sentences(translator, sentences, batch_size, progress=False):
    """Translations of `sentences` (list of str) in their order (see `translations`)."""
    results = [""] * len(sentences)
    for i, text in translations(translator, sentences, batch_size, progress):
        results[i] = text
    return results


class OrderedWriter:
    """Writes translations that arrive out of order (`put(index, text)`) as lines in input
    order, each as soon as every line before it is known, and flushes: whatever stops the run,
    the stream holds complete lines, a prefix of the output. Only lines waiting for an earlier
    one are held back."""

    def __init__(self, stream):
        self.stream = stream
        self.written = 0
        self._waiting = {}

    def put(self, index, text):
        self._waiting[index] = text
        if index != self.written:
            return
        while self.written in self._waiting:
            self.stream.write(self._waiting.pop(self.written) + "\n")
            self.written += 1
        self.stream.flush()
