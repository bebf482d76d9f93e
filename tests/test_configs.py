"""Every flagfile under configs/ parses, names a registered model with valid hyper-parameters,
and has consistent training settings."""

import dataclasses
import glob
import os

import pytest

from conftest import REPO

CONFIGS = sorted(glob.glob(os.path.join(REPO, "configs", "**", "*.cfg"), recursive=True))


def test_there_are_configs():
    assert len(CONFIGS) >= 5


@pytest.mark.parametrize("path", CONFIGS, ids=[os.path.relpath(p, REPO) for p in CONFIGS])
def test_config_builds_its_model(path):
    from tfnmt.cli.flags import FLAGS
    from tfnmt.models import registry
    from tfnmt.training.trainer import TrainOptions, check_options
    FLAGS.unparse_flags()
    FLAGS(["tfnmt", f"--flagfile={path}"])
    try:
        cls = registry.get(FLAGS.model)
        hparams = registry.hparams_from_flags(cls)
        model = cls(100, 100, **hparams)
        model.build_with_dummy_batch()
        assert model.count_params() > 0
        check_options(TrainOptions(**{f.name: FLAGS[f.name].value
                                      for f in dataclasses.fields(TrainOptions)}))
    finally:
        FLAGS.unparse_flags()
