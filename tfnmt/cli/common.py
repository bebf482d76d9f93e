"""What several commands need from the flags: the data spec, the decoding options, a model."""

import os

import keras
from absl import logging

from tfnmt import model_dir as model_dir_lib
from tfnmt.cli.flags import FLAGS, read
from tfnmt.data import sources
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.translator import Translator
from tfnmt.errors import ConfigError, DataError, OutputError
from tfnmt.training import checkpoints


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
    """A Translator from --model_dir's --checkpoint, with the decoding flags."""
    require("model_dir")
    # Translation runs in float32 whatever precision trained the (float32) weights, so that
    # in-process and exported translations agree.
    keras.mixed_precision.set_global_policy("float32")
    config, model, source_vocab, target_vocab = model_dir_lib.load(FLAGS.model_dir)
    path = checkpoints.resolve(FLAGS.model_dir, FLAGS.checkpoint)
    checkpoints.restore_model(model, path)
    logging.info("restored %s", path)
    return config, Translator(model, source_vocab, target_vocab, decode_options())


def check_long_inputs(translator, sentences, where):
    """Sources longer than the model's source window (conv_encoder's k̄): logged as translated
    in chunks, or, with --long_input=error, refused with the first one's line number. Only an
    in-process translator has the tokenizer at hand; an export refuses them in-graph."""
    if hasattr(translator, "name_lines"):  # a served model: the server's limit is known later
        translator.name_lines(sentences, where)
    window = getattr(getattr(translator, "model", None), "source_window", None)
    if not window or not sentences:
        return
    import tensorflow as tf
    lengths = translator.source_tokenizer.tokenize(tf.constant(sentences)).row_lengths().numpy()
    lengths = [min(int(n), translator.max_input_length) for n in lengths]
    long = [number for number, n in enumerate(lengths, start=1) if n > window - 1]
    if not long:
        return
    if translator.long_input == "error":
        raise DataError(f"{where}:{long[0]}: {lengths[long[0] - 1]} subwords; the model reads at "
                        f"most {window - 1} (--source_window={window} with eos) and "
                        f"--long_input=error ({len(long)} such line(s)); --long_input=chunk "
                        "translates them in pieces")
    shown = ", ".join(str(n) for n in long[:10]) + (", ..." if len(long) > 10 else "")
    logging.info("%s: %d of %d sources are longer than the source window of the model (%d "
                 "subwords and eos) and are translated in chunks: line(s) %s", where, len(long),
                 len(sentences), window - 1, shown)


def translator_from_flags():
    """(config or None, translator) from --server, --saved_model, else --model_dir's checkpoint."""
    if FLAGS.server:
        if FLAGS.saved_model or FLAGS.model_dir:
            raise ConfigError("--server translates with a served model: drop --saved_model/--model_dir")
        from tfnmt.serving.client import RemoteTranslator, ServingClient
        client = ServingClient(FLAGS.server, FLAGS.model, FLAGS.model_version,
                               retries=FLAGS.server_retries, timeout=FLAGS.server_timeout)
        return None, RemoteTranslator(client)
    if FLAGS.saved_model:
        from tfnmt.export import saved_model, tflite
        if os.path.isfile(os.path.join(FLAGS.saved_model, tflite.MODEL_FILE)):
            translator = tflite.TFLiteTranslator(FLAGS.saved_model)
        else:
            translator = saved_model.SavedModelTranslator(FLAGS.saved_model, FLAGS.signature)
        return translator.config, translator
    return load_translator()


def train_options():
    """The TrainOptions the flags give: what `train` trains with and `bench --bench=train` times."""
    from tfnmt.training.options import TrainOptions
    return read(TrainOptions)
