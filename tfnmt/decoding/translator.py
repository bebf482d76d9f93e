"""Text in, text out: tokenizer, encoder, search and detokenizer in one tf.function.

The same `Translator` serves `tfnmt translate` (from a checkpoint, in-process) and the exported
SavedModel, so the two give the same translations by construction.
"""

import dataclasses

import tensorflow as tf
from absl import logging

from tfnmt import runtime
from tfnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from tfnmt.decoding import chunking, precision, searches, shortlist
from tfnmt.decoding.backend import Backend
from tfnmt.decoding.beam_search import length_penalty, log_probs_of
from tfnmt.decoding.options import DecodingOptions
from tfnmt.errors import ConfigError, DataError

TEXT = tf.TensorSpec([None], tf.string, name="text")
PREFIX = tf.TensorSpec([None], tf.string, name="prefix")


class Translator(tf.Module, Backend):
    """Wraps a trained model and its vocabularies; decodes with one `DecodingOptions`.

    `translate(text [B] string) -> {"translations": string [B], "scores": float32 [B]}`;
    `translate_n_best(text, n) -> {"translations": string [B, n], "scores": float32 [B, n]}`,
    best first, n <= `options.n_best` (the export's `n_best` signature: `n_best_signature`).
    Empty (or whitespace-only) inputs translate to the empty string with score 0.
    Inputs longer than `options.max_input_length` subwords are truncated to it (the model never
    saw longer sentences); the CLI warns about them before calling.
    A model with a `source_window` (models/base.py) gets longer inputs in chunks whose
    translations are joined (`long_input="chunk"`), or refuses them (`"error"`).
    With `options.decode_dtype` other than the model's, it decodes a copy of the model in that
    type (decoding/precision.py), made once: later changes to the model's weights are not seen.
    """

    def __init__(self, model, source_vocab, target_vocab, options=DecodingOptions(),
                 shortlist_table=None):
        """`shortlist_table`: decoding/shortlist.py's table, which --shortlist needs."""
        super().__init__(name="translator")
        self.source_vocab, self.target_vocab = source_vocab, target_vocab
        self.source_tokenizer = source_vocab.tokenizer()
        self.target_tokenizer = target_vocab.tokenizer()
        self.options = options
        self._searches = {}  # Translator.search's functions
        # The search that decodes (decoding/searches.py).
        self.searcher = searches.for_model(model, options)
        if options.alignments != "none" and model.source_window:
            raise ConfigError(model.cannot_align())
        if options.n_best > 1 and model.source_window:
            raise ConfigError(f"--n_best={options.n_best}: not for a model with a source window "
                              "(its long inputs are translated in chunks)")
        self._given_model = model  # with_options starts from it, not from a rounded copy
        # The options say what was decoded with: `auto` becomes the dtype it chose.
        self.model, dtype = precision.decoding_model(model, options.decode_dtype)
        self.options = dataclasses.replace(options, decode_dtype=dtype)
        self._shortlist_table, self._unshortlisted = shortlist_table, self.model
        if options.shortlist:
            if not model.autoregressive:
                raise ConfigError("--shortlist: not for a CTC model (it labels every position "
                                  "at once, over the whole vocabulary)")
            if shortlist_table is None:
                raise ConfigError("--shortlist: a model directory's training pairs make its "
                                  "table; this model has none")
            self.model = shortlist.Shortlisted(
                self.model, shortlist.limit(shortlist_table, options.shortlist))

    @property
    def beam_size(self):
        return self.searcher.width

    def with_options(self, options):
        """The same model and vocabularies decoded with other `options` (DecodingOptions);
        in the same `decode_dtype`, the same copy of the model."""
        same = options.decode_dtype in (self.options.decode_dtype, runtime.AUTO)
        given = self._unshortlisted if same else self._given_model
        sibling = Translator(given, self.source_vocab, self.target_vocab, options,
                             self._shortlist_table)
        sibling._given_model = self._given_model
        return sibling

    def target_pieces(self, texts):
        """[(pieces of text, as the target vocabulary splits it)] of `texts` (list of str)."""
        pieces = self.target_tokenizer.id_to_string(
            self.target_tokenizer.tokenize(tf.constant(texts, tf.string)))
        return [tuple(piece.decode("utf-8") for piece in row) for row in pieces.to_list()]

    def prepare(self, sentences, where, first_line=1):
        """Warns about each source longer than `max_input_length` subwords (cut to it), and
        logs the sources longer than the model's source window (conv_encoder's k̄) as translated
        in chunks or, with long_input="error", refuses them naming the first one's line (the
        first sentence is line `first_line` of `where`)."""
        if not sentences:
            return
        lengths = self.source_tokenizer.tokenize(tf.constant(sentences)).row_lengths().numpy()
        limit = self.options.max_input_length
        for number, length in enumerate(lengths, start=first_line):
            if length > limit:
                logging.warning("%s:%d: %d subwords; only the first %d are translated "
                                "(--max_input_length)", where, number, length, limit)
        window = self.model.source_window
        if not window:
            return
        lengths = [min(int(n), limit) for n in lengths]
        long = [i for i, n in enumerate(lengths) if n > window - 1]
        if not long:
            return
        if self.options.long_input == "error":
            raise DataError(f"{where}:{long[0] + first_line}: {lengths[long[0]]} subwords; the "
                            f"model reads at most {window - 1} (--source_window={window} with "
                            f"eos) and --long_input=error ({len(long)} such line(s)); "
                            "--long_input=chunk translates them in pieces")
        shown = (", ".join(str(n + first_line) for n in long[:10])
                 + (", ..." if len(long) > 10 else ""))
        logging.info("%s: %d of %d sources are longer than the source window of the model (%d "
                     "subwords and eos) and are translated in chunks: line(s) %s", where,
                     len(long), len(sentences), window - 1, shown)

    def tokenize(self, text):
        """string [B] -> (int32 [B, S] padded source ids ending in eos, int32 [B] lengths)."""
        ids = self.source_tokenizer.tokenize(text)[:, : self.options.max_input_length]
        eos = tf.RaggedTensor.from_tensor(tf.fill([ids.nrows(), 1], EOS_ID))
        ids = tf.concat([ids, eos], axis=1)
        return ids.to_tensor(default_value=PAD_ID), tf.cast(ids.row_lengths(), tf.int32) - 1

    @tf.function(input_signature=[TEXT], autograph=False)
    def translate(self, text):
        return self._translate(text, self.searcher)

    def translate_n_best(self, text, n):
        """The `n` <= `options.n_best` best translations of each sentence."""
        if n > self.options.n_best:
            raise ConfigError(f"--n_best={n}: this translator keeps {self.options.n_best}")
        return {key: value[:, :n] for key, value in self.n_best_signature(text).items()}

    @tf.function(input_signature=[TEXT], autograph=False)
    def n_best_signature(self, text):
        source, lengths = self.tokenize(text)
        n = self.options.n_best
        ids, scores = self.search(source, lengths, self.searcher, n)  # [B, N, T], [B, N]
        batch = tf.shape(ids)[0]
        flat = tf.reshape(ids, [batch * n, -1])
        texts = self.target_tokenizer.detokenize(tf.RaggedTensor.from_tensor(flat, padding=PAD_ID))
        empty = tf.equal(lengths, 0)[:, None]
        return {"translations": tf.where(empty, "", tf.reshape(texts, [batch, n])),
                "scores": tf.where(empty, 0.0, scores)}

    def check_prefix(self):
        """Refuses a target prefix that the model cannot continue."""
        if not self.model.autoregressive:
            raise ConfigError(searches.cannot_continue(self.model))

    def translate_prefix(self, text, prefix):
        self.check_prefix()
        return self.prefix_signature(text, prefix)

    @tf.function(input_signature=[TEXT, PREFIX], autograph=False)
    def prefix_signature(self, text, prefix):
        """The best translation of each sentence of `text` [B] that starts with its target
        `prefix` [B] ("": none), the export's `prefix` signature: translations string [B], each
        `prefix` as given followed by the rest of the translation (`continued`); scores
        float32 [B], of the whole translation, the prefix's tokens included (what
        `score_signature` gives it). The prefix's pieces are forced as the first tokens of
        every hypothesis; the length limits count the tokens after them. An empty source
        translates to its prefix, with score 0."""
        source, lengths = self.tokenize(text)
        pieces = self.target_tokenizer.tokenize(prefix)
        ids, scores = self.translate_ids(source, lengths,
                                         prefix=pieces.to_tensor(default_value=PAD_ID))
        whole = self.target_tokenizer.detokenize(tf.RaggedTensor.from_tensor(ids, padding=PAD_ID))
        translations = continued(prefix, self.target_tokenizer.detokenize(pieces), whole)
        empty = tf.equal(lengths, 0)
        return {"translations": tf.where(empty, prefix, translations),
                "scores": tf.where(empty, 0.0, scores)}

    def translate_alignments(self, text):
        if self.options.alignments == "none":
            return super().translate_alignments(text)
        return self.alignments_signature(text)

    @tf.function(input_signature=[TEXT], autograph=False)
    def alignments_signature(self, text):
        """The best translation of each sentence with its tokens and attention (the export's
        `alignments` signature): translations string [B], scores float32 [B], source_tokens
        string [B, S] (the source's pieces and "</s>", "" after them), target_tokens string
        [B, T] ("" after them), attention float32 [B, T, S] (row t: target token t's weights
        over the source tokens; 0 on padding). An empty input has no target tokens."""
        source, lengths = self.tokenize(text)
        memory = self.model.encode(source, training=False)
        ids, scores, attention = self.searcher(self.model, memory, lengths, 1, alignments=True)
        empty = tf.equal(lengths, 0)
        ids = tf.where(empty[:, None], PAD_ID, ids[:, 0])
        real = tf.not_equal(ids, PAD_ID)
        longest = tf.reduce_max(tf.reduce_sum(tf.cast(real, tf.int32), axis=1))
        ids, real = ids[:, :longest], real[:, :longest]
        attention = attention[:, 0, :longest] * tf.cast(real, tf.float32)[..., None]
        translations = self.target_tokenizer.detokenize(
            tf.RaggedTensor.from_tensor(ids, padding=PAD_ID))
        return {"translations": tf.where(empty, "", translations),
                "scores": tf.where(empty, 0.0, scores[:, 0]),
                "source_tokens": tf.where(tf.not_equal(source, PAD_ID),
                                          self.source_tokenizer.id_to_string(source), ""),
                "target_tokens": tf.where(real, self.target_tokenizer.id_to_string(ids), ""),
                "attention": attention}

    def check_scorable(self, sentences, where):
        """Refuses what `score_signature` cannot read: a model that does not decode token by
        token, a source longer than the model's source window (its translation is joined from
        chunks, which no one target belongs to). Warns of each source longer than
        `max_input_length` subwords, which is read cut to it as `translate` cuts it: once per
        distinct source, which an n-best list repeats for each of its hypotheses."""
        if not self.model.autoregressive:
            raise ConfigError(f"score: model {self.model.registry_name!r} is not autoregressive: "
                              "it gives no probability of a target given its tokens before")
        if not sentences:
            return
        lengths = self.source_tokenizer.tokenize(tf.constant(sentences)).row_lengths().numpy()
        window, limit = self.model.source_window, self.options.max_input_length
        for number, length in enumerate(lengths, start=1):
            if window and min(int(length), limit) > window - 1:
                raise DataError(f"{where}:{number}: {length} subwords; the model reads at most "
                                f"{window - 1} (--source_window={window} with eos), and a "
                                "translation in chunks has no one score")
        warned = set()
        for number, (sentence, length) in enumerate(zip(sentences, lengths), start=1):
            if length > limit and sentence not in warned:
                warned.add(sentence)
                logging.warning("%s:%d: %d subwords; only the first %d are scored "
                                "(--max_input_length)", where, number, length, limit)

    @tf.function(input_signature=[TEXT, tf.TensorSpec([None], tf.string, name="target")],
                 autograph=False)
    def score_signature(self, text, target):
        """Teacher forcing of `target` [B] given `text` [B]: log_prob float32 [B], the sum of the
        log-probabilities of the target's tokens and eos; normalized [B], log_prob over the
        length penalty of `options` (the beam search's score of that hypothesis);
        target_tokens string [B, T] (its pieces, "" after them)."""
        source, _ = self.tokenize(text)
        pieces = self.target_tokenizer.tokenize(target)
        def column(token):
            return tf.RaggedTensor.from_tensor(tf.fill([pieces.nrows(), 1], token))

        # As the model was trained (data/pipeline.py): bos y in, y eos out.
        target_in = tf.concat([column(BOS_ID), pieces], axis=1).to_tensor(default_value=PAD_ID)
        labels = tf.concat([pieces, column(EOS_ID)], axis=1).to_tensor(default_value=PAD_ID)
        memory = self.model.encode(source, training=False)
        logits = self.model.decode(memory, target_in, training=False)
        log_probs = log_probs_of(self.model, logits)
        real = tf.not_equal(labels, PAD_ID)
        token_log_probs = tf.where(real, tf.gather(log_probs, labels, batch_dims=2), 0.0)
        log_prob = tf.reduce_sum(token_log_probs, axis=1)
        length = tf.reduce_sum(tf.cast(real, tf.int32), axis=1)
        o = self.options
        ids = pieces.to_tensor(default_value=PAD_ID)
        return {"log_prob": log_prob,
                "normalized": log_prob / length_penalty(length, o.length_penalty,
                                                        o.length_penalty_mode),
                "target_tokens": tf.where(tf.not_equal(ids, PAD_ID),
                                          self.target_tokenizer.id_to_string(ids), "")}

    def _translate(self, text, searcher):
        source, lengths = self.tokenize(text)
        ids, scores = self.translate_ids(source, lengths, searcher)
        ragged = tf.RaggedTensor.from_tensor(ids, padding=PAD_ID)
        translations = self.target_tokenizer.detokenize(ragged)
        empty = tf.equal(lengths, 0)
        return {"translations": tf.where(empty, "", translations),
                "scores": tf.where(empty, 0.0, scores)}

    def translate_ids(self, source, lengths, searcher=None, prefix=None, halves=True):
        """Padded source ids [B, S] (eos-terminated) and their lengths without eos [B] ->
        (ids [B, T] padded with PAD_ID, scores [B]) of the best translation, which starts with
        `prefix` int32 [B, P] (PAD_ID after each row's), if given. Shared by the SavedModel and
        TFLite exports. `searcher` defaults to the translator's."""
        searcher = searcher or self.searcher
        window = self.model.source_window
        if not window:
            ids, scores = self.search(source, lengths, searcher, prefix=prefix, halves=halves)
            return ids[:, 0], scores[:, 0]
        if self.options.long_input == "error":
            tf.debugging.assert_less_equal(
                lengths, window - 1, message=f"a source is {chunking.TOO_LONG} ({window - 1} "
                "subwords and eos) and --long_input=error; --long_input=chunk translates it in "
                "pieces")
        chunks, chunk_lengths, sentence = chunking.split(source, lengths, window)
        if prefix is not None:
            # A sentence's prefix starts the translation of its first chunk.
            first = tf.concat([[True], tf.not_equal(sentence[1:], sentence[:-1])], axis=0)
            prefix = tf.where(first[:, None], tf.gather(prefix, sentence), PAD_ID)
        ids, scores = self.search(chunks, chunk_lengths, searcher, prefix=prefix,
                                  halves=halves)
        return chunking.join(ids[:, 0], scores[:, 0], sentence, tf.shape(lengths)[0])

    def search(self, source, lengths, searcher=None, n_best=1, prefix=None, halves=True):
        """(ids [B, n_best, T], scores [B, n_best]) of sources that fit the model's window.

        With `halves`, a batch of at least SPLIT_SENTENCES sentences is searched as two halves
        side by side: one function, called twice, whose calls TensorFlow runs at once on its
        inter-op threads (one search's small per-step ops then fill the time the other's leave
        idle). Without (TFLite: one thread, and no function calls to convert), inline."""
        searcher = searcher or self.searcher
        tensors = (source, lengths) if prefix is None else (source, lengths, prefix)
        if not halves:
            return self._search(searcher, n_best, *tensors)
        key = (id(searcher), n_best, prefix is None)
        if key not in self._searches:
            # Not inlined: Grappler would otherwise optimise the search once per call site
            # (three), which made the first call of Transformer-small's translate 8.7 -> 15 s;
            # as one function, 10.4-11.6 s.
            self._searches[key] = tf.function(
                lambda *tensors: self._search(searcher, n_best, *tensors),
                experimental_attributes={"_noinline": True}, autograph=False)
        run = self._searches[key]
        batch = tf.shape(source)[0]
        return tf.cond(batch >= SPLIT_SENTENCES, lambda: _halves(run, batch, tensors),
                       lambda: run(*tensors))

    def _search(self, searcher, n_best, source, lengths, prefix=None):
        if getattr(searcher, "compiled", False):
            return searcher.encode_and_search(self.model, source, lengths, n_best, prefix=prefix)
        memory = self.model.encode(source, training=False)
        if not self.options.shortlist or prefix is not None:
            return searcher(self.model, memory, lengths, n_best, prefix=prefix)
        ids = self.model.candidates(source)
        found, scores = searcher(self.model, shortlist.with_candidates(memory, ids), lengths,
                                 n_best)
        return shortlist.to_ids(found, ids), scores


