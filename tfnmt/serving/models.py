"""Which models and versions `tfnmt serve` serves, kept current by polling their directories.

Each model is a directory of numbered version directories (`tfnmt export` writes
DIR/NAME/VERSION, atomically). Like TF Serving's file-system source, every
--file_system_poll_wait_seconds the manager lists them, loads the versions its policy aspires
to (by default the newest) and only then unloads the others, so a model stays available while a
new version rolls in. A version that fails to load is reported in the model status (state END,
with the error) and the previous one keeps serving.
"""

import os
import threading

import tensorflow as tf
from absl import logging
from tensorflow.core.protobuf import saved_model_pb2

from tfnmt.errors import ConfigError
from tfnmt.serving.batching import Batcher
from tfnmt.serving.config import ModelSource
from tfnmt.serving.status import ServingError, invalid_argument, not_found

DEFAULT_SIGNATURE = "serving_default"
_INIT_OP_SIGNATURE = "__saved_model_init_op"


class LoadError(Exception):
    pass


def version_dirs(base_path):
    """{version: path} of the numbered directories under a model's base path."""
    try:
        names = os.listdir(base_path)
    except OSError:
        return {}
    return {int(n): os.path.join(base_path, n) for n in names
            if n.isdigit() and os.path.isdir(os.path.join(base_path, n))}


def _signature_defs(path):
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    for meta_graph in proto.meta_graphs:
        if "serve" in meta_graph.meta_info_def.tags:
            return dict(meta_graph.signature_def)
    raise LoadError("the SavedModel has no MetaGraph tagged 'serve'")


class Servable:
    """One loaded version of one model: its signatures, and a batcher per signature."""

    def __init__(self, name, version, path, batching=None):
        self.name, self.version, self.path = name, version, path
        if not os.path.isfile(os.path.join(path, "saved_model.pb")):
            if os.path.isfile(os.path.join(path, "model.tflite")):
                raise LoadError(f"{path} holds a TFLite model: TF Serving and tfnmt serve serve "
                                "SavedModels only (tfnmt export --format=saved_model)")
            raise LoadError(f"no saved_model.pb in {path}")
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the graph uses)
        self.signature_defs = _signature_defs(path)
        try:
            self._module = tf.saved_model.load(path, tags=["serve"])
        except Exception as e:  # TensorFlow raises many types for unloadable models
            raise LoadError(f"cannot load {path}: {str(e).splitlines()[0]}") from None
        self._functions = {}
        self._batching = batching
        self._batchers = {}
        self._lock = threading.Lock()
        if DEFAULT_SIGNATURE in self.signature_defs:
            # The first call of a graph pays for its optimisation; pay it before serving.
            self.input_spec(DEFAULT_SIGNATURE)
            self._call(DEFAULT_SIGNATURE, ["a"])

    def input_spec(self, signature_name):
        """(input name, input dtype enum) of a signature: tfnmt exports take one string vector."""
        signature_name = signature_name or DEFAULT_SIGNATURE
        definition = self.signature_defs.get(signature_name)
        if definition is None or signature_name == _INIT_OP_SIGNATURE:
            raise invalid_argument(f'Serving signature name: "{signature_name}" not found in signature def')
        inputs = dict(definition.inputs)
        if len(inputs) != 1:
            raise invalid_argument(f"signature {signature_name} takes {len(inputs)} inputs; "
                                   "tfnmt serve serves signatures with one (a string vector)")
        (name, info), = inputs.items()
        return name, info.dtype

    def _function(self, signature_name):
        function = self._functions.get(signature_name)
        if function is None:
            function = self._functions[signature_name] = self._module.signatures[signature_name]
        return function

    def _call(self, signature_name, texts):
        name, _ = self.input_spec(signature_name)
        try:
            outputs = self._function(signature_name)(**{name: tf.constant(texts, tf.string)})
        except tf.errors.InvalidArgumentError as e:
            raise invalid_argument(str(e).splitlines()[0]) from None
        return {key: value.numpy() for key, value in outputs.items()}

    def predict(self, signature_name, texts, timeout=None):
        """{output name: numpy array [len(texts)]}."""
        signature_name = signature_name or DEFAULT_SIGNATURE
        self.input_spec(signature_name)
        if self._batching is None:
            return self._call(signature_name, texts)
        with self._lock:
            batcher = self._batchers.get(signature_name)
            if batcher is None:
                batcher = self._batchers[signature_name] = Batcher(
                    lambda batch: self._call(signature_name, batch),
                    name=f"{self.name}-{self.version}", **self._batching)
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
        self._failed = set()   # (name, version) that failed to load: not retried
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
            return sorted(self._servables)

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

    def poll(self):
        """One pass over the sources; returns the load errors of this pass."""
        errors = []
        for source in self._discover():
            present = version_dirs(source.base_path)
            aspired = source.aspired(present)
            with self._lock:
                loaded = set(self._servables.get(source.name, {}))
            for version in sorted(set(aspired) - loaded, reverse=True):
                if (source.name, version) in self._failed:
                    continue
                error = self._load(source.name, version, present[version])
                if error:
                    errors.append(error)
            for version in loaded - set(aspired):
                self._unload(source.name, version)
        return errors

    def _set_state(self, name, version, state, code="OK", message=""):
        with self._lock:
            self._states.setdefault(name, {})[version] = (state, code, message)

    def _load(self, name, version, path):
        self._set_state(name, version, "LOADING")
        logging.info("loading %s version %d from %s", name, version, path)
        try:
            servable = Servable(name, version, path, self._batching)
        except (LoadError, ServingError) as e:
            message = str(e)
            self._failed.add((name, version))
            self._set_state(name, version, "END", "UNKNOWN", message)
            logging.error("%s version %d failed to load: %s", name, version, message)
            return f"{name} version {version}: {message}"
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
        logging.info("unloaded %s version %d", name, version)

    def start(self, poll_seconds):
        """Loads every model (a failure is an error: the server does not start half-configured),
        then polls for new versions every `poll_seconds` (0: never)."""
        errors = self.poll()
        if errors:
            raise ConfigError("cannot serve " + "; ".join(errors))
        if not self.names():
            where = self._export_dir or ", ".join(s.base_path for s in self._sources.values())
            raise ConfigError(f"no model version to serve under {where} (expected NAME/VERSION/"
                              "saved_model.pb, as `tfnmt export` writes)")
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

