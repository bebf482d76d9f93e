"""run_layer_test (tests/helpers/layers.py) over every serialisable Keras layer of tfnmt: config
round trip, serialisation, mixed precision, shapes and gradients, at tiny sizes. A new layer
class under tfnmt/ fails test_every_layer_class_has_a_case until it gets a case here."""

import importlib
import pkgutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfnmt
from helpers.layers import run_layer_test
from tfnmt.layers.aggregation import Aggregation, LayerAggregation, LinearCombination
from tfnmt.layers.attention import MultiHeadAttention, causal_mask, key_mask
from tfnmt.layers.conditional_gru_decoder import ConditionalGRUCell, ConditionalGRUDecoder
from tfnmt.layers.conv_blocks import GLUConv, MultiStepAttention, SummaryLayer
from tfnmt.layers.conv_sentence_encoder import ConvSentenceEncoder
from tfnmt.layers.dense_attention import DenseAttention1, DenseAttention2
from tfnmt.layers.gated_pooling import GatedPooling
from tfnmt.layers.lau import LAUCell
from tfnmt.layers.multi_layer_attention import MultiLayerDecoderLayer, MultiLayerEncoderLayer
from tfnmt.layers.part import Part
from tfnmt.layers.position import SinusoidalPosition
from tfnmt.layers.state_splitter import StateSplitter
from tfnmt.layers.transformer_layers import (FeedForward, TransformerDecoderLayer,
                                             TransformerEncoderLayer)
from tfnmt.layers.weight_norm import WeightNormConv1D, WeightNormDense

B, S, T, D = 2, 5, 3, 4  # batch, source length, target length, width
_rng = np.random.default_rng(0)


def x(*shape):
    return _rng.normal(size=shape).astype(np.float32)


# [B, S]: the second sentence has two padding positions.
SOURCE_MASK = tf.constant([[True] * S, [True] * (S - 2) + [False] * 2])
MEMORY_ALLOWED = key_mask(SOURCE_MASK)
SELF_ALLOWED = causal_mask(T)
SOURCE_ALLOWED = MEMORY_ALLOWED & tf.transpose(MEMORY_ALLOWED, [0, 1, 3, 2])  # [B, 1, S, S]
TRANSFORMER = dict(num_heads=2, ffn_dim=8, dropout=0.2, attention_dropout=0.1, ffn_dropout=0.1,
                   pre_norm=True)
# The bias of an attention's key projection adds q.b to every key's logit alike, which softmax
# cancels: nothing depends on it (DenseAttention2 leaves it out; MultiHeadAttention keeps it, as
# its checkpoints do). With a cache it is not inert: the cached keys do not carry it.
KEY_BIAS = dict(inert_weights=("key/bias",))


def _stack(i, inputs):
    """A weightless stand-in for the layer stack LayerAggregation drives: layer i of its input."""
    return tf.tanh(inputs[-1] * (0.5 + i) + tf.cast(i, inputs[-1].dtype))


def _run_stack(layer, x):
    return layer.run(x, _stack)


def _dense_attention(layer, z, encoder_layers, embedding, mask):
    return layer(z, layer.project_memory(encoder_layers, embedding, mask))


def _memory(keys, values, mask):
    return {"keys": keys, "values": values, "mask": mask}


def _multi_step_attention(layer, x, g, keys, values, mask):
    return layer(x, g, _memory(keys, values, mask))


# The draw of initial weights (run_layer_test's seed) where one is not 0: under seed 0 the
# hierarchical stack's three norms of sums take float16 rounding past the tolerance of (d)
# (0.0068 against 0.005); unseeded, 1 run in 30 failed so.
SEED = {"hierarchical": 1}

