"""What several commands need from the flags: output checks, the data spec and splits, the
decoding and training options, and the translation backend (serving/backends.py)."""

import os

from tfnmt.cli.flags import FLAGS, read
from tfnmt.data import sources
from tfnmt.decoding.options import DecodingOptions
from tfnmt.errors import ConfigError, OutputError
from tfnmt.serving import backends


def require(*names):
    for name in names:
        if not FLAGS[name].value:
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


def data_spec(config=None):
    """The data flags; a trained model's recorded data settings fill in the defaults."""
    recorded = (config or {}).get("data", {})

    def pick(name):
        return FLAGS[name].value if FLAGS[name].present or name not in recorded else recorded[name]
    return sources.DataSpec(pick("data"), pick("source_lang"), pick("target_lang"),
                            FLAGS.manual_dir, FLAGS.tfds_data_dir)


def splits(spec):
    train, valid, test = sources.default_splits(spec)
    return (FLAGS.train_split or train, FLAGS.valid_split or valid, FLAGS.test_split or test)


def decode_options():
    return read(DecodingOptions)


def load_translator():
    """(config, Translator) from --model_dir's --checkpoint, with the decoding flags."""
    require("model_dir")
    return backends.from_checkpoint(FLAGS.model_dir, FLAGS.checkpoint, decode_options())


def translator_from_flags():
    """(config or None, backend) from --server, --saved_model, else --model_dir's checkpoint."""
    return backends.open_backend(
        model_dir=FLAGS.model_dir, checkpoint=FLAGS.checkpoint,
        options=None if FLAGS.server or FLAGS.saved_model else decode_options(),
        saved_model=FLAGS.saved_model, signature=FLAGS.signature, server=FLAGS.server,
        served_model=FLAGS.served_model, model_version=FLAGS.model_version,
        server_retries=FLAGS.server_retries, server_timeout=FLAGS.server_timeout)


def train_options():
    """The TrainOptions the flags give: what `train` trains with and `bench --bench=train` times."""
    from tfnmt.training.options import TrainOptions
    return read(TrainOptions)
