"""The searches: how a batch's encoder output becomes its translations.

A search is called as `search(model, memory, source_lengths, n_best)` and returns
(ids int32 [B, n_best, T] padded with PAD_ID, scores float32 [B, n_best], best first). Which
searches a model can use follows its `search_family` (models/base.py):

  autoregressive  BeamSearch, Greedy (--beam_size=1) or Sampling, over `initial_state`/`step`
  ctc             CTCSearch over `label_log_probs(memory)` and `blank_id`: greedy (parallel,
                  every frame at once) or TensorFlow's CTC prefix beam search

`for_model(model, options)` picks the one the options ask for; `variants()` names the ones an
export serves (a CTC model's greedy fast path as serving_default, its beam search as `beam`).
"""

import dataclasses

from tfnmt.decoding import ctc, sampling
from tfnmt.decoding.beam_search import beam_search, max_lengths
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

    def limits(self, source_lengths):
        o = self.options
        return max_lengths(source_lengths, o.max_length_ratio, o.max_length_offset,
                           o.max_decode_length)


class BeamSearch(Search):
    """The one beam search of beam_search.py."""

    def __call__(self, model, memory, source_lengths, n_best=1, alignments=False):
        """With `alignments`, also the attention [B, n_best, T, S] (beam_search.py)."""
        o = self.options
        return beam_search(model, memory, self.limits(source_lengths), o.beam_size,
                           o.length_penalty, o.length_penalty_mode, n_best,
                           o.no_repeat_ngram_size, alignments)


class Greedy(Search):
    """The most likely token at each step (sampling.py). Not a beam of width 1, which also keeps
    each ending (eos) it passes and returns the best of them."""

    @property
    def width(self):
        return 1

    def choose(self):
        return None

    def __call__(self, model, memory, source_lengths, n_best=1):
        o = self.options
        return sampling.search(model, memory, self.limits(source_lengths), self.choose(),
                               o.length_penalty, o.length_penalty_mode, o.no_repeat_ngram_size)


class Sampling(Greedy):
    """Top-k / temperature sampling (sampling.py), seeded by --sampling_seed."""

    def choose(self):
        o = self.options
        return sampling.sampler(o.sampling_topk, o.sampling_temperature, o.sampling_seed)


class CTCSearch(Search):
    """A CTC model's labels: greedy with beam size 1, else the CTC prefix beam search."""

    def __call__(self, model, memory, source_lengths, n_best=1):
        log_probs, lengths = model.label_log_probs(memory)
        if self.width == 1:
            ids, scores = ctc.greedy(log_probs, lengths, model.blank_id)
            return ids[:, None], scores[:, None]
        return ctc.beam(log_probs, lengths, self.width, model.blank_id, n_best)

    def variants(self):
        # Greedy is the parallel, fast path (and the one TFLite converts); the beam is extra.
        greedy = CTCSearch(dataclasses.replace(self.options, beam_size=1, n_best=1))
        return {"serving_default": greedy, **({"beam": self} if self.width > 1 else {})}


def _autoregressive(options):
    if options.alignments != "none":  # not with sampling (DecodingOptions)
        # Also with --beam_size=1, so that the translations and their alignments agree.
        return BeamSearch(options)
    if options.sampling:
        return Sampling(options)
    return Greedy(options) if options.beam_size == 1 else BeamSearch(options)


def _ctc(options):
    asked = [f"--{name}" for name, off in (("sampling", False), ("no_repeat_ngram_size", 0))
             if getattr(options, name) != off]
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
