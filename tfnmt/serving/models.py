"""Which models and versions `tfnmt serve` serves, kept current by polling their directories.

Each model is a directory of numbered version directories (`tfnmt export` writes
DIR/NAME/VERSION, atomically). Like TF Serving's file-system source, every
--file_system_poll_wait_seconds the manager lists them, loads the versions its policy aspires
to (by default the newest) and only then unloads the others, so a model stays available while a
new version rolls in (TF Serving's availability-preserving policy).

A version that fails to load is reported in the model status (state END, with its error code
and message) and the policy chooses among the other versions, so the last good one keeps
serving; the failed version is tried again once its files change (e.g. when a copy into it
completes). A version directory without saved_model.pb (a TFLite export, or a copy that has not
got that far) is not a SavedModel: it is ignored, with one log line, until one appears.
"""

import os
import threading

import tensorflow as tf
from absl import logging
from google.protobuf.message import DecodeError
from tensorflow.core.protobuf import saved_model_pb2

from tfnmt import runtime
from tfnmt.errors import ConfigError
from tfnmt.serving.batching import Batcher
from tfnmt.serving.config import ModelSource
from tfnmt.serving.status import ServingError, invalid_argument, not_found

DEFAULT_SIGNATURE = "serving_default"
_INIT_OP_SIGNATURE = "__saved_model_init_op"


class LoadError(Exception):
    """A version that cannot be served; `code` is the canonical error code the status shows."""

    def __init__(self, message, code="UNKNOWN"):
        super().__init__(message)
        self.code = code


def version_dirs(base_path):
    """{version: path} of the numbered directories under a model's base path."""
    try:
        names = os.listdir(base_path)
    except OSError:
        return {}
    return {int(n): os.path.join(base_path, n) for n in names
            if n.isdigit() and os.path.isdir(os.path.join(base_path, n))}


def not_a_saved_model(path):
    """Why the version directory `path` is no SavedModel, or None when it holds saved_model.pb."""
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return None
    if os.path.isfile(os.path.join(path, "model.tflite")):
        return ("holds a TFLite model: TF Serving and tfnmt serve serve SavedModels only "
                "(tfnmt export --format=saved_model)")
    return "has no saved_model.pb (not a SavedModel, or not completely copied yet)"


def files_signature(path):
    """Names, sizes and modification times of the files under `path`: what tells that a version
    which failed to load has changed since, and is worth another try."""
    signature = []
    for root, _, files in os.walk(path):
        for name in files:
            try:
                info = os.stat(os.path.join(root, name))
            except OSError:  # removed while listing: the next poll sees the change
                continue
            signature.append((os.path.relpath(os.path.join(root, name), path), info.st_size,
                              info.st_mtime_ns))
    return sorted(signature)


def _signature_defs(path):
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        data = f.read()
    try:
        proto.ParseFromString(data)
    except DecodeError:
        raise LoadError(f"cannot load {path}: saved_model.pb is not a SavedModel protobuf "
                        "(corrupt, or still being written)", "DATA_LOSS") from None
    for meta_graph in proto.meta_graphs:
        if "serve" in meta_graph.meta_info_def.tags:
            return dict(meta_graph.signature_def)
    empty = " (the file is empty: still being written?)" if not data else ""
    raise LoadError(f"cannot load {path}: saved_model.pb has no MetaGraph tagged 'serve'{empty}",
                    "NOT_FOUND")


def _error_code(error):
    """The canonical code name (NOT_FOUND, DATA_LOSS, ...) of a TensorFlow error."""
    if isinstance(error, tf.errors.OpError):
        names = {getattr(tf.errors, n): n for n in dir(tf.errors) if n.isupper()}
        return names.get(error.error_code, "UNKNOWN")
    return "UNKNOWN"