# id: (class, constructor arguments, args, kwargs, expected output shape[s], run_layer_test options)
CASES = {
    "Aggregation": (Aggregation, dict(ffn_dim=6, residual="top", activation="relu", top=2),
                    ([x(B, T, D), x(B, T, D), x(B, T, D)],), {}, (B, T, D), {}),
    "LinearCombination": (LinearCombination, {}, ([x(B, T, D), x(B, T, D)],), {}, (B, T, D), {}),
    **{f"LayerAggregation-{strategy}" + ("-layer_norm" if norm == "layer" else ""): (
        LayerAggregation, dict(strategy=strategy, num_layers=3, ffn_dim=6, dense_norm=norm),
        (x(B, T, D),), {},
        # run() returns (stack output, [H^1, H^2, H^3]). The nodes' residual and activation
        # round-trip in the Aggregation case; here their defaults, whose sums keep the mixed
        # precisions within tolerance (a node adding no input fails it at times: a norm of FF
        # alone magnifies rounding).
        [(B, T, D)] * 4, dict(call=_run_stack, allow_defaults=("residual", "activation"),
                              seed=SEED.get(strategy, 0)))
       for strategy, norm in (("none", "none"), ("dense", "none"), ("dense", "layer"),
                              ("linear", "none"), ("iterative", "none"), ("hierarchical", "none"))},
    "MultiHeadAttention": (MultiHeadAttention, dict(num_heads=2, dropout=0.1), (x(B, T, D),),
                           dict(value=x(B, S, D), allowed=MEMORY_ALLOWED), (B, T, D), KEY_BIAS),
    "MultiHeadAttention-cache": (
        MultiHeadAttention, dict(num_heads=2, dropout=0.1), (x(B, 1, D),),
        dict(cache={"key": x(B, 2, 2, 2), "value": x(B, 2, 2, 2)}),
        # (output, updated cache {"key", "value"} with one more position).
        [(B, 1, D), (B, 2, 3, 2), (B, 2, 3, 2)], {}),
    "ConditionalGRUCell": (ConditionalGRUCell, dict(units=5, embed_dim=3, form="appendix"),
                           (x(B, 3 + 4), [x(B, 5)]), {}, [(B, 5), (B, 5)], {}),
    "ConditionalGRUDecoder": (ConditionalGRUDecoder, dict(units=5, maxout_dim=3, form="groundhog"),
                              ((x(B, T, 6), x(B, 7)),), {}, (B, T, 3), {}),
    "GLUConv": (GLUConv, dict(width=D, kernel_size=3, causal=True, dropout_in=0.1), (x(B, S, 6),),
                {}, (B, S, D), {}),
    "SummaryLayer": (SummaryLayer, dict(width=D, kernel_size=2, causal=True, dropout_in=0.1),
                     (x(B, S, 6),), {}, (B, S, D), {}),
    "MultiStepAttention": (MultiStepAttention, dict(embed_dim=D, scale_context=True),
                           (x(B, T, 6), x(B, T, D), x(B, S, D), x(B, S, D), SOURCE_MASK), {},
                           (B, T, D), dict(call=_multi_step_attention)),
    "ConvSentenceEncoder-small_filters": (
        ConvSentenceEncoder, dict(variant="small_filters", window=8, encoding_dim=5, input_dim=6,
                                  layers=2, filters=3, ngram_widths=(3,), filter_size=(3, 2),
                                  gated_pooling=True),
        (x(B, 8, D),), {}, (B, 5), {}),
    "ConvSentenceEncoder-ngram": (
        ConvSentenceEncoder, dict(variant="ngram", window=8, encoding_dim=5, input_dim=6, layers=2,
                                  filters=3, ngram_widths=(2, 3), filter_size=(5, 5),
                                  gated_pooling=True),
        (x(B, 8, D),), {}, (B, 5), {}),
    "ConvSentenceEncoder-pooling": (
        ConvSentenceEncoder, dict(variant="ngram", window=8, encoding_dim=5, input_dim=D, layers=1,
                                  filters=3, ngram_widths=(3,), filter_size=(5, 5)),
        (x(B, 8, D),), {}, (B, 5), dict(allow_defaults=("gated_pooling",))),
    "DenseAttention1": (DenseAttention1, dict(attention_dim=6),
                        (x(B, T, D), [x(B, S, D), x(B, S, 3)], x(B, S, D), SOURCE_MASK), {},
                        (B, T, 6), dict(call=_dense_attention)),
    "DenseAttention2": (DenseAttention2, dict(attention_dim=6, num_encoder_layers=2),
                        (x(B, T, D), [x(B, S, D), x(B, S, 3)], x(B, S, D), SOURCE_MASK), {},
                        (B, T, 6), dict(call=_dense_attention)),
    "GatedPooling-1d": (GatedPooling, dict(pool_size=(3,)), (x(B, 7, D),), {}, (B, 2, D), {}),
    "GatedPooling-2d": (GatedPooling, dict(pool_size=(2, 3)), (x(B, 5, 7, D),), {},
                        (B, 2, 2, D), {}),
    "LAUCell": (LAUCell, dict(units=5, kernel_initializer="he_normal",
                              recurrent_initializer="glorot_normal"),
                (x(B, 3), [x(B, 5)]), {}, [(B, 5), (B, 5)], {}),
    # As DeepLAU's --init_stddev gives them: initializer objects.
    "LAUCell-initializers": (
        LAUCell, dict(units=5, kernel_initializer=keras.initializers.RandomNormal(stddev=0.04),
                      recurrent_initializer=keras.initializers.RandomNormal(stddev=0.04)),
        (x(B, 3), [x(B, 5)]), {}, [(B, 5), (B, 5)], {}),
    "SinusoidalPosition": (SinusoidalPosition, dict(max_wavelength=50.0), (x(B, T, 5),),
                           dict(offset=2), (B, T, 5), {}),
    "StateSplitter": (StateSplitter, dict(split_factor=3, width=6), (x(B, S, D), SOURCE_MASK), {},
                      [(B, 3 * S, 6), (B, 3 * S)], {}),
    "FeedForward": (FeedForward, dict(ffn_dim=8, dropout=0.1), (x(B, T, D),), {}, (B, T, D), {}),
    "TransformerEncoderLayer": (TransformerEncoderLayer, TRANSFORMER, (x(B, S, D), SOURCE_ALLOWED),
                                {}, (B, S, D), KEY_BIAS),
    "TransformerDecoderLayer": (TransformerDecoderLayer, TRANSFORMER,
                                (x(B, T, D), x(B, S, D), SELF_ALLOWED, MEMORY_ALLOWED), {},
                                (B, T, D), KEY_BIAS),
    "MultiLayerEncoderLayer": (MultiLayerEncoderLayer,
                               dict(TRANSFORMER, lower_layers=2, aggregation_ffn_dim=6),
                               (x(B, S, D), SOURCE_ALLOWED), dict(lower=[x(B, S, D), x(B, S, D)]),
                               (B, S, D), KEY_BIAS),
    "MultiLayerDecoderLayer": (MultiLayerDecoderLayer,
                               dict(TRANSFORMER, lower_layers=1, aggregation_ffn_dim=6),
                               (x(B, T, D), x(B, S, D), SELF_ALLOWED, MEMORY_ALLOWED),
                               dict(lower=[x(B, T, D)]), (B, T, D), KEY_BIAS),
    "WeightNormDense": (WeightNormDense, dict(units=5, dropout_in=0.1), (x(B, T, D),), {},
                        (B, T, 5), {}),
    "WeightNormConv1D": (WeightNormConv1D, dict(filters=5, kernel_size=3, causal=True,
                                                dropout_in=0.1), (x(B, S, D),), {}, (B, S, 5), {}),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_layer(case):
    layer_cls, init_kwargs, args, kwargs, shape, options = CASES[case]
    run_layer_test(layer_cls, init_kwargs, args, kwargs, expected_output_shape=shape, **options)


def _layer_classes():
    """Every Keras layer class defined in tfnmt that is neither a model nor a part (the models
    have the contract, tests/contract.py; the parts theirs), nor a private base."""
    for module in pkgutil.walk_packages(tfnmt.__path__, "tfnmt."):
        if not module.name.endswith(".__main__"):  # runs the command line
            importlib.import_module(module.name)
    classes, pending = set(), [keras.layers.Layer]
    while pending:
        for sub in pending.pop().__subclasses__():
            pending.append(sub)
            if (sub.__module__.startswith("tfnmt.") and not issubclass(sub, (keras.Model, Part))
                    and not sub.__name__.startswith("_")):
                classes.add(sub)
    return classes


def test_every_layer_class_has_a_case():
    classes = _layer_classes()
    assert {MultiHeadAttention, LayerAggregation, GatedPooling} <= classes  # the scan finds them
    assert classes == {case[0] for case in CASES.values()}
