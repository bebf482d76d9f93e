"""The one factory of translation backends (decoding/backend.py): from where a model is (a
model directory's checkpoint, an export, a server) to the backend that translates with it.
It sits at the serving layer because it opens every kind: checkpoints (training/), exports
(exporters/) and served models (serving/client.py)."""

import os

from absl import logging

from tfnmt.decoding.options import DecodingOptions
from tfnmt.errors import ConfigError
from tfnmt.serving.options import ClientOptions, ExportedModelOptions


def from_checkpoint(model_dir, checkpoint="", options=DecodingOptions()):
    """(config, Translator) of `model_dir`'s `checkpoint` ('' latest, 'best' or a path)."""
    import keras

    from tfnmt import model_dir as model_dir_lib
    from tfnmt.decoding.translator import Translator
    from tfnmt.training import checkpoints
    # Translation runs in float32 whatever precision trained the (float32) weights, so that
    # in-process and exported translations agree.
    keras.mixed_precision.set_global_policy("float32")
    config, model, source_vocab, target_vocab = model_dir_lib.load(model_dir)
    path = checkpoints.restore(model, model_dir, checkpoint)
    logging.info("restored %s", path)
    return config, Translator(model, source_vocab, target_vocab, options)


def from_export(path, signature):
    """(config or None, backend) of an export DIR/NAME/VERSION: a TFLite flatbuffer or a
    SavedModel, through `signature`."""
    from tfnmt.exporters import saved_model, tflite
    if os.path.isfile(os.path.join(path, tflite.MODEL_FILE)):
        backend = tflite.TFLiteTranslator(path)
    else:
        backend = saved_model.SavedModelTranslator(path, signature)
    return backend.config, backend


def from_server(client):
    """(None, backend) of the model `client` (ClientOptions) names, served at its URL (TF
    Serving or `tfnmt serve`)."""
    from tfnmt.serving.client import RemoteTranslator, ServingClient
    return None, RemoteTranslator(ServingClient(client.server, client.served_model,
                                                client.model_version,
                                                retries=client.server_retries,
                                                timeout=client.server_timeout))


def open_backend(*, model_dir="", checkpoint="", options=None,
                 export=ExportedModelOptions(), client=ClientOptions()):
    """(config or None, backend): `client.server` if given, else `export.saved_model`, else
    `model_dir`'s `checkpoint` ('' latest) decoded with `options` (DecodingOptions)."""
    if client.server:
        if export.saved_model or model_dir:
            raise ConfigError("--server translates with a served model: drop --saved_model/--model_dir")
        return from_server(client)
    if export.saved_model:
        return from_export(export.saved_model, export.signature)
    if not model_dir:
        raise ConfigError("--model_dir is required")
    return from_checkpoint(model_dir, checkpoint, options or DecodingOptions())
