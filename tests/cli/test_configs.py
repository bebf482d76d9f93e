"""Every flagfile under configs/ parses, names a registered model with valid hyper-parameters,
and has consistent training settings."""

import glob
import os
import re

import pytest

from conftest import REPO
from tfnmt.models import catalog

# Experiment files (configs/experiments/) name such flagfiles (their test:
# tests/experiments/test_experiment_files.py).
CONFIGS = sorted(p for p in glob.glob(os.path.join(REPO, "configs", "**", "*.cfg"), recursive=True)
                 if not os.path.relpath(p, REPO).startswith(os.path.join("configs", "experiments")))


def test_every_registered_model_has_a_flagfile():
    # Also what keeps the parametrised checks below from passing on an empty list.
    named = {m.group(1) for path in CONFIGS
             for m in re.finditer(r"^--model=(\w+)", open(path, encoding="utf-8").read(), re.M)}
    assert named == set(catalog.names())


# (model, hyper-parameters) of the models built so far: a config that names the same model as
# another (the Multi30k copy of an IWSLT'14 model, say) is not built twice.
_BUILT = set()

# Table 1 of the DenseNMT paper: De-En model sizes (M parameters, +-1M) per embedding width, of
# the IWSLT'14 configs of each of these models. The 8-layer dense models are ~3-4M larger than the
# paper's; docs/papers/000-densenmt-convs2s.md explains the gap.
TABLE1_DE_EN = {64: 8, 128: 11, 256: 17}
TABLE1 = {os.path.join(REPO, "configs", "densenmt", "iwslt14", f"{name}-e{width}.cfg"): millions
          for name in ("base-4l", "densenmt-4l-1", "densenmt-4l-2", "base-8l")
          for width, millions in TABLE1_DE_EN.items()}


def test_the_densenmt_table1_configs_are_among_those_built():
    # test_config_builds_its_model checks their sizes as it builds them.
    assert len(TABLE1) == 12 and set(TABLE1) <= set(CONFIGS)


@pytest.mark.slow
@pytest.mark.parametrize("path", CONFIGS, ids=[os.path.relpath(p, REPO) for p in CONFIGS])
def test_config_builds_its_model(path, monkeypatch, capsys):
    """A config of Table 1 (TABLE1) is built by `tfnmt info`, with its own --vocab_size, whose
    count must be the paper's size (once a test of its own, which built each of them again)."""
    monkeypatch.chdir(REPO)  # flagfiles include shared recipes by paths from the repository root
    from conftest import run_cli
    from tfnmt.cli.flags import FLAGS
    from tfnmt.models import catalog
    from tfnmt.cli import hparams as hparam_flags
    from tfnmt.cli.flags import read
    from tfnmt.training.options import TrainOptions
    FLAGS.unparse_flags()
    FLAGS(["tfnmt", f"--flagfile={path}"])
    try:
        cls = catalog.get(FLAGS.model)
        hparams = hparam_flags.from_flags(cls)
        read(TrainOptions)  # its __post_init__ checks the settings across fields
        key = (FLAGS.model, repr(sorted(hparams.items())))
        if key not in _BUILT and path not in TABLE1:
            model = cls(100, 100, **hparams)
            model.build_with_dummy_batch()
            assert model.count_params() > 0
            _BUILT.add(key)
    finally:
        FLAGS.unparse_flags()
    if path in TABLE1:
        capsys.readouterr()
        assert run_cli("info", f"--flagfile={os.path.relpath(path, REPO)}") == 0
        out = capsys.readouterr().out
        total = int(out.split("total")[1].split()[0].replace(",", ""))
        assert abs(total / 1e6 - TABLE1[path]) <= 1.0, (path, total)
        _BUILT.add(key)


def _flag_values(path, names):
    from tfnmt.cli.flags import FLAGS
    FLAGS.unparse_flags()
    try:
        FLAGS(["tfnmt", f"--flagfile={path}"])
        return {name: FLAGS[name].value for name in names}
    finally:
        FLAGS.unparse_flags()


DENSENMT_PAPER = sorted(glob.glob(os.path.join(REPO, "configs", "densenmt", "iwslt14", "*.cfg"))
                        + glob.glob(os.path.join(REPO, "configs", "densenmt", "wmt14", "*.cfg")))


