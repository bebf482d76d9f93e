"""tfnmt upgrade: rewrite a model directory's config.json in today's format, once.

Every verb reads an older config.json as today's already (model_dir.read_config); upgrading
writes that reading down, so that the directory no longer depends on formats.py's tables. The
file as it was is kept beside it (config.formatN.json); the checkpoints are not touched."""

import json
import os
import shutil

from tfnmt import formats
from tfnmt import model_dir as model_dir_lib
from tfnmt.cli import common
from tfnmt.cli.flags import read
from tfnmt.cli.options import ModelDirOptions
from tfnmt.errors import cannot_write


def upgrade(model_dir):
    """Rewrites `model_dir`'s config.json in formats.CONFIG_FORMAT; returns what it says."""
    path = model_dir_lib.config_path(model_dir)
    raw = model_dir_lib.read_raw_config(model_dir)
    old = model_dir_lib.config_format(raw)
    if old == formats.CONFIG_FORMAT:
        return f"{path} is in format {old} already: nothing to do"
    new = model_dir_lib.upgrade(raw)
    kept = os.path.join(model_dir, f"config.format{old}.json")
    try:
        shutil.copyfile(path, kept)
    except OSError as e:
        raise cannot_write(kept, e, "make the model directory writable") from None
    model_dir_lib.write_config(model_dir, new)
    before, after = raw["hparams"], new["hparams"]
    renamed = {o: n for o, n in formats.RENAMED_HPARAMS.items()
               if o in before and n in after and n not in before}
    added = sorted(set(after) - set(before) - set(renamed.values()))
    changes = [f"{o} read as {n}" for o, n in renamed.items()] + [
        f"{k}={json.dumps(after[k])} added" for k in added]
    return (f"{path}: format {old} -> {formats.CONFIG_FORMAT} "
            f"({', '.join(changes) or 'no hyper-parameter changed'}); the old file kept as {kept}")


def run():
    model_dir = read(ModelDirOptions).model_dir
    common.require(model_dir=model_dir)
    print(upgrade(model_dir))
