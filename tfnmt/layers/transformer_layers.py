"""Transformer encoder and decoder layers, pre- or post-layer-norm, with incremental decoding."""

import keras
import tensorflow as tf

from tfnmt.layers.attention import FIXED, SELF_PROJECTION, MultiHeadAttention
from tfnmt.layers.configured import Configured
from tfnmt.layers.hparams import DROPOUT, HParam
from tfnmt.layers.part import Part
from tfnmt.layers.position import SinusoidalPosition
from tfnmt.parts import in_parts, parted_matmul


# The decoding memory's entry of each decoder layer's feed-forward parts (FeedForward.parts).
FFN_PARTS = "ffn_parts"


@keras.saving.register_keras_serializable(package="tfnmt")
class FeedForward(Configured, keras.layers.Layer):
    """Position-wise ReLU feed-forward block d -> ffn -> d."""

    def __init__(self, ffn_dim, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.set_config(ffn_dim=ffn_dim, dropout=dropout)

    def build(self, input_shape):
        self.inner = keras.layers.Dense(self.ffn_dim, activation="relu", name="inner")
        self.outer = keras.layers.Dense(input_shape[-1], name="outer")
        self.inner.build(input_shape)
        self.outer.build(tuple(input_shape[:-1]) + (self.ffn_dim,))
        self.dropout_layer = keras.layers.Dropout(self.dropout)

    def call(self, x, training=False):
        return self.outer(self.dropout_layer(self.inner(x), training=training))

    def parts(self):
        """(blocks, outer bias) in the compute dtype: a decoding step's feed-forward as PARTS
        independent products (tfnmt/parts.py), each block the inner map's columns, their
        biases and the outer map's matching rows."""
        def cast(weight):
            return tf.cast(weight, self.compute_dtype)
        blocks = zip(in_parts(cast(self.inner.kernel)), in_parts(cast(self.inner.bias)),
                     in_parts(cast(self.outer.kernel), axis=0))
        return tuple(blocks), cast(self.outer.bias)

    def step(self, x, parts):
        """`call` on one position x [N, d] in `parts`' blocks."""
        blocks, bias = parts
        # bias_add, not +: Grappler fuses a MatMul, a BiasAdd and a Relu into one op.
        return tf.nn.bias_add(tf.add_n([
            tf.matmul(tf.nn.relu(tf.nn.bias_add(tf.matmul(x, inner), inner_bias)), outer)
            for inner, inner_bias, outer in blocks]), bias)


class _Sublayers(Configured, keras.layers.Layer):
    """Shared residual wiring: `x + dropout(f(norm(x)))` (pre-norm) or `norm(x + dropout(f(x)))`."""

    def __init__(self, num_heads, ffn_dim, dropout=0.1, attention_dropout=0.0, ffn_dropout=0.0,
                 pre_norm=False, **kwargs):
        super().__init__(**kwargs)
        self.set_config(num_heads=num_heads, ffn_dim=ffn_dim, dropout=dropout,
                        attention_dropout=attention_dropout, ffn_dropout=ffn_dropout, pre_norm=pre_norm)
        self.dropout_layer = keras.layers.Dropout(dropout)

    def _residual(self, x, norm, fn, training):
        if self.pre_norm:
            return x + self.dropout_layer(fn(norm(x)), training=training)
        return norm(x + self.dropout_layer(fn(x), training=training))


@keras.saving.register_keras_serializable(package="tfnmt")
class TransformerEncoderLayer(_Sublayers):
    """Self-attention then feed-forward; [B, S, d] -> [B, S, d]."""

    def build(self, input_shape):
        self.self_attention = MultiHeadAttention(self.num_heads, self.attention_dropout, name="self_attention")
        self.self_attention.build(input_shape)
        self.ffn = FeedForward(self.ffn_dim, self.ffn_dropout, name="ffn")
        self.ffn.build(input_shape)
        self.attention_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="attention_norm")
        self.ffn_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="ffn_norm")
        self.attention_norm.build(input_shape)
        self.ffn_norm.build(input_shape)

    def call(self, x, allowed, training=False):
        x = self._residual(x, self.attention_norm,
                           lambda y: self.self_attention(y, allowed=allowed, training=training), training)
        return self._residual(x, self.ffn_norm, lambda y: self.ffn(y, training=training), training)


