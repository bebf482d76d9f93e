"""Transformer layers with multi-layer self-attention (Dou et al. 2018, eq. 8).

Layer l's self-attention queries its own input and attends, with a separate attention model
each, to its input (= H^{l-1}) and to the inputs of the `lower_layers` layers below it
(H^{l-2}, ..., H^{l-k}); the contexts are merged by an aggregation node,
`C^l = AGG(C^l_{-1}, ..., C^l_{-k})`, which takes the place of the attention output in the
residual block. Encoder-decoder attention is untouched. With `lower_layers=0` these are exactly
the plain layers (same variables, same function).

The first attention keeps the plain layer's name (`self_attention`), so a plain Transformer's
weights warm-start it; the new ones are `lower_attention_{j}` (j layers further down) and
`attention_aggregation`. In a pre-norm layer each lower input gets its own layer norm
(`lower_norm_{j}`), as the layer's own input does.
"""

import keras
import tensorflow as tf

from tfnmt.layers.aggregation import Aggregation
from tfnmt.layers.attention import FIXED, SELF_PROJECTION, MultiHeadAttention, extend
from tfnmt.layers.transformer_layers import (FFN_PARTS, TransformerDecoderLayer,
                                             TransformerEncoderLayer)


class _MultiLayerSelfAttention:
    """What the encoder and decoder layers share: the extra attentions, norms and the AGG node.
    It comes first in each layer's bases, so `super()` here is the plain Transformer layer."""

    def __init__(self, num_heads, ffn_dim, lower_layers=0, aggregation_ffn_dim=None, **kwargs):
        super().__init__(num_heads, ffn_dim, **kwargs)
        self.set_config(lower_layers=lower_layers, aggregation_ffn_dim=aggregation_ffn_dim or ffn_dim)

    def build(self, input_shape):
        super().build(input_shape)
        self._build_lower(input_shape)

    def _build_lower(self, input_shape):
        self.lower_attentions, self.lower_norms = [], []
        self.attention_aggregation = None
        for j in range(1, self.lower_layers + 1):
            attention = MultiHeadAttention(self.num_heads, self.attention_dropout,
                                           name=f"lower_attention_{j}")
            attention.build(input_shape, input_shape)
            self.lower_attentions.append(attention)
            if self.pre_norm:
                norm = keras.layers.LayerNormalization(epsilon=1e-6, name=f"lower_norm_{j}")
                norm.build(input_shape)
                self.lower_norms.append(norm)
        if self.lower_layers:
            self.attention_aggregation = Aggregation(self.aggregation_ffn_dim, name="attention_aggregation")
            self.attention_aggregation.build([input_shape] * (self.lower_layers + 1))

    def _check_lower(self, lower):
        if len(lower) != self.lower_layers:
            raise ValueError(f"{self.name} attends to {self.lower_layers} lower layers, got {len(lower)}")

    def _lower_keys_values(self, lower):
        """Projected keys/values of each lower input: [(keys, values)] nearest layer first."""
        if self.pre_norm:
            lower = [norm(x) for norm, x in zip(self.lower_norms, lower)]
        return [attention.project_key_value(x) for attention, x in zip(self.lower_attentions, lower)]

    def _aggregate(self, own_context, y, lower_kv, allowed, training):
        if not lower_kv:
            return own_context
        contexts = [own_context] + [attention.attend(y, keys, values, allowed, training=training)
                                    for attention, (keys, values) in zip(self.lower_attentions, lower_kv)]
        return self.attention_aggregation(contexts)


@keras.saving.register_keras_serializable(package="tfnmt")
class MultiLayerEncoderLayer(_MultiLayerSelfAttention, TransformerEncoderLayer):
    """Encoder layer whose self-attention also attends to the inputs of `lower_layers` layers below.

    call(x [B, S, d], allowed, lower=[inputs of layer l-1, l-2, ...]) -> [B, S, d]."""

    def call(self, x, allowed, lower=(), training=False):
        self._check_lower(lower)
        lower_kv = self._lower_keys_values(lower)

        def attend(y):
            own = self.self_attention(y, allowed=allowed, training=training)
            return self._aggregate(own, y, lower_kv, allowed, training)

        x = self._residual(x, self.attention_norm, attend, training)
        return self._residual(x, self.ffn_norm, lambda y: self.ffn(y, training=training), training)