@pytest.mark.parametrize("path", DENSENMT_PAPER, ids=[os.path.relpath(p, REPO) for p in DENSENMT_PAPER])
def test_densenmt_paper_configs_train_maximum_likelihood_and_shrink_per_epoch(path, monkeypatch):
    # Sec. 4.3 and eq. 1: NAG with the lr shrunk on per-epoch validation, no label smoothing,
    # beam 5 with fairseq's length normalisation (score / |y|^alpha), never GNMT's penalty.
    monkeypatch.chdir(REPO)
    values = _flag_values(path, ["label_smoothing", "optimizer", "learning_rate", "validate_per_epoch",
                                 "lr_shrink_mode", "beam_size", "length_penalty_mode", "batch_size",
                                 "batch_tokens"])
    wmt = "wmt14" in path
    assert values == {"label_smoothing": 0.0, "optimizer": "nag", "learning_rate": 0.25,
                      "validate_per_epoch": True,
                      "lr_shrink_mode": "after_first_rise" if wmt else "on_rise", "beam_size": 5,
                      "length_penalty_mode": "length", "batch_size": 48 if wmt else 32,
                      "batch_tokens": 0}


def test_densenmt_en_de_15_is_the_papers_wmt14_model(monkeypatch):
    monkeypatch.chdir(REPO)
    values = _flag_values("configs/densenmt/wmt14/densenmt-en-de-15.cfg",
                          ["model", "encoder", "decoder", "attention", "encoder_layers",
                           "decoder_layers", "sumlen", "embed_dim"])
    assert values == {"model": "densenmt", "encoder": "dense", "decoder": "dense",
                      "attention": "dense2", "encoder_layers": 15, "decoder_layers": 15,
                      "sumlen": 6, "embed_dim": 768}


def test_deep_representation_wmt14_steps_hold_the_papers_8_x_4096_tokens_on_4_gpus(monkeypatch):
    monkeypatch.chdir(REPO)
    values = _flag_values("configs/deep_representations/wmt14/base.cfg",
                          ["batch_tokens", "accumulate_steps", "distribution"])
    assert values["distribution"] == "mirrored"  # --batch_tokens per GPU
    assert 4 * values["batch_tokens"] * values["accumulate_steps"] == 8 * 4096


def _hparams(path):
    from tfnmt.cli import hparams as hparam_flags
    from tfnmt.cli.flags import FLAGS
    from tfnmt.models import catalog
    FLAGS.unparse_flags()
    try:
        FLAGS(["tfnmt", f"--flagfile={path}"])
        return hparam_flags.from_flags(catalog.get(FLAGS.model))
    finally:
        FLAGS.unparse_flags()


FAIRSEQ_SCALINGS = ("scale_context", "scale_encoder_gradients", "scale_values")
# (flagfiles, hyper-parameter, value): the papers' configs run the papers' forms; the Multi30k
# configs of the committed 1,500-step reports (docs/results/) keep the forms those were run with.
FORMS = [("configs/deep_representations/wmt14/dense.cfg", "dense_aggregation_norm", "none"),
         ("configs/deep_representations/multi30k/dense.cfg", "dense_aggregation_norm", "layer"),
         *[("configs/densenmt/iwslt14/base-*.cfg", name, True) for name in FAIRSEQ_SCALINGS],
         *[("configs/densenmt/multi30k/base-*.cfg", name, False) for name in FAIRSEQ_SCALINGS],
         ("configs/densenmt/iwslt14/*.cfg", "narrow_positions", True),
         ("configs/densenmt/multi30k/*.cfg", "narrow_positions", False),
         ("configs/conv_encoder/wmt14/*.cfg", "decoder_gru_form", "groundhog"),
         ("configs/conv_encoder/multi30k/*.cfg", "decoder_gru_form", "appendix")]


@pytest.mark.parametrize("pattern,name,value", FORMS)
def test_paper_configs_run_the_papers_forms_and_the_reported_configs_the_forms_they_ran(
        pattern, name, value, monkeypatch):
    monkeypatch.chdir(REPO)
    paths = sorted(glob.glob(pattern))
    assert paths
    for path in paths:
        assert _hparams(path)[name] == value, path
