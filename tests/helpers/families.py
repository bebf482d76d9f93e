"""Tiny models of three families whose tests are split between tests/models/ (the model as a
whole), tests/encoders/ and tests/decoders/ (each part's own behaviour), and the batch the part
tests read (sentence_models.py and ctc.py too): two sentences of different lengths, padded."""

import itertools

import tensorflow as tf

from tfnmt.models import catalog

SOURCE = tf.constant([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]])
TARGET_IN = tf.constant([[2, 10, 11, 12, 13, 14], [2, 13, 14, 0, 0, 0]])

TRANSFORMER = dict(encoder_layers=2, decoder_layers=2, d_model=32, ffn_dim=64, num_heads=4)
DENSENMT = dict(encoder_layers=3, decoder_layers=4, embed_dim=16, residual_dim=12, growth_rate=8,
                attention_dim=10, dropout=0.0)
# DeepLAU and DeepGRU (paper 001).
RECURRENT = dict(encoder_layers=3, decoder_layers=2, embed_dim=8, hidden_dim=12, attention_dim=6,
                 dropout=0.0, output_dropout=0.0)
RECURRENT_GRID = list(itertools.product(["deeplau", "deepgru"],
                                        ["none", "residual", "fast_forward"]))


def _built(name, vocab_sizes, sizes, overrides):
    model = catalog.get(name)(*vocab_sizes, **dict(sizes, **overrides))
    model.build_with_dummy_batch()
    return model


def transformer(**overrides):
    return _built("transformer", (50, 50), TRANSFORMER, overrides)  # one vocabulary: shareable


def densenmt(**overrides):
    return _built("densenmt", (50, 60), DENSENMT, overrides)


def recurrent(name, **overrides):
    return _built(name, (50, 60), RECURRENT, overrides)
