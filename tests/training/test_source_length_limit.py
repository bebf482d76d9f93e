"""Training drops the sources a model cannot encode (tfnmt/training/trainer.py
source_length_limit): longer than a fixed-window encoder's window."""

from contract import tiny_model
from tfnmt.training.trainer import source_length_limit


def conv_model(**overrides):
    return tiny_model("conv_encoder", **overrides)


def gru_model():
    return tiny_model("gru_encdec")


def test_training_drops_sources_longer_than_the_window():
    assert source_length_limit(conv_model(), 100) == 31
    assert source_length_limit(conv_model(source_window=16), 10) == 10
    assert source_length_limit(gru_model(), 100) == 100
