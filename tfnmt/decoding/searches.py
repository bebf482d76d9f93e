"""The searches: how a batch's encoder output becomes its translations.

A search is called as `search(model, memory, source_lengths, n_best, prefix=None)` and returns
(ids int32 [B, n_best, T] padded with PAD_ID, scores float32 [B, n_best], best first). A
`prefix` int32 [B, P] (PAD_ID after each row's) is forced as the first tokens of every
hypothesis; each sentence's length limit then counts the tokens after its prefix. Which
searches a model can use follows its `search_family` (models/base.py):

  autoregressive  BeamSearch, Greedy (--beam_size=1) or Sampling, over `initial_state`/`step`;
                  with --xla_decoding, Compiled (either search under XLA, over
                  `fixed_initial_state`/`step`, the encoder included)
  ctc             CTCSearch over `label_log_probs(memory)` and `blank_id`: greedy (parallel,
                  every frame at once) or TensorFlow's CTC prefix beam search

`for_model(model, options)` picks the one the options ask for; `variants()` names the ones an
export serves (a CTC model's greedy fast path as serving_default, its beam search as `beam`).
"""

import dataclasses

import tensorflow as tf

from tfnmt.decoding import compiled, ctc, sampling
from tfnmt.decoding.beam_search import beam_search, max_lengths, prefix_lengths
from tfnmt.errors import ConfigError


class Search:
    def __init__(self, options):
        self.options = options

    @property
    def width(self):
        """The beam size this search decodes with (export_info.json records it)."""
        return self.options.beam_size

    def variants(self):
        """{signature name: search} an export serves."""
        return {"serving_default": self}

    def limits(self, source_lengths, prefix=None):
        o = self.options
        limits = max_lengths(source_lengths, o.max_length_ratio, o.max_length_offset,
                             o.max_decode_length)
        return limits if prefix is None else limits + prefix_lengths(prefix)


class BeamSearch(Search):
    """The one beam search of beam_search.py."""

    def __call__(self, model, memory, source_lengths, n_best=1, alignments=False, prefix=None):
        """With `alignments`, also the attention [B, n_best, T, S] (beam_search.py)."""
        o = self.options
        return beam_search(model, memory, self.limits(source_lengths, prefix), o.beam_size,
                           o.length_penalty, o.length_penalty_mode, n_best,
                           o.no_repeat_ngram_size, o.min_decode_length, alignments, prefix)


class Compiled(Search):
    """Beam search (or greedy search at beam size 1) compiled by XLA with the encoder
    (compiled.py), for a batch of at most MAX_ROWS hypotheses (sentences x beam size); a larger
    batch takes the dynamic search, where dropping finished sentences and caches that grow
    with the output cost less than what XLA saves per op. Called on the source rather than on
    the memory: `encode_and_search(model, source, lengths, n_best, prefix)`."""
    compiled = True
    # On the 2-core CPU (docs/benchmarks.md), Transformer-small at beam 5: compiled 2.1x faster
    # at 5 rows, even at 40, 1.5x slower at 80; greedy 1.6x faster still at 32 rows.
    MAX_ROWS = 32

    def __init__(self, options):
        super().__init__(options)
        self.dynamic = _autoregressive(dataclasses.replace(options, xla_decoding=False))
        self._functions = {}

    def encode_and_search(self, model, source, lengths, n_best=1, prefix=None):
        def dynamic():
            return self.dynamic(model, model.encode(source, training=False), lengths, n_best,
                                prefix=prefix)

        rows = tf.shape(source)[0] * self.options.beam_size
        return tf.cond(rows <= self.MAX_ROWS,
                       lambda: self._compiled(model, source, lengths, n_best, prefix), dynamic)

    def _compiled(self, model, source, lengths, n_best, prefix):
        source = compiled.padded_source(source)
        # The longest limit, as the length of a tensor: under XLA a shape is a compile-time
        # constant, which the buffers of `steps` positions need. A prefix is padded as the
        # source is, so that its width takes few values too.
        most = compiled.most_steps_of(self.options, tf.shape(source)[1])
        if prefix is not None:
            prefix = compiled.padded_source(prefix)
            most += tf.shape(prefix)[1]
        steps = tf.zeros([most], tf.int8)
        key = (id(model), n_best, prefix is None)
        if key not in self._functions:
            self._functions[key] = tf.function(
                lambda source, lengths, steps, prefix: self._run(model, source, lengths, steps,
                                                                 n_best, prefix),
                jit_compile=True, autograph=False)
        return self._functions[key](source, lengths, steps, prefix)

    def _run(self, model, source, lengths, steps, n_best, prefix):
        o, steps = self.options, tf.shape(steps)[0]
        memory = model.encode(source, training=False)
        limits = self.limits(lengths, prefix)
        if o.beam_size == 1:
            return compiled.greedy(model, memory, limits, steps, o.length_penalty,
                                   o.length_penalty_mode, o.min_decode_length, prefix)
        return compiled.beam(model, memory, limits, steps, o.beam_size, o.length_penalty,
                             o.length_penalty_mode, n_best, o.min_decode_length, prefix)


