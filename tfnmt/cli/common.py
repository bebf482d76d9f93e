"""What several commands need: output checks, the data spec and splits, and where translations
come from (serving/backends.py, wrapped in tfnmt.Translator), from the options the verb read
from the flags (cli/flags.py `read`)."""

import dataclasses
import os

from tfnmt.api import Translator
from tfnmt.cli.flags import given, read, read_fields
from tfnmt.cli.options import ModelDirOptions
from tfnmt.data import sources
from tfnmt.data.options import DataOptions
from tfnmt.decoding.options import DecodingOptions
from tfnmt.errors import ConfigError, OutputError
from tfnmt.serving import backends
from tfnmt.serving.options import ClientOptions, ExportedModelOptions


def require(**values):
    """Refuses a required setting left empty: `require(model_dir=where.model_dir)`."""
    for name, value in values.items():
        if not value:
            raise ConfigError(f"--{name} is required")


def check_output_dir(path, flag):
    """Before any work: refuses a directory --FLAG that cannot be created or written (a file in
    the way, no permission)."""
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise OutputError(f"--{flag}={path}: {existing} is a file, not a directory; choose "
                          f"another --{flag}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"--{flag}={path}: {existing} is not writable; choose another --{flag}")


def check_output_file(path, flag="output"):
    """Before any work: refuses a file --FLAG that cannot be written (its directory missing or
    not writable, or it is a directory)."""
    if os.path.isdir(path):
        raise OutputError(f"--{flag}={path} is a directory; name a file")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        problem = "is a file, not a directory" if os.path.exists(parent) else "does not exist"
        raise OutputError(f"--{flag}={path}: {parent} {problem}; create the directory or "
                          f"choose another --{flag}")
    if not os.access(parent, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise OutputError(f"--{flag}={path} is not writable; choose another --{flag}")


def data_spec(data, config=None):
    """The data source of `data` (DataOptions); a trained model's recorded data settings fill in
    those the user did not set."""
    recorded = (config or {}).get("data", {})
    chosen = given(DataOptions)

    def pick(name):
        return getattr(data, name) if name in chosen or name not in recorded else recorded[name]
    return sources.DataSpec(pick("data"), pick("source_lang"), pick("target_lang"),
                            data.manual_dir, data.tfds_data_dir)


def splits(data, spec):
    """(train, validation, test) split names: `data`'s (DataOptions), else the source's."""
    train, valid, test = sources.default_splits(spec)
    return (data.train_split or train, data.valid_split or valid, data.test_split or test)


def members(where):
    """([model directory], [checkpoint]) of `where` (ModelDirOptions): several of either,
    comma-separated, are an ensemble (serving/backends.py from_checkpoint pairs them)."""
    return where.model_dir.split(",") if where.model_dir else [], where.checkpoint.split(",")


def is_ensemble(where):
    return any(len(names) > 1 for names in members(where))


def load_translator(where, decoding):
    """(config, Translator) from `where` (ModelDirOptions): its --model_dir's --checkpoint
    (several: an ensemble), decoded with `decoding` (DecodingOptions)."""
    require(model_dir=where.model_dir)
    return backends.from_checkpoint(*members(where), decoding)


@dataclasses.dataclass(frozen=True)
class TranslatorSource:
    """Where translations come from, as the flags give it: --server (`client`), else
    --saved_model (`export`), else `where`'s checkpoint decoded with `decoding` (None with an
    export or a server, whose decoding was fixed when it was exported)."""
    where: ModelDirOptions
    export: ExportedModelOptions
    client: ClientOptions
    decoding: DecodingOptions = None

    @property
    def name(self):
        return self.client.server or self.export.saved_model or self.where.model_dir


def translator_source(decoding_fields=None):
    """The TranslatorSource the flags give; the decoding flags (those named in
    `decoding_fields` if given, the others at their defaults) are read with a checkpoint only."""
    export, client = read(ExportedModelOptions), read(ClientOptions)
    decoding = None
    if not client.server and not export.saved_model:
        decoding = (read(DecodingOptions) if decoding_fields is None
                    else DecodingOptions(**read_fields(DecodingOptions, decoding_fields)))
    return TranslatorSource(read(ModelDirOptions), export, client, decoding)


def open_backend(source):
    """(config or None, backend) of a TranslatorSource."""
    model_dirs, checkpoints = members(source.where)
    return backends.open_backend(model_dir=model_dirs, checkpoint=checkpoints,
                                 options=source.decoding,
                                 export=source.export, client=source.client)


def open_translator(source):
    """(config or None, tfnmt.Translator) of a TranslatorSource: the Python API's object, which
    the verbs that translate or score go through."""
    config, backend = open_backend(source)
    return config, Translator(backend, config, source.decoding, where=source.name)