class Servable:
    """One loaded version of one model: its signatures, and a batcher per signature."""

    def __init__(self, name, version, path, batching=None):
        self.name, self.version, self.path = name, version, path
        problem = not_a_saved_model(path)
        if problem:
            raise LoadError(f"{path} {problem}", "NOT_FOUND")
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the graph uses)
        self.signature_defs = _signature_defs(path)
        try:
            self._module = tf.saved_model.load(path, tags=["serve"])
        except Exception as e:  # TensorFlow raises many types for unloadable models
            raise LoadError(f"cannot load {path}: {str(e).splitlines()[0]}",
                            _error_code(e)) from None
        self._functions = {}
        self._batching = batching
        self._batchers = {}
        self._lock = threading.Lock()
        if DEFAULT_SIGNATURE in self.signature_defs:
            # The first call of a graph pays for its optimisation; pay it before serving.
            self.input_spec(DEFAULT_SIGNATURE)
            self._call(DEFAULT_SIGNATURE, ["a"])

    def input_spec(self, signature_name):
        """[(input name, input dtype enum)] of a signature, by name: tfnmt exports take string
        vectors, one (`text`) or two (the `score` and `prefix` signatures)."""
        signature_name = signature_name or DEFAULT_SIGNATURE
        definition = self.signature_defs.get(signature_name)
        if definition is None or signature_name == _INIT_OP_SIGNATURE:
            raise invalid_argument(f'Serving signature name: "{signature_name}" not found in signature def')
        return sorted((name, info.dtype) for name, info in definition.inputs.items())

    def _function(self, signature_name):
        function = self._functions.get(signature_name)
        if function is None:
            function = self._functions[signature_name] = self._module.signatures[signature_name]
        return function

    def _call(self, signature_name, items):
        """`items`: strings for a signature of one input; tuples of strings, in the order of
        `input_spec`'s names, for one of several."""
        names = [name for name, _ in self.input_spec(signature_name)]
        columns = [items] if len(names) == 1 else [list(column) for column in zip(*items)]
        try:
            outputs = self._function(signature_name)(
                **{name: tf.constant(column, tf.string) for name, column in zip(names, columns)})
        except tf.errors.InvalidArgumentError as e:
            raise invalid_argument(str(e).splitlines()[0]) from None
        return {key: value.numpy() for key, value in outputs.items()}

    def predict(self, signature_name, texts, timeout=None):
        """{output name: numpy array [len(texts)]}; `texts` as `_call` takes them."""
        signature_name = signature_name or DEFAULT_SIGNATURE
        self.input_spec(signature_name)
        if self._batching is None:
            return self._call(signature_name, texts)
        with self._lock:
            batcher = self._batchers.get(signature_name)
            if batcher is None:
                batcher = self._batchers[signature_name] = Batcher(
                    lambda batch: self._call(signature_name, batch),
                    self._batching, name=f"{self.name}-{self.version}")
        return batcher.submit(texts, timeout)

    def close(self):
        with self._lock:
            for batcher in self._batchers.values():
                batcher.close()


