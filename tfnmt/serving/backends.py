"""The one factory of translation backends (decoding/backend.py): from where a model is (a
model directory's checkpoint, an export, a server) to the backend that translates with it.
It sits at the serving layer because it opens every kind: checkpoints (training/), exports
(exporters/) and served models (serving/client.py)."""

import os
from typing import Any, NamedTuple

from absl import logging

from tfnmt.decoding.options import DecodingOptions
from tfnmt.errors import ConfigError
from tfnmt.serving.options import ClientOptions, ExportedModelOptions


def from_checkpoint(model_dir, checkpoint="", options=DecodingOptions()):
    """(config, Translator) of `model_dir`'s `checkpoint` ('' latest, 'best' or a path).

    Several model directories or checkpoints (lists, paired in order; a list of one is paired
    with each of the other's) are decoded as one ensemble (decoding/ensemble.py), whose config
    names its members."""
    import keras

    from tfnmt.decoding.ensemble import Ensemble
    from tfnmt.decoding.translator import Translator
    # Translation runs in float32 whatever precision trained the (float32) weights, so that
    # in-process and exported translations agree.
    keras.mixed_precision.set_global_policy("float32")
    members = [_restored(path, which) for path, which in _paired(model_dir, checkpoint)]
    first = members[0]
    if len(members) == 1:
        table = _shortlist_table(first) if options.shortlist else None
        return first.config, Translator(first.model, first.source_vocab, first.target_vocab,
                                        options, table)
    if options.shortlist:
        raise ConfigError("--shortlist: not for an ensemble (its members' output layers differ)")
    for other in members[1:]:
        if (other.source_vocab.proto, other.target_vocab.proto) != (
                first.source_vocab.proto, first.target_vocab.proto):
            raise ConfigError(f"{other.record['model_dir']}: its vocabularies differ from those "
                              f"of {first.record['model_dir']}; the members of an ensemble "
                              "share one source and one target vocabulary")
    ensemble = Ensemble([member.model for member in members])
    config = {"model": ensemble.registry_name, "data": first.config.get("data"),
              "members": [member.record for member in members]}
    return config, Translator(ensemble, first.source_vocab, first.target_vocab, options)


def _paired(model_dirs, checkpoints):
    """[(model directory, checkpoint)] of the two (each a str or a list)."""
    model_dirs = [model_dirs] if isinstance(model_dirs, str) else list(model_dirs)
    checkpoints = [checkpoints] if isinstance(checkpoints, str) else list(checkpoints)
    if not model_dirs:
        raise ConfigError("--model_dir is required")
    if len(model_dirs) == 1:
        model_dirs *= len(checkpoints)
    if len(checkpoints) == 1:
        checkpoints *= len(model_dirs)
    if len(model_dirs) != len(checkpoints):
        raise ConfigError(f"--checkpoint: {len(checkpoints)} checkpoints for {len(model_dirs)} "
                          "model directories; give one for all or one for each")
    return [(path, which or "") for path, which in zip(model_dirs, checkpoints)]


def _shortlist_table(member):
    return shortlist_table(member.record["model_dir"], member.config, member.source_vocab,
                           member.target_vocab)


def shortlist_table(model_dir, config, source_vocab, target_vocab):
    """The vocabulary shortlist's table of a model (decoding/shortlist.py), from its training
    data as its config records it, kept in its model directory."""
    from tfnmt.data import sources
    from tfnmt.decoding import shortlist
    recorded = config.get("data") or {}
    if not recorded.get("data"):
        raise ConfigError("--shortlist: the model's config records no training data to build "
                          "the table from")
    spec = sources.DataSpec(recorded["data"], recorded["source_lang"], recorded["target_lang"])
    return shortlist.from_data(spec, sources.default_splits(spec)[0], source_vocab,
                               target_vocab, os.path.join(model_dir, shortlist.CACHE_FILE))


class _Member(NamedTuple):
    config: dict
    model: Any
    source_vocab: Any
    target_vocab: Any
    record: dict  # what an ensemble's config says of it: model_dir, checkpoint, config


def _restored(model_dir, checkpoint):
    from tfnmt import model_dir as model_dir_lib
    from tfnmt.training import checkpoints
    config, model, source_vocab, target_vocab = model_dir_lib.load(model_dir)
    path = checkpoints.restore(model, model_dir, checkpoint)
    logging.info("restored %s", path)
    return _Member(config, model, source_vocab, target_vocab,
                   {"model_dir": model_dir, "checkpoint": path, "config": config})


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


def check_scorable(export=ExportedModelOptions(), client=ClientOptions()):
    """Refuses an export or a served model that has no `score` signature, as far as that is
    known without loading it (a served model's metadata, an export's record of its
    signatures), so that a command refuses before it reads its files. A checkpoint passes: its
    model is checked with the sentences (the backend's `check_scorable`)."""
    if client.server:
        from_server(client)[1].check_scorable([], "")
    elif export.saved_model:
        from tfnmt.exporters import saved_model, tflite
        if os.path.isfile(os.path.join(export.saved_model, tflite.MODEL_FILE)):
            raise ConfigError(f"score: {export.saved_model} is a TFLite export, which gives "
                              "translations only; score with a SavedModel exported with --score "
                              "or with the model directory")
        saved_model.check_recorded_score(export.saved_model)


def open_backend(*, model_dir="", checkpoint="", options=None,
                 export=ExportedModelOptions(), client=ClientOptions()):
    """(config or None, backend): `client.server` if given, else `export.saved_model`, else
    `model_dir`'s `checkpoint` ('' latest; lists of either: an ensemble, `from_checkpoint`)
    decoded with `options` (DecodingOptions)."""
    if client.server:
        if export.saved_model or model_dir:
            raise ConfigError("--server translates with a served model: drop --saved_model/--model_dir")
        return from_server(client)
    if export.saved_model:
        return from_export(export.saved_model, export.signature)
    if not model_dir:
        raise ConfigError("--model_dir is required")
    return from_checkpoint(model_dir, checkpoint, options or DecodingOptions())
