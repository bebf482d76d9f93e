"""Training drops the sources a model cannot encode (tfnmt/training/trainer.py
source_length_limit): longer than a fixed-window encoder's window."""

from tfnmt.models import catalog
from tfnmt.training.trainer import source_length_limit

DECODER = dict(embed_dim=8, hidden_dim=12, maxout_dim=6, dropout=0.0)


def conv_model(**overrides):
    model = catalog.get("conv_encoder")(50, 60, conv_encoder="ngram", conv_filters=5,
                                        conv_input_dim=16, encoding_dim=10, **DECODER, **overrides)
    model.build_with_dummy_batch()
    return model


def gru_model():
    model = catalog.get("gru_encdec")(50, 60, **DECODER)
    model.build_with_dummy_batch()
    return model


def test_training_drops_sources_longer_than_the_window():
    assert source_length_limit(conv_model(), 100) == 31
    assert source_length_limit(conv_model(source_window=16), 10) == 10
    assert source_length_limit(gru_model(), 100) == 100