class Greedy(Search):
    """The most likely token at each step (sampling.py). Not a beam of width 1, which also keeps
    each ending (eos) it passes and returns the best of them."""

    @property
    def width(self):
        return 1

    def choose(self):
        return None

    def __call__(self, model, memory, source_lengths, n_best=1, prefix=None):
        o = self.options
        return sampling.search(model, memory, self.limits(source_lengths, prefix),
                               self.choose(), o.length_penalty, o.length_penalty_mode,
                               o.no_repeat_ngram_size, o.min_decode_length, prefix)


class Sampling(Greedy):
    """Top-k / temperature sampling (sampling.py), seeded by --sampling_seed."""

    def choose(self):
        o = self.options
        return sampling.sampler(o.sampling_topk, o.sampling_temperature, o.sampling_seed)


class CTCSearch(Search):
    """A CTC model's labels: greedy with beam size 1, else the CTC prefix beam search."""

    def __call__(self, model, memory, source_lengths, n_best=1, prefix=None):
        if prefix is not None:
            raise ConfigError(cannot_continue(model))
        log_probs, lengths = model.label_log_probs(memory)
        if self.width == 1:
            ids, scores = ctc.greedy(log_probs, lengths, model.blank_id)
            return ids[:, None], scores[:, None]
        return ctc.beam(log_probs, lengths, self.width, model.blank_id, n_best)

    def variants(self):
        # Greedy is the parallel, fast path (and the one TFLite converts); the beam is extra.
        greedy = CTCSearch(dataclasses.replace(self.options, beam_size=1, n_best=1))
        return {"serving_default": greedy, **({"beam": self} if self.width > 1 else {})}


def cannot_continue(model):
    """Why `model` takes no target prefix."""
    return (f"target prefix: not for model {model.registry_name!r}, whose labels are chosen all "
            "at once rather than each after the ones before")


def _autoregressive(options):
    if options.xla_decoding:  # not with alignments or sampling (DecodingOptions)
        return Compiled(options)
    if options.alignments != "none":  # not with sampling (DecodingOptions)
        # Also with --beam_size=1, so that the translations and their alignments agree.
        return BeamSearch(options)
    if options.sampling:
        return Sampling(options)
    return Greedy(options) if options.beam_size == 1 else BeamSearch(options)


def _ctc(options):
    asked = [f"--{name}" for name, off in (("sampling", False), ("no_repeat_ngram_size", 0),
                                           ("xla_decoding", False))
             if getattr(options, name) != off]
    # The default, 1, is let through so that CTC models decode with default options; it is
    # not enforced (DecodingOptions.min_decode_length says so).
    if options.min_decode_length > 1:
        asked.append(f"--min_decode_length={options.min_decode_length}")
    if asked:
        raise ConfigError(f"{' and '.join(asked)}: not for a CTC model, whose labels are "
                          "chosen all at once (its --beam_size picks greedy or beam search)")
    return CTCSearch(options)


FAMILIES = {"autoregressive": _autoregressive, "ctc": _ctc}


def for_model(model, options):
    """The search `options` ask for, among those of the model's family."""
    if options.alignments != "none" and not model.attends:
        raise ConfigError(model.cannot_align())
    return FAMILIES[model.search_family](options)
