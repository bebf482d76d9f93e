"""SavedModel export for TF Serving: DIR/NAME/VERSION/ with a text-in, text-out signature.

    serving_default(text: string [B]) -> {"translations": string [B], "scores": float32 [B]}

A non-autoregressive model decodes greedily in `serving_default` and has a second signature,
`beam`, with the same inputs and outputs; an export made with n_best N > 1 has `n_best`,
translations and scores [B, N]; one made with alignments (hard or soft) has `alignments`:
translations, scores, source_tokens, target_tokens and attention [B, T, S]
(`signatures`, Translator.alignments_signature); one made with score has
`score(text, target)` -> log_prob, normalized [B], target_tokens [B, T]
(Translator.score_signature); one made with prefix has `prefix(text, prefix)` -> translations,
scores [B], each translation starting with its prefix (Translator.prefix_signature).

The graph may only hold ops that TF Serving's stock model server has: core TensorFlow and
tensorflow-text. `disallowed_ops` is checked on every export.
"""

import json
import os

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from tfnmt.decoding.backend import Backend, no_score_signature
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.shared import stored_derivations
from tfnmt.decoding.translator import TEXT
from tfnmt.errors import ConfigError
from tfnmt.exporters.versions import write_version

# Core ops that run Python and therefore cannot run in TF Serving.
_PYTHON_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}


EXPORT_INFO = os.path.join("assets.extra", "tfnmt_export.json")


def export(translator, export_dir, name, version=0, config=None, score=False, prefix=False):
    """Writes the translator to export_dir/name/version atomically; returns that path. With
    `score`, the graph also has the `score` signature (Translator.score_signature); with
    `prefix`, the `prefix` signature (Translator.prefix_signature).

    Next to the graph, assets.extra/tfnmt_export.json records the model config and the decoding
    settings baked into the signature (TF Serving ignores that folder's other files).
    """
    # Traced afresh (a sibling has no traces yet) under stored_derivations, which the caller's
    # translator, whose weights may still change, must never be traced under.
    translator = translator.with_options(translator.options)
    with stored_derivations() as derived_weights:
        _derive(translator.model)
        # Before any directory is made: a signature the model cannot have is refused with
        # nothing left behind.
        functions = signatures(translator, score=score, prefix=prefix)

    def write(staging):
        tf.saved_model.save(_servable(translator, derived_weights), staging,
                            signatures={name: fn for name, (fn, _) in functions.items()})
        info = {"config": config or {}, "decoding": translator.options.record(),
                "signatures": {name: {"beam_size": beam} for name, (_, beam) in functions.items()}}
        os.makedirs(os.path.join(staging, "assets.extra"), exist_ok=True)
        with open(os.path.join(staging, EXPORT_INFO), "w") as f:
            json.dump(info, f, indent=2, sort_keys=True)
        disallowed = disallowed_ops(staging)
        if disallowed:
            raise ConfigError("the exported graph uses ops TF Serving lacks: "
                              + ", ".join(sorted(disallowed)))

    return write_version(export_dir, name, version, write)


def _derive(model):
    """Makes the variables of what decoding derives from `model`'s weights (decoding/shared.py)
    before the signatures are traced: tf.function traces a function that made variables in its
    first trace a second time, and the search is an export's costliest trace."""
    model.decoding_memory(model.encode(tf.constant([[4, 3]], tf.int32), training=False))


def signatures(translator, score=False, prefix=False):
    """{signature name: (concrete function, beam size)} of `translator`'s SavedModel: its
    searcher's variants (decoding/searches.py; serving_default first), `n_best` when
    `options.n_best` > 1, `alignments` with alignments, and `score` and `prefix` when asked
    for."""
    variants = translator.searcher.variants()
    found = {name: translator.translate if searcher is translator.searcher else tf.function(
        lambda text, searcher=searcher: translator._translate(text, searcher),
        input_signature=[TEXT], autograph=False) for name, searcher in variants.items()}
    if translator.options.n_best > 1:
        found["n_best"] = translator.n_best_signature
    if translator.options.alignments != "none":
        found["alignments"] = translator.alignments_signature
    if score:
        translator.check_scorable([], "--score")
        if translator.model.source_window:
            # The graph cannot refuse a long source as check_scorable does in Python.
            raise ConfigError(f"--score: not for a model with a source window "
                              f"({translator.model.registry_name!r} reads its long sources in "
                              "chunks, whose joined translation has no one score)")
        found["score"] = translator.score_signature
    if prefix:
        translator.check_prefix()
        found["prefix"] = translator.prefix_signature
    # The other signatures search as the default does.
    width = {name: searcher.width for name, searcher in variants.items()}
    return {name: (function.get_concrete_function(), width.get(name, translator.searcher.width))
            for name, function in found.items()}


def _servable(translator, derived_weights):
    """The object to save: exactly what the signatures capture, the model's tf.Variables, what
    decoding derives from them (`stored_derivations`: transposed output matrices, fused
    projections) and the tokenizers. Not the translator's tf.function itself: saving would
    trace it again, outside `stored_derivations`, into a graph no signature uses.

    Saving the Translator would save its Keras model, whose Keras 3 variables are written as
    copies that a graph-mode loader (TF Serving, `saved_model_cli run`) restores into other
    variables than the ones the signature reads: every request then fails with "Could not find
    variable" (keras-team/keras#20095), while Python's tf.saved_model.load, which binds by object,
    works. Tracking the underlying tf.Variables themselves gives one variable per weight.
    """
    root = tf.Module(name="tfnmt_export")
    root.model_variables = [variable.value for variable in translator.model.weights]
    root.derived_weights = derived_weights
    root.tokenizers = [translator.source_tokenizer, translator.target_tokenizer]
    return root