@keras.saving.register_keras_serializable(package="tfnmt")
class MultiLayerDecoderLayer(_MultiLayerSelfAttention, TransformerDecoderLayer):
    """Decoder layer with multi-layer causal self-attention.

    For incremental decoding the cache holds, besides the plain layer's entries, the keys and
    values that each lower attention projected from its lower layer's input at every earlier
    position (`lower_{j}_key`, `lower_{j}_value`): step t appends position t of each.
    """

    def call(self, x, memory, self_allowed, memory_allowed, lower=(), training=False):
        self._check_lower(lower)
        lower_kv = self._lower_keys_values(lower)

        def attend(y):
            own = self.self_attention(y, allowed=self_allowed, training=training)
            return self._aggregate(own, y, lower_kv, self_allowed, training)

        x = self._residual(x, self.norms[0], attend, training)
        keys, values = self.cross_attention.project_key_value(memory)
        x = self._residual(x, self.norms[1], lambda y: self.cross_attention.attend(
            y, keys, values, memory_allowed, training=training), training)
        return self._residual(x, self.norms[2], lambda y: self.ffn(y, training=training), training)

    def initial_cache(self, rows, steps=None):
        cache = super().initial_cache(rows, steps)
        prefix = FIXED if steps is not None else ""
        for j, attention in enumerate(self.lower_attentions, start=1):
            empty = attention.empty_cache(tf.shape(rows)[0], tf.float32,
                                          0 if steps is None else steps)
            cache[f"{prefix}lower_{j}_key"] = empty["key"]
            cache[f"{prefix}lower_{j}_value"] = empty["value"]
        return cache

    def step(self, x, cache, memory_allowed, lower=(), time=None):
        """x: [N, 1, d] at step `time`, lower: the lower layers' inputs at this position ->
        ([N, 1, d], cache); on [N, d] with float32 caches, as the plain layer's step."""
        self._check_lower(lower)
        new_cache = dict(cache)
        prefix = FIXED if FIXED + "self_key" in cache else ""
        at = time if prefix else None
        lower_kv = []
        for j, (keys, values) in enumerate(self._lower_keys_values(lower), start=1):
            key, value = f"{prefix}lower_{j}_key", f"{prefix}lower_{j}_value"
            new_cache[key] = keys = extend(cache[key], tf.cast(keys, tf.float32), at)
            new_cache[value] = values = extend(cache[value], tf.cast(values, tf.float32), at)
            lower_kv.append((keys, values))
        # Keys past `time` in a fixed cache are not yet written.
        allowed = None if at is None else tf.range(tf.shape(cache[prefix + "self_key"])[2]) <= at
        projection = cache[SELF_PROJECTION]

        def attend(y):
            own, updated = self.self_attention.self_attend_step(
                y, {"key": cache[prefix + "self_key"], "value": cache[prefix + "self_value"]},
                projection, at)
            new_cache[prefix + "self_key"] = updated["key"]
            new_cache[prefix + "self_value"] = updated["value"]
            if not lower_kv:
                return own
            lower_contexts = [attention.attend_step(y, keys, values, allowed)
                              for attention, (keys, values) in zip(self.lower_attentions, lower_kv)]
            return self.attention_aggregation([own] + lower_contexts)

        x = self._residual(x[:, 0], self.norms[0], attend, False)
        x = self._residual(x, self.norms[1], lambda y: self.cross_attention.attend_step(
            y, cache["memory_key"], cache["memory_value"], memory_allowed), False)
        x = self._residual(x, self.norms[2], lambda y: self.ffn.step(y, cache[FFN_PARTS]), False)
        return x[:, None], new_cache