# The smallest batch searched in halves. Two halves, not more: Transformer-small at beam 5, 32
# sentences a batch, on the 2-core CPU: 1.16x the whole batch's sentences/s; three parts 0.91x,
# four 0.85x (docs/benchmarks.md).
SPLIT_SENTENCES = 8


def _halves(run, batch, tensors):
    """`run` over the first and the second half of each of `tensors` (batch-major), its
    results (ids [b, N, T], scores [b, N]) joined back in order, ids padded to the longer T."""
    half = (batch + 1) // 2
    first = run(*[t[:half] for t in tensors])
    second = run(*[t[half:] for t in tensors])
    width = tf.maximum(tf.shape(first[0])[2], tf.shape(second[0])[2])
    ids = [tf.pad(ids, [[0, 0], [0, 0], [0, width - tf.shape(ids)[2]]], constant_values=PAD_ID)
           for ids in (first[0], second[0])]
    return tf.concat(ids, axis=0), tf.concat([first[1], second[1]], axis=0)


def continued(prefix, forced, whole):
    """string [B]: each `prefix` exactly as given, then what the translation `whole` (its
    detokenized pieces, prefix's included) adds after `forced` (the prefix's pieces alone,
    detokenized): so the prefix is kept verbatim whatever SentencePiece normalises (spaces,
    unknown characters). The space before the next word is the translation's, so a prefix
    that ends in whitespace takes no second one; one that ends mid-word is continued as the
    model continues its last piece."""
    start = tf.strings.length(forced)
    rest = tf.strings.substr(whole, start, tf.maximum(tf.strings.length(whole) - start, 0))
    rest = tf.where(tf.strings.regex_full_match(prefix, r"(?s).*\s"),
                    tf.strings.regex_replace(rest, "^ ", ""), rest)
    return tf.strings.join([prefix, rest])
