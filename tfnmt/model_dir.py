"""A model directory: what was trained, with which vocabulary, and its checkpoints.

    MODEL_DIR/
      config.json          its format, model name, hyper-parameters, vocabulary sizes, data it
                           was trained on (older formats: formats.py)
      spm.model            joint SentencePiece model (or spm.source.model + spm.target.model)
      ckpt/                the last checkpoints (every --save_every steps)
      best/                the best checkpoints by validation loss, with best.json
      logs/                TensorBoard scalars
"""

import os

from tfnmt import formats, json_files
from tfnmt.data.vocab import load_vocabs
from tfnmt.errors import ConfigError, cannot_write
from tfnmt.models import catalog

CONFIG_FILE = "config.json"


def config_path(model_dir):
    return os.path.join(model_dir, CONFIG_FILE)


def read_config(model_dir):
    """config.json's contents in today's format (whatever format it was written in)."""
    return upgrade(read_raw_config(model_dir))


def read_raw_config(model_dir):
    path = config_path(model_dir)
    if not os.path.isfile(path):
        raise ConfigError(f"{model_dir} holds no trained model ({CONFIG_FILE} missing): "
                          "run `tfnmt train` first")
    config = json_files.read(path)
    if not isinstance(config, dict) or type(config_format(config)) is not int:
        raise ConfigError(f"{path} is not a tfnmt config (no whole-number \"format\"); "
                          "train anew or restore the file")
    if config_format(config) > formats.CONFIG_FORMAT:
        raise ConfigError(f"{path} is in format {config_format(config)}, written by a newer "
                          f"tfnmt than this one (which reads formats 1 to "
                          f"{formats.CONFIG_FORMAT}): upgrade tfnmt")
    return config


def config_format(config):
    return config.get("format", 1)


def upgrade(config):
    """A config (config.json's contents) in today's format: the renamed hyper-parameters under
    their new names, the added ones at the values it was trained with (formats.py)."""
    if config_format(config) >= formats.CONFIG_FORMAT:
        return config
    cls = catalog.MODELS.get(config.get("model"))
    if cls is None:  # catalog.get names the known models when it is built
        return config
    hparams = renamed(cls, config["hparams"])
    declared = cls.declared(hparams)
    added = {k: v for k, v in formats.ADDED_HPARAMS.items() if k in declared and k not in hparams}
    return dict(config, format=formats.CONFIG_FORMAT, hparams=dict(added, **hparams))


def renamed(cls, hparams):
    """`hparams` (of model class `cls`) with each renamed hyper-parameter (formats.py) under its
    new name where the model declares it; where the model declares the old name too, the old
    value goes to both."""
    hparams = dict(hparams)
    declared = cls.declared(hparams)
    for old, new in formats.RENAMED_HPARAMS.items():
        if old in hparams and new in declared and new not in hparams:
            hparams[new] = hparams[old] if old in declared else hparams.pop(old)
    return hparams


def write_config(model_dir, config):
    """Writes `config` (today's: new_config's, or read_config's of an older one) in today's
    format."""
    try:
        os.makedirs(model_dir, exist_ok=True)
        json_files.write(config_path(model_dir), dict(config, format=formats.CONFIG_FORMAT),
                         indent=2, sort_keys=True)
    except OSError as e:
        raise cannot_write(config_path(model_dir), e, "choose another --model_dir") from None


def new_config(model_name, hparams, source_vocab, target_vocab, data):
    return {"model": model_name, "hparams": hparams, "source_vocab_size": source_vocab.size,
            "target_vocab_size": target_vocab.size, "data": data}


def check_compatible(saved, requested):
    """A resumed run must not silently change the architecture it resumes."""
    if saved["model"] != requested["model"]:
        raise ConfigError(f"model_dir holds a {saved['model']!r} model, not {requested['model']!r}; "
                          "use a new --model_dir")
    for name, value in requested["hparams"].items():
        if saved["hparams"].get(name) != value:
            raise ConfigError(f"model_dir was trained with --{name}={saved['hparams'].get(name)}, "
                              f"not {value}; use a new --model_dir to change the architecture")
    for key in ("source_vocab_size", "target_vocab_size"):
        if saved[key] != requested[key]:
            raise ConfigError(f"the vocabulary changed since training ({key} {saved[key]} -> "
                              f"{requested[key]}); use a new --model_dir")


def load(model_dir):
    """(config, model with fresh weights, source vocab, target vocab)."""
    config = read_config(model_dir)
    source_vocab, target_vocab = load_vocabs(model_dir)
    return config, catalog.build(config), source_vocab, target_vocab
