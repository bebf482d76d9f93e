"""Multi-head scaled dot-product attention with an incremental key/value cache.

Masks are boolean, broadcast to [B, heads, T_q, T_k]: True where attention is allowed, False
where it is not (padding, future positions). They are applied with `where` on float32 logits:
an additive -1e9 bias would be cast by Keras to a float16 compute dtype, where it is -inf, and
a mask multiplied into it (0 * -inf) is NaN.
"""

import keras
import tensorflow as tf

from tfnmt.layers.configured import Configured

NEG_INF = -1e9


def key_mask(mask):
    """[B, S] bool (True = real token) -> [B, 1, 1, S] bool. With `expand_dims`: TFLite has no
    builtin for a strided slice adding axes to a tensor of two unknown dimensions (the memory
    mask inside the decoding loop, whose batch shrinks as sentences finish)."""
    return tf.expand_dims(tf.expand_dims(mask, 1), 1)


def causal_mask(length):
    """[1, 1, T, T] bool that hides future positions."""
    return tf.linalg.band_part(tf.ones([length, length], tf.bool), -1, 0)[None, None]


def masked_logits(logits, allowed):
    """float32 `logits` with the positions where `allowed` (broadcastable bool) is False set to
    NEG_INF, exact whatever the compute dtype."""
    return tf.where(allowed, tf.cast(logits, tf.float32), NEG_INF)


def record_weights(layer, weights):
    """Leaves the attention weights of `layer`'s latest call on it, for alignments
    (models/base.py `latest_attention`): a graph tensor of the trace that made it, which an
    unused read leaves out of the graph. Set past Keras' tracking, which must not save it."""
    object.__setattr__(layer, "last_weights", weights)


@keras.saving.register_keras_serializable(package="tfnmt")
class MultiHeadAttention(Configured, keras.layers.Layer):
    """Attention of queries [B, T, d] over keys/values [B, S, d] with `num_heads` heads.

    `project_key_value` and `attend` are exposed separately so that decoders can compute the
    cross-attention keys/values once per sentence and reuse them at every decoding step.
    """

    def __init__(self, num_heads, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.set_config(num_heads=num_heads, dropout=dropout)

    def build(self, query_shape, value_shape=None):
        depth = query_shape[-1]
        if depth % self.num_heads:
            raise ValueError(f"model width {depth} is not divisible by {self.num_heads} heads")
        self.depth = depth
        self.query_dense = keras.layers.Dense(depth, name="query")
        self.key_dense = keras.layers.Dense(depth, name="key")
        self.value_dense = keras.layers.Dense(depth, name="value")
        self.output_dense = keras.layers.Dense(depth, name="output")
        value_shape = value_shape or query_shape
        self.query_dense.build(query_shape)
        self.key_dense.build(value_shape)
        self.value_dense.build(value_shape)
        self.output_dense.build(query_shape)
        self.dropout_layer = keras.layers.Dropout(self.dropout)

    def _split_heads(self, x):
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        x = tf.reshape(x, [batch, length, self.num_heads, self.depth // self.num_heads])
        return tf.transpose(x, [0, 2, 1, 3])

    def project_key_value(self, values):
        """[B, S, d] -> (keys, values), each [B, heads, S, d/heads]."""
        return self._split_heads(self.key_dense(values)), self._split_heads(self.value_dense(values))

    def attend(self, query, keys, values, allowed=None, training=False):
        """Attention of [B, T, d] queries over projected keys/values; returns [B, T, d]."""
        q = self._split_heads(self.query_dense(query))
        q *= tf.cast(self.depth // self.num_heads, q.dtype) ** -0.5
        logits = tf.matmul(q, keys, transpose_b=True)
        weights = tf.nn.softmax(tf.cast(logits, tf.float32) if allowed is None
                                else masked_logits(logits, allowed), axis=-1)
        # Alignments: averaged over the heads.
        record_weights(self, tf.reduce_mean(weights, axis=1))
        weights = self.dropout_layer(tf.cast(weights, values.dtype), training=training)
        context = tf.matmul(weights, values)
        batch, length = tf.shape(context)[0], tf.shape(context)[2]
        context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [batch, length, self.depth])
        return self.output_dense(context)

    def call(self, query, value=None, allowed=None, cache=None, training=False, time=None):
        """Self-attention when `value` is None. With `cache` ({"key", "value"} of earlier steps),
        the new keys/values are added and the updated cache is returned as a second output:
        appended, or with `time`, written at position `time` of a cache that holds every step
        (`fixed_cache`), attending to the positions up to `time`."""
        keys, values = self.project_key_value(query if value is None else value)
        if cache is None:
            return self.attend(query, keys, values, allowed, training)
        keys, values = (extend(cache["key"], keys, time), extend(cache["value"], values, time))
        if time is not None:
            allowed = tf.range(tf.shape(keys)[2]) <= time
        return self.attend(query, keys, values, allowed, training), {"key": keys, "value": values}

    def empty_cache(self, batch_size, dtype=tf.float32, steps=0):
        """Keys/values of no position yet; with `steps`, zeros for that many (a fixed cache)."""
        shape = [batch_size, self.num_heads, steps, self.depth // self.num_heads]
        return {"key": tf.zeros(shape, dtype), "value": tf.zeros(shape, dtype)}


# A decoder layer's cache entry named with this prefix holds every step's position (allocated
# at the search's length, written at `time`: decoding/compiled.py); without it, it grows.
FIXED = "fixed_"


def extend(cache, new, time=None):
    """A cache [N, H, t, d] with the new position [N, H, 1, d]: appended (time None), or
    written at position `time` of a cache that holds every step."""
    if time is None:
        return tf.concat([cache, new], axis=2)
    return tf.where(tf.equal(tf.range(tf.shape(cache)[2]), time)[:, None], new, cache)
