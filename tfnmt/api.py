"""The Python API: `tfnmt.Translator`, one object for a trained model wherever it is.

    from tfnmt import Translator
    translator = Translator.from_model_dir("runs/transformer-small-en-de", beam_size=5)
    for t in translator.translate(["A dog runs.", "Two men talk."]):
        print(t.text, t.score)

Opened from a model directory (a checkpoint, decoded in this process with any decoding
option), an export (a SavedModel or TFLite DIR/NAME/VERSION, which decodes as it was exported)
or a running server (`tfnmt serve`, TF Serving's REST API). It wraps the backends the command
line uses (serving/backends.py, decoding/translator.py): `tfnmt translate` is this class behind
flags.

Nothing is printed but what the caller prints: this module imports no TensorFlow itself; the
first factory call sets TF_CPP_MIN_LOG_LEVEL and tfnmt's runtime defaults (runtime.py: the CPU
allocator), each unless set, before TensorFlow is imported, and
every call routes file descriptor 2 through a filter of TensorFlow's C++ log lines while it
runs, and only then (native_logs.py).
"""

import dataclasses
import functools
import logging
import os

from tfnmt import native_logs, runtime
from tfnmt.decoding.options import DECODE_BATCH_SIZE, DecodingOptions
from tfnmt.decoding.results import Score, Translation
from tfnmt.errors import ConfigError

__all__ = ["Translator", "Translation", "Score", "UnsupportedError"]


class UnsupportedError(ConfigError, NotImplementedError):
    """What the translator's backend cannot do (alignments from a server, scores from an
    export, more hypotheses than an export keeps); the message says why and what can."""


def _quiet(method):
    """Runs `method` with TensorFlow's C++ log lines kept off the caller's stderr."""
    @functools.wraps(method)
    def quiet(*args, **kwargs):
        _prepare_logging()
        with native_logs.filtered():
            runtime.one_thread_per_op()  # the API decodes
            runtime.trace_as_written()
            return method(*args, **kwargs)
    return quiet


class _NoRetracingWarning(logging.Filter):
    """TensorFlow warns when a function was traced several times in its last calls; each
    Translator traces its own functions, which is no mistake of the caller's to be told of."""

    def filter(self, record):
        return "triggered tf.function retracing" not in record.getMessage()


def _prepare_logging():
    # Before TensorFlow's first import: its C++ logging reads the level once. A user's own
    # setting of it, or of Python's logging levels, is left alone.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    runtime.configure()
    for name in ("absl", "tensorflow"):
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)
    tensorflow = logging.getLogger("tensorflow")
    if not any(isinstance(f, _NoRetracingWarning) for f in tensorflow.filters):
        tensorflow.addFilter(_NoRetracingWarning())


def _decoding_options(function, decoding):
    """DecodingOptions from keyword arguments; a name that is none of its fields is a TypeError
    naming it and the fields. `alignments` may also be True or False (soft or none)."""
    fields = [field.name for field in dataclasses.fields(DecodingOptions)]
    unknown = sorted(set(decoding) - set(fields))
    if unknown:
        raise TypeError(f"{function}() got unexpected keyword argument(s) {', '.join(unknown)}; "
                        f"the decoding options are {', '.join(fields)}")
    if isinstance(decoding.get("alignments"), bool):
        decoding["alignments"] = "soft" if decoding["alignments"] else "none"
    return DecodingOptions(**decoding)