class ModelManager:
    """The served models: from a list of ModelSource, or every model under an export directory
    (new model names appearing there are served too)."""

    def __init__(self, sources=(), export_dir=None, batching=None):
        self._sources = {s.name: s for s in sources}
        self._export_dir = export_dir
        self._batching = batching
        self._servables = {}   # name -> {version: Servable}
        self._states = {}      # name -> {version: (state, error_code, error_message)}
        self._failed = {}      # (name, version) -> files_signature when it failed to load
        self._ignored = {}     # (name, version) -> why it is no SavedModel (logged once)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    # --- what is served ---------------------------------------------------------------------
    def get(self, name, version=None):
        with self._lock:
            versions = self._servables.get(name, {})
            if version is None:
                if versions:
                    return versions[max(versions)]
                raise not_found(f"Servable not found for request: Latest({name})")
            if version in versions:
                return versions[version]
        raise not_found(f"Servable not found for request: Specific({name}, {version})")

    def status(self, name, version=None):
        """[(version, state, error_code, error_message)], newest first."""
        with self._lock:
            states = dict(self._states.get(name, {}))
        if version is not None:
            if version not in states:
                raise not_found(f"Could not find version {version} of model {name}")
            return [(version, *states[version])]
        if not states:
            raise not_found(f"Could not find any versions of model {name}")
        return [(v, *states[v]) for v in sorted(states, reverse=True)]

    def names(self):
        with self._lock:
            return sorted(name for name, versions in self._servables.items() if versions)

    def _loaded(self, name):
        with self._lock:
            return set(self._servables.get(name, {}))

    # --- keeping it current -----------------------------------------------------------------
    def _discover(self):
        if self._export_dir is None:
            return list(self._sources.values())
        try:
            names = sorted(os.listdir(self._export_dir))
        except OSError as e:
            raise ConfigError(f"cannot list --export_dir {self._export_dir}: {e.strerror}") from None
        for name in names:
            path = os.path.join(self._export_dir, name)
            if name not in self._sources and not name.startswith(".") and version_dirs(path):
                self._sources[name] = ModelSource(name, path)
        return list(self._sources.values())

    def _candidates(self, name, present):
        """{version: path} of the versions the policy may choose from: SavedModels, less those
        that failed to load and have not changed since."""
        candidates = {}
        for version, path in present.items():
            key = (name, version)
            problem = not_a_saved_model(path)
            if problem:
                if self._ignored.get(key) != problem:
                    logging.warning("%s version %d: %s %s; ignored", name, version, path, problem)
                    self._ignored[key] = problem
                continue
            self._ignored.pop(key, None)
            if key in self._failed and self._failed[key] == files_signature(path):
                continue
            candidates[version] = path
        return candidates

    def poll(self):
        """One pass over the sources; returns the load errors of this pass, (name, message)."""
        errors = []
        for source in self._discover():
            candidates = self._candidates(source.name, version_dirs(source.base_path))
            # Load what the policy aspires to; when a version fails, ask the policy again
            # without it, so that e.g. `latest` falls back to the newest version that loads.
            while True:
                aspired = set(source.aspired(candidates))
                missing = sorted(aspired - self._loaded(source.name), reverse=True)
                if not missing:
                    break
                for version in missing:
                    error = self._load(source.name, version, candidates[version])
                    if error:
                        errors.append((source.name, error))
                        del candidates[version]
            # Only now, with the new versions available, unload the others.
            for version in self._loaded(source.name) - aspired:
                self._unload(source.name, version)
        return errors

    def _set_state(self, name, version, state, code="OK", message=""):
        with self._lock:
            self._states.setdefault(name, {})[version] = (state, code, message)

    def _load(self, name, version, path):
        signature = files_signature(path)  # before loading: a change during the load counts
        self._set_state(name, version, "LOADING")
        logging.info("loading %s version %d from %s", name, version, path)
        try:
            servable = Servable(name, version, path, self._batching)
        except Exception as e:  # whatever a bad version raises, the served ones stay served
            if isinstance(e, (LoadError, ServingError)):
                code, message = e.code, str(e)
            else:
                code, message = _error_code(e), f"cannot load {path}: {type(e).__name__}: {e}"
            self._failed[(name, version)] = signature
            self._set_state(name, version, "END", code, message)
            logging.error("%s version %d failed to load: %s (tried again when its files change)",
                          name, version, message)
            return f"{name} version {version}: {message}"
        self._failed.pop((name, version), None)
        with self._lock:
            self._servables.setdefault(name, {})[version] = servable
            self._states[name][version] = ("AVAILABLE", "OK", "")
        logging.info("serving %s version %d", name, version)
        return None

    def _unload(self, name, version):
        with self._lock:
            servable = self._servables[name].pop(version)
            self._states[name][version] = ("END", "OK", "")
        servable.close()
        del servable  # requests still holding it keep its memory until they end
        runtime.return_freed_memory()
        logging.info("unloaded %s version %d", name, version)

    def start(self, poll_seconds):
        """Loads every model, then polls for new versions every `poll_seconds` (0: never). A
        model with nothing to serve is an error (the server does not start half-configured); a
        broken version with an older one to fall back on is not (it shows in the status)."""
        errors = self.poll()
        sources = list(self._sources.values())
        fatal = [error for name, error in errors if not self._loaded(name)]
        if fatal:
            raise ConfigError("cannot serve " + "; ".join(fatal))
        if not self.names():
            where = self._export_dir or ", ".join(s.base_path for s in sources)
            ignored = "".join(f"; {self._sources[n].base_path}/{v} {why}"
                              for (n, v), why in sorted(self._ignored.items()))
            raise ConfigError(f"no model version to serve under {where} (expected NAME/VERSION/"
                              f"saved_model.pb, as `tfnmt export` writes){ignored}")
        if poll_seconds > 0:
            self._thread = threading.Thread(target=self._poll_loop, args=(poll_seconds,),
                                            name="version-poller", daemon=True)
            self._thread.start()

    def _poll_loop(self, seconds):
        while not self._stop.wait(seconds):
            try:
                self.poll()
            except Exception:  # keep serving what is loaded whatever the file system does
                logging.exception("polling the model directories failed")

    def close(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            servables = [s for versions in self._servables.values() for s in versions.values()]
        for servable in servables:
            servable.close()