def read_export_info(path):
    """The decoding settings and config an exported model was written with ({} if unknown)."""
    try:
        with open(os.path.join(path, EXPORT_INFO)) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return {}


def check_recorded_score(path):
    """Before the export at `path` is loaded: refuses it when its record (tfnmt_export.json)
    lists its signatures without `score`. One without the record is checked once loaded
    (SavedModelTranslator.check_scorable)."""
    recorded = read_export_info(path).get("signatures")
    if recorded is not None and "score" not in recorded:
        raise no_score_signature(path)


def _load(path):
    """tf.saved_model.load(path); one line for a damaged export (an empty saved_model.pb gave
    "... 0 MetaGraphs", a truncated one "Cannot parse file", damaged variables an OpError or
    "Read less bytes than requested")."""
    try:
        if os.path.getsize(os.path.join(path, "saved_model.pb")) == 0:
            raise ValueError("saved_model.pb is empty")
        return tf.saved_model.load(path)
    except (ValueError, OSError, IndexError, tf.errors.OpError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if reason.startswith("Cannot parse file"):  # it names the file as bytes: b'...'
            reason = "saved_model.pb cannot be parsed: " + reason.rsplit(": ", 1)[-1].rstrip(".")
        raise ConfigError(f"cannot load the SavedModel in {path}: {reason}; export the model "
                          "again") from None


class SavedModelTranslator(Backend):
    """An exported model as a translation backend (decoding/backend.py): `translate` through
    one of its signatures (`serving_default`, or e.g. `beam` of a non-autoregressive model),
    `translate_n_best` through `n_best`."""

    def __init__(self, path, signature="serving_default", module=None):
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
        if not os.path.isfile(os.path.join(path, "saved_model.pb")):
            raise ConfigError(f"no SavedModel in {path} (expected DIR/NAME/VERSION/saved_model.pb)")
        info = read_export_info(path)
        # Refused from the export's record, where it has one, before a load that takes seconds.
        names = info.get("signatures") if module is None else None
        if names is None or signature in names:
            self.module = module or _load(path)
            names = self.module.signatures
        if signature not in names:
            raise ConfigError(f"{path} has no signature {signature!r}; it has "
                              f"{', '.join(sorted(names))}")
        self.path = path
        self.signature_name = signature
        self.signature = self.module.signatures[signature]
        self.config = info.get("config") or None
        self.options = DecodingOptions.from_record(info.get("decoding"))
        self.beam_size = (info.get("signatures", {}).get(signature, {}).get("beam_size")
                          or self.options.beam_size)

    def signatures(self):
        return sorted(self.module.signatures)

    def translate(self, text):
        return self.signature(text=text)

    def translate_n_best(self, text, n):
        if "n_best" not in self.module.signatures or n > self.options.n_best:
            raise ConfigError(f"--n_best={n}: {self.path} keeps {self.options.n_best} "
                              f"hypotheses per sentence; export it with --n_best={n} or more")
        out = self.module.signatures["n_best"](text=text)
        return {key: value[:, :n] for key, value in out.items()}

    def translate_alignments(self, text):
        if "alignments" not in self.module.signatures:
            raise ConfigError(f"--alignments: {self.path} has no `alignments` signature; "
                              "export it with --alignments=hard or soft")
        return self.module.signatures["alignments"](text=text)

    def check_prefix(self):
        if "prefix" not in self.module.signatures:
            raise ConfigError(f"target prefix: {self.path} has no `prefix` signature; export it "
                              "with --prefix")

    def translate_prefix(self, text, prefix):
        self.check_prefix()
        return self.module.signatures["prefix"](text=text, prefix=prefix)

    def check_scorable(self, sentences, where):
        """Refuses scoring through an export made without the `score` signature."""
        if "score" not in self.module.signatures:
            raise no_score_signature(self.path)

    def score_signature(self, text, target):
        return self.module.signatures["score"](text=text, target=target)


def graph_ops(path):
    """Every op type in a SavedModel: its graph and all functions in its library."""
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    ops = set()
    for meta_graph in proto.meta_graphs:
        ops.update(node.op for node in meta_graph.graph_def.node)
        for function in meta_graph.graph_def.library.function:
            ops.update(node.op for node in function.node_def)
    # Calls of library functions appear as ops named after the function.
    functions = {f.signature.name for mg in proto.meta_graphs for f in mg.graph_def.library.function}
    return ops - functions


def servable_ops():
    """Op types TF Serving's model server provides: core TensorFlow + tensorflow-text."""
    return (set(dir(tf.raw_ops)) - _PYTHON_OPS) | _tensorflow_text_ops()


def _tensorflow_text_ops():
    # tensorflow-text loads its kernels with load_op_library; the returned modules expose one
    # CamelCase function per op, which the op registry then knows.
    import sys
    import types

    import tensorflow_text  # noqa: F401
    from tensorflow.python.framework import op_def_registry
    modules = [m for n, m in list(sys.modules.items()) if n.startswith("tensorflow_text") and m]
    candidates = set()
    for module in modules:
        for value in list(vars(module).values()):
            if isinstance(value, types.ModuleType):
                candidates.update(n for n in dir(value) if n[:1].isupper())
    core = set(dir(tf.raw_ops))
    return {n for n in candidates - core if op_def_registry.get(n) is not None}


def disallowed_ops(path):
    return graph_ops(path) - servable_ops()
