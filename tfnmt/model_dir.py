"""A model directory: what was trained, with which vocabulary, and its checkpoints.

    MODEL_DIR/
      config.json          model name, hyper-parameters, vocabulary sizes, data it was trained on
      spm.model            joint SentencePiece model (or spm.source.model + spm.target.model)
      ckpt/                the last checkpoints (every --save_every steps)
      best/                the best checkpoints by validation loss, with best.json
      logs/                TensorBoard scalars
"""

import os

from tfnmt import json_files
from tfnmt.data.vocab import load_vocabs
from tfnmt.errors import ConfigError, cannot_write
from tfnmt.models import catalog

CONFIG_FILE = "config.json"


def config_path(model_dir):
    return os.path.join(model_dir, CONFIG_FILE)


def read_config(model_dir):
    path = config_path(model_dir)
    if not os.path.isfile(path):
        raise ConfigError(f"{model_dir} holds no trained model ({CONFIG_FILE} missing): "
                          "run `tfnmt train` first")
    return catalog.upgrade(json_files.read(path))


def write_config(model_dir, config):
    try:
        os.makedirs(model_dir, exist_ok=True)
        json_files.write(config_path(model_dir), config, indent=2, sort_keys=True)
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