@keras.saving.register_keras_serializable(package="tfnmt")
class TransformerDecoderLayer(_Sublayers):
    """Causal self-attention, attention over the encoder memory, feed-forward.

    `call` runs teacher forcing over [B, T, d]; `step` runs one position with a cache holding this
    layer's self-attention keys/values so far (`initial_cache`) and the memory's cross-attention
    keys/values (`memory_cache`).
    """

    def build(self, input_shape):
        self.self_attention = MultiHeadAttention(self.num_heads, self.attention_dropout, name="self_attention")
        self.cross_attention = MultiHeadAttention(self.num_heads, self.attention_dropout, name="cross_attention")
        self.self_attention.build(input_shape)
        self.cross_attention.build(input_shape, input_shape)
        self.ffn = FeedForward(self.ffn_dim, self.ffn_dropout, name="ffn")
        self.ffn.build(input_shape)
        self.norms = []
        for name in ("self_attention_norm", "cross_attention_norm", "ffn_norm"):
            norm = keras.layers.LayerNormalization(epsilon=1e-6, name=name)
            norm.build(input_shape)
            self.norms.append(norm)

    def call(self, x, memory, self_allowed, memory_allowed, training=False):
        x = self._residual(x, self.norms[0],
                           lambda y: self.self_attention(y, allowed=self_allowed, training=training), training)
        keys, values = self.cross_attention.project_key_value(memory)
        x = self._residual(x, self.norms[1], lambda y: self.cross_attention.attend(
            y, keys, values, memory_allowed, training=training), training)
        return self._residual(x, self.norms[2], lambda y: self.ffn(y, training=training), training)

    def initial_cache(self, rows, steps=None):
        """The self-attention keys/values so far (none) for each row of `rows` (a hypothesis);
        with `steps`, a FIXED cache of that many positions (decoding/compiled.py)."""
        cache = self.self_attention.empty_cache(tf.shape(rows)[0], tf.float32,
                                                0 if steps is None else steps)
        prefix = FIXED if steps is not None else ""
        return {prefix + "self_key": cache["key"], prefix + "self_value": cache["value"]}

    def memory_cache(self, memory):
        """The cross-attention keys/values of `memory` [B, S, d], which `step` reads from its
        cache beside the self-attention entries."""
        keys, values = self.cross_attention.step_key_value(memory)
        return {"memory_key": keys, "memory_value": values}

    def step(self, x, cache, memory_allowed, time=None):
        """x: [N, 1, d] at step `time` -> ([N, 1, d], updated cache). The cache holds the
        self-attention's three projections as one (SELF_PROJECTION, `fused_projection`) and
        the feed-forward's parts (FFN_PARTS, `FeedForward.parts`), made per batch by the
        decoder, not per step. Run on [N, d]: Keras' Dense on [N, 1, d] is a
        tensordot, ten ops where a 2-D matmul is one."""
        prefix = FIXED if FIXED + "self_key" in cache else ""
        projection = cache[SELF_PROJECTION]
        new_self = {}

        def self_attend(y):
            out, updated = self.self_attention.self_attend_step(
                y, {"key": cache[prefix + "self_key"], "value": cache[prefix + "self_value"]},
                projection, time if prefix else None)
            new_self.update(updated)
            return out

        x = self._residual(x[:, 0], self.norms[0], self_attend, False)
        x = self._residual(x, self.norms[1], lambda y: self.cross_attention.attend_step(
            y, cache["memory_key"], cache["memory_value"], memory_allowed), False)
        x = self._residual(x, self.norms[2], lambda y: self.ffn.step(y, cache[FFN_PARTS]), False)
        return x[:, None], dict(cache, **{prefix + "self_key": new_self["key"],
                                          prefix + "self_value": new_self["value"]})


# What every stack of Transformer layers reads.
HPARAMS = {
    "d_model": HParam(512, "model width (embeddings and hidden states)", bounds=">= 1"),
    "ffn_dim": HParam(2048, "inner width of the feed-forward blocks", bounds=">= 1"),
    "num_heads": HParam(8, "attention heads", bounds=">= 1"),
    "dropout": DROPOUT.but(default=0.1, help="dropout on embeddings and sub-layer outputs"),
    "attention_dropout": HParam(0.0, "dropout on attention weights", bounds="[0, 1)"),
    "ffn_dropout": HParam(0.0, "dropout inside the feed-forward blocks", bounds="[0, 1)"),
    "pre_norm": HParam(False, "layer norm before each sub-layer (pre-norm) instead of after"),
}


def token_embedding(vocab_size, d_model, name):
    return keras.layers.Embedding(vocab_size, d_model, name=name,
                                  embeddings_initializer=keras.initializers.RandomNormal(
                                      stddev=d_model ** -0.5))


def tied_logits(x, matrix, transposed=None):
    """x [..., d] times the transpose of `matrix` [V, d] (a tied embedding): logits [..., V].
    `transposed`: that transpose made already, in column blocks (a search's,
    decoding/shared.py), then plain matmuls.

    As one 2-D matmul: a batched matmul of x [B, T, d] with the 2-D matrix would broadcast it
    to every sentence, and its gradient would be a [B, V, d] tensor before the sum over B."""
    if transposed is not None:
        return parted_matmul(x, transposed)
    flat = tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), tf.cast(matrix, x.dtype), transpose_b=True)
    return tf.reshape(flat, tf.concat([tf.shape(x)[:-1], tf.shape(matrix)[:1]], 0))


def layer_args(h):
    """The keyword arguments of every Transformer layer of a stack."""
    return dict(num_heads=h["num_heads"], ffn_dim=h["ffn_dim"], dropout=h["dropout"],
                attention_dropout=h["attention_dropout"], ffn_dropout=h["ffn_dropout"],
                pre_norm=h["pre_norm"])


class Embedder(Part):
    """Token embeddings scaled by sqrt(d_model), plus sinusoidal positions, then dropout."""

    def __init__(self, hparams, embedding, **kwargs):
        super().__init__(hparams, **kwargs)
        self.d_model = hparams["d_model"]
        self.embedding = embedding
        self.position = SinusoidalPosition(name="position")
        self.dropout = keras.layers.Dropout(hparams["dropout"])

    def embed(self, ids, offset=0, training=False):
        x = self.embedding(ids) * tf.cast(self.d_model ** 0.5, self.embedding.compute_dtype)
        return self.dropout(self.position(x, offset=offset), training=training)