class Translator:
    """A trained model that translates lists of sentences; open one with `from_model_dir`,
    `from_export` or `from_server`.

    `translate` returns `Translation`s (text, score, tokens, alignment); `score` the
    probability of given translations (from a model directory, or an export with the `score`
    signature or a server of one). Both take plain lists of str and give results in their
    order. `config` is the model's config.json (None from a server); `beam_size` the beam its
    translations come from (None where unknown: a server).
    """

    def __init__(self, backend, config=None, options=None, where=""):
        """Wraps a backend (decoding/backend.py); the factories below are the public way in.
        `options`: the DecodingOptions of an in-process backend, None for an export or a
        server (which decode as they were exported)."""
        self._backend = backend
        self.config = config
        self.options = options
        self._where = where
        self._siblings = {}

    @property
    def beam_size(self):
        return self._backend.beam_size

    # --- opening ------------------------------------------------------------------------------
    @classmethod
    @_quiet
    def from_model_dir(cls, path, checkpoint=None, **decoding):
        """The model directory `path` (what `tfnmt train` wrote) at `checkpoint` (None: the
        latest; "best": the best by validation; or a checkpoint's path), decoded with the
        DecodingOptions fields given as keywords: beam_size, length_penalty,
        length_penalty_mode, n_best, alignments, max_decode_length, no_repeat_ngram_size,
        sampling, ... (`tfnmt translate --help` describes each under its flag name).

        A list of paths, or of checkpoints, is an ensemble of those models (one path or
        checkpoint goes with each of the other list's), decoded as one: the mean of their
        log-probabilities at each step. Its members share their vocabularies."""
        from tfnmt.serving import backends
        options = _decoding_options("from_model_dir", decoding)
        config, backend = backends.from_checkpoint(path, checkpoint or "", options)
        return cls(backend, config, options,
                   where=path if isinstance(path, str) else ",".join(path))

    @classmethod
    @_quiet
    def from_export(cls, path, signature="serving_default"):
        """An export, DIR/NAME/VERSION as `tfnmt export` writes it (a SavedModel, or a TFLite
        flatbuffer with its spm.model), through `signature` (a CTC model's export also has
        `beam`). It decodes as it was exported; n_best and alignments need an export made with
        them."""
        from tfnmt.serving import backends
        config, backend = backends.from_export(path, signature)
        return cls(backend, config, where=path)

    @classmethod
    @_quiet
    def from_server(cls, url, model_name, version=0, retries=None, timeout=None):
        """The model `model_name` (at `version`, 0: the newest) served at `url` by `tfnmt serve`
        or TF Serving's REST API, e.g. "http://localhost:8501". Unreachable or loading, it is
        retried `retries` times (default: --server_retries) within `timeout` seconds a request
        (default: --server_timeout)."""
        from tfnmt.serving import backends
        from tfnmt.serving.options import ClientOptions
        settings = {"server": url, "served_model": model_name, "model_version": version}
        settings.update({k: v for k, v in (("server_retries", retries),
                                           ("server_timeout", timeout)) if v is not None})
        _, backend = backends.from_server(ClientOptions(**settings))
        return cls(backend, where=url)

    # --- translating --------------------------------------------------------------------------
    @_quiet
    def translate(self, sources, n_best=None, alignments=None, batch_size=DECODE_BATCH_SIZE,
                  target_prefix=None):
        """Translations of `sources` (a list of str), in their order: one `Translation` per
        source or, with `n_best` N > 1, a list of its N best, best first.

        n_best, alignments: None takes the translator's own (from_model_dir's decoding
        options; 1 and False for an export or a server). alignments=True gives each
        translation its `alignment` (the model's attention) and generated `tokens`; a model
        without attention, or an export made without --alignments, or a server, refuse it.
        Not with n_best > 1.

        target_prefix: a list of str, one per source ("" for none): each translation starts
        with its prefix, exactly as given, and continues as the search does after the
        prefix's pieces (README: Target prefix); its score counts the prefix's tokens. The best
        translation only (not with n_best > 1 or alignments); a model that chooses its labels
        all at once (CTC), an export made without --prefix, or a TFLite export refuse it.
        """
        return [result for _, result in sorted(
            self.translations(sources, n_best=n_best, alignments=alignments,
                              batch_size=batch_size, target_prefix=target_prefix),
            key=lambda pair: pair[0])]

    def translations(self, sources, n_best=None, alignments=None,
                     batch_size=DECODE_BATCH_SIZE, window=0, progress=None, where=None,
                     target_prefix=None, first_line=1):
        """An iterator of (index, result) as `translate` computes them, a batch at a time, in
        the order of decoding (sources of similar lengths together, sorted within each `window`
        sources; 0: all of them): the streaming form that `tfnmt translate` writes as it goes.
        The settings are checked, and the sources looked at (over-long ones named WHERE:LINE,
        `where` defaulting to "sources", the first source its line `first_line`), before it
        returns; `progress`, e.g. `tqdm(total=len(sources))`, is told of every batch
        (`update(n)`)."""
        from tfnmt.decoding.batches import translated_batches
        sources = _strings("sources", sources)
        if target_prefix is not None:
            target_prefix = self._prefixes(sources, target_prefix, n_best, alignments)
            n_best, alignments = 1, False
        n_best, alignments = self._wanted(n_best, alignments)
        backend = self._backend_for(n_best, alignments)
        with native_logs.filtered():
            if target_prefix is not None:
                _unsupported(backend.check_prefix)
            backend.prepare(sources, where or "sources", first_line)
        batches = translated_batches(backend, sources, batch_size, progress=progress,
                                     window=window, n_best=n_best if n_best > 1 else 0,
                                     alignments=alignments, prefixes=target_prefix)
        tokenize = None if alignments else getattr(backend, "target_pieces", None)
        return _stream(batches, tokenize)

    @staticmethod
    def _prefixes(sources, target_prefix, n_best, alignments):
        prefixes = _strings("target_prefix", target_prefix)
        if len(prefixes) != len(sources):
            raise ValueError(f"target_prefix: {len(prefixes)} prefixes for {len(sources)} "
                             "sources; give one per source (\"\" for none)")
        if (n_best or 1) > 1 or alignments:
            raise ConfigError("target_prefix: of the best translation only; not with n_best "
                              "or alignments")
        return prefixes

    def _wanted(self, n_best, alignments):
        own = self.options or DecodingOptions()
        n_best = own.n_best if n_best is None else n_best
        alignments = own.alignments != "none" if alignments is None else bool(alignments)
        if not isinstance(n_best, int) or n_best < 1:
            raise ValueError(f"n_best={n_best!r}: must be an int >= 1")
        if alignments and n_best > 1:
            raise ConfigError("alignments are of the best translation only: ask for n_best=1")
        return n_best, alignments

    def _backend_for(self, n_best, alignments):
        """The backend that gives `n_best` hypotheses (with `alignments`): an in-process one
        with other decoding options if need be (it shares the model); the export or server
        otherwise, whose refusal is an UnsupportedError."""
        if self.options is None:
            return _Refusing(self._backend, self._where)
        wanted = self.options
        if n_best > wanted.n_best:
            wanted = dataclasses.replace(wanted, n_best=n_best)
        if alignments and wanted.alignments == "none":
            wanted = dataclasses.replace(wanted, alignments="soft")
        if wanted == self.options:
            return self._backend
        if wanted not in self._siblings:
            self._siblings[wanted] = self._backend.with_options(wanted)
        return self._siblings[wanted]

    # --- scoring ------------------------------------------------------------------------------
    @_quiet
    def score(self, sources, targets, batch_size=DECODE_BATCH_SIZE, where=None):
        """A `Score` per (source, target) pair: the log-probability of the target given the
        source, read with teacher forcing (the sum of its tokens' log-probabilities and of eos
        after them), and `normalized`, that over the length penalty of the decoding options.

        The beam search ranks its hypotheses by that same normalized form: scoring a
        translation's text gives back its `Translation.score` (its tokens as the target
        vocabulary splits the text), and with length_penalty=0 `log_prob` is that score
        itself. From a model directory, a SavedModel exported with --score (its `score`
        signature, under the length penalty it was exported with) or a server of one; another
        export or server refuses (UnsupportedError). A source over max_input_length subwords is
        read cut to it: from a model directory with a warning, once per distinct source, naming
        it WHERE:LINE (`where` defaulting to "sources", LINE the pair's, from 1)."""
        import numpy as np
        import tensorflow as tf
        sources, targets = _strings("sources", sources), _strings("targets", targets)
        if len(sources) != len(targets):
            raise ValueError(f"score: {len(sources)} sources but {len(targets)} targets")
        if not hasattr(self._backend, "score_signature"):
            raise UnsupportedError(f"score: {self._where} is {_kind(self._backend)}, which "
                                   "gives translations only; open the model directory with "
                                   "Translator.from_model_dir to score")
        try:
            self._backend.check_scorable(sources, where or "sources")
        except ConfigError as e:  # not autoregressive, or no `score` signature
            raise UnsupportedError(str(e)) from None
        scores = []
        for start in range(0, len(sources), batch_size):
            out = self._backend.score_signature(tf.constant(sources[start:start + batch_size]),
                                                tf.constant(targets[start:start + batch_size]))
            out = {key: np.asarray(value) for key, value in out.items()}
            for log_prob, normalized, tokens in zip(out["log_prob"].tolist(),
                                                    out["normalized"].tolist(),
                                                    out["target_tokens"]):
                scores.append(Score(log_prob, normalized,
                                    tuple(t.decode("utf-8") for t in tokens if t)))
        return scores

    def __repr__(self):
        return f"Translator({_kind(self._backend)} {self._where})"


