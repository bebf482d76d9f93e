"""tfnmt info: the registered models, or a model's parameter count by component."""

from tfnmt import model_dir as model_dir_lib
from tfnmt.cli.flags import FLAGS
from tfnmt.errors import ConfigError
from tfnmt.models import registry

COMPONENTS = ("embeddings", "encoder", "decoder", "output")


def component(path):
    """embeddings / encoder / decoder / output from a variable path like 'transformer/encoder_layer_0/...'."""
    top = path.split("/")[1] if "/" in path else path
    if "embedding" in top:
        return "embeddings"
    for name in ("encoder", "decoder", "output"):
        if top.startswith(name):
            return name
    return "other"


def parameter_counts(model):
    counts = dict.fromkeys(COMPONENTS + ("other",), 0)
    for variable in model.trainable_weights:  # shared variables appear once
        counts[component(variable.path)] += int(variable.numpy().size)
    counts["total"] = sum(counts.values())
    return counts


def run():
    if FLAGS.model_dir:
        config = model_dir_lib.read_config(FLAGS.model_dir)
    elif FLAGS.model:
        raise ConfigError("tfnmt info needs --model_dir (a trained or at least vocab'd model)")
    else:
        print("models: " + ", ".join(registry.names()))
        return
    model = model_dir_lib.build_model(config)
    counts = parameter_counts(model)
    print(f"{config['model']}  ({', '.join(f'{k}={v}' for k, v in sorted(config['hparams'].items()))})")
    for name, count in counts.items():
        if count or name in COMPONENTS:
            print(f"  {name:<11}{count:>14,}")
