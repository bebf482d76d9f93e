"""The conv_encoder and gru_encdec models at tiny sizes, and what their tests share
(tests/encoders/test_conv_sentence.py, test_gru.py, tests/decoders/test_conditional_gru.py,
tests/models/test_conv_encoder.py)."""

import numpy as np

from helpers.families import SOURCE, TARGET_IN  # noqa: F401  (the batch their tests read)
from tfnmt.models import catalog

DECODER = dict(embed_dim=8, hidden_dim=12, maxout_dim=6, dropout=0.0)
TINY = {
    "small_filters": dict(conv_encoder="small_filters", conv_filters=3, encoding_dim=10, **DECODER),
    "ngram_1layer": dict(conv_encoder="ngram_1layer", conv_filters=5, conv_input_dim=16,
                         encoding_dim=10, **DECODER),
    "ngram": dict(conv_encoder="ngram", conv_filters=5, conv_input_dim=16, encoding_dim=10, **DECODER),
    "ngram_gated": dict(conv_encoder="ngram", conv_filters=5, conv_input_dim=16, encoding_dim=10,
                        gated_pooling=True, **DECODER),
    "small_filters_gated": dict(conv_encoder="small_filters", conv_filters=3, encoding_dim=10,
                                gated_pooling=True, **DECODER),
    "ngram_widths": dict(conv_encoder="ngram", conv_filters=5, conv_input_dim=16, encoding_dim=10,
                         ngram_widths="2,3,5", **DECODER),
}


def conv_model(kind, **overrides):
    model = catalog.get("conv_encoder")(50, 60, **dict(TINY[kind], **overrides))
    model.label_smoothing = 0.1
    model.build_with_dummy_batch()
    return model


def gru_model(**overrides):
    model = catalog.get("gru_encdec")(50, 60, **dict(DECODER, **overrides))
    model.build_with_dummy_batch()
    return model


def random_weights(model, seed=0, scale=0.3):
    rng = np.random.default_rng(seed)
    for w in model.weights:
        if w.trainable:
            w.assign(rng.normal(0, scale, w.shape).astype(np.float32))

# Every sentence encoder of the two models: the convolutional variants and the GRU baseline's.
ENCODERS = sorted(TINY) + ["gru_encdec"]


def make(kind):
    return gru_model() if kind == "gru_encdec" else conv_model(kind)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))