class _Refusing:
    """An export's or a server's backend whose refusals of n_best and alignments (ConfigError,
    worded for the command line) are UnsupportedErrors."""

    def __init__(self, backend, where):
        self._backend, self._where = backend, where

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def translate_n_best(self, text, n):
        return self._refusing(self._backend.translate_n_best, text, n)

    def translate_alignments(self, text):
        return self._refusing(self._backend.translate_alignments, text)

    def _refusing(self, method, *args):
        try:
            return method(*args)
        except UnsupportedError:
            raise
        except ConfigError as e:
            raise UnsupportedError(str(e)) from None


def _unsupported(check):
    """Runs `check`, its refusal (a ConfigError) an UnsupportedError."""
    try:
        check()
    except UnsupportedError:
        raise
    except ConfigError as e:
        raise UnsupportedError(str(e)) from None


def _kind(backend):
    names = {"Translator": "a checkpoint", "SavedModelTranslator": "a SavedModel",
             "TFLiteTranslator": "a TFLite export", "RemoteTranslator": "a served model"}
    return names.get(type(backend).__name__, type(backend).__name__)


def _strings(name, values):
    if isinstance(values, str):
        raise TypeError(f"{name}: a list of str, not one str (wrap it: [{values[:20]!r}])")
    values = list(values)
    wrong = [v for v in values if not isinstance(v, str)]
    if wrong:
        raise TypeError(f"{name}: a list of str; got {type(wrong[0]).__name__} {wrong[0]!r}")
    return values


def _stream(batches, tokenize):
    # Only a batch's own work runs behind the filter of fd 2, never the caller's code between
    # two results.
    while True:
        with native_logs.filtered():
            batch = next(batches, None)
            if batch and tokenize is not None:
                batch = _with_tokens(batch, tokenize)
        if batch is None:
            return
        yield from batch


def _with_tokens(batch, tokenize):
    """(index, result) with each Translation's `tokens` filled in by `tokenize` (list of str ->
    pieces per text), one call for the batch."""
    flat = [t for _, result in batch for t in (result if isinstance(result, list) else [result])]
    pieces = iter(tokenize([t.text for t in flat]))
    done = {id(t): dataclasses.replace(t, tokens=next(pieces)) for t in flat}
    return [(index, [done[id(t)] for t in result] if isinstance(result, list) else done[id(result)])
            for index, result in batch]
