"""tfnmt info: the registered models, or a model's parameter count by component."""

import os

from tfnmt import model_dir as model_dir_lib
from tfnmt.cli import hparams
from tfnmt.cli.flags import read
from tfnmt.cli.options import ModelDirOptions, ModelOptions
from tfnmt.data.options import VocabOptions
from tfnmt.models import catalog

COMPONENTS = ("embeddings", "encoder", "decoder", "output")


def component(path, owner=None):
    """embeddings / encoder / decoder / output from a variable path like
    'transformer/encoder_layer_0/...', else the part (`owner`: encoder or decoder) that holds it."""
    top = path.split("/")[1] if "/" in path else path
    if "embedding" in top:
        return "embeddings"
    for name in ("encoder", "decoder", "output"):
        if top.startswith(name):
            return name
    return owner or "other"


def parameter_counts(model):
    # A part's layers keep the model's paths (layers/part.py), so a layer named for what it does
    # (the CTC decoder's splitter) is counted by the part that holds it.
    owners = {}
    for part in ("decoder", "encoder"):
        for variable in getattr(getattr(model, part, None), "weights", ()):
            owners[id(variable)] = part
    counts = dict.fromkeys(COMPONENTS + ("other",), 0)
    for variable in model.trainable_weights:  # shared variables appear once
        counts[component(variable.path, owners.get(id(variable)))] += int(variable.numpy().size)
    counts["total"] = sum(counts.values())
    return counts


def run():
    """A trained model's counts (--model_dir), or those of a flagfile's model before training,
    with --vocab_size rows in each embedding table (the paper-size configs' way to compare
    with published parameter counts)."""
    model_dir, model_name = read(ModelDirOptions).model_dir, read(ModelOptions).model
    if model_dir and os.path.isfile(model_dir_lib.config_path(model_dir)):
        config = model_dir_lib.read_config(model_dir)
        note = f"trained model in {model_dir}"
    elif model_name:
        cls = catalog.get(model_name)
        vocab_size = read(VocabOptions).vocab_size
        config = {"model": model_name, "hparams": hparams.from_flags(cls),
                  "source_vocab_size": vocab_size, "target_vocab_size": vocab_size}
        note = f"not trained yet: vocabularies assumed {vocab_size:,} per side (--vocab_size)"
    elif model_dir:
        model_dir_lib.read_config(model_dir)  # raises the usual "no trained model" error
        return
    else:
        print("models: " + ", ".join(catalog.names()))
        return
    model = catalog.build(config)
    counts = parameter_counts(model)
    print(f"{config['model']}  ({', '.join(f'{k}={v}' for k, v in sorted(config['hparams'].items()))})")
    print(f"  [{note}; source {config['source_vocab_size']:,} / target "
          f"{config['target_vocab_size']:,} tokens]")
    for name, count in counts.items():
        if count or name in COMPONENTS:
            print(f"  {name:<11}{count:>14,}")
