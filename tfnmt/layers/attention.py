"""Multi-head scaled dot-product attention with an incremental key/value cache.

Masks are boolean, broadcast to [B, heads, T_q, T_k]: True where attention is allowed, False
where it is not (padding, future positions). They are applied with `where` on float32 logits:
an additive -1e9 bias would be cast by Keras to a float16 compute dtype, where it is -inf, and
a mask multiplied into it (0 * -inf) is NaN.
"""

import keras
import tensorflow as tf

from tfnmt.layers.configured import Configured
from tfnmt.parts import in_parts

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
        context = self._context(self._split_heads(self.query_dense(query)), keys, values, allowed,
                                training)
        batch, length = tf.shape(context)[0], tf.shape(context)[2]
        context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [batch, length, self.depth])
        return self.output_dense(context)

    def _context(self, q, keys, values, allowed, training=False):
        """Projected queries [B, heads, T, d/heads] over keys/values: the heads' contexts, of
        the same shape."""
        q *= tf.cast(self.depth // self.num_heads, q.dtype) ** -0.5
        logits = tf.matmul(q, keys, transpose_b=True)
        weights = tf.nn.softmax(tf.cast(logits, tf.float32) if allowed is None
                                else masked_logits(logits, allowed), axis=-1)
        # Alignments: averaged over the heads.
        record_weights(self, tf.reduce_mean(weights, axis=1))
        weights = self.dropout_layer(tf.cast(weights, values.dtype), training=training)
        return tf.matmul(weights, values)

    def _step_context(self, q, keys, values, allowed):
        """`_context` of one position's queries over float32 keys/values (a decoding step's
        caches): float32 products by TensorFlow's own batched matmul. oneDNN's, which
        tf.matmul runs on this build, takes 1.3 to 1.7 times as long on a step's hundreds of
        1 x 64 by 64 x t products and hardly less in bfloat16, where Eigen's is slower still
        (tools/step_kernels.py)."""
        q *= (self.depth // self.num_heads) ** -0.5
        logits = tf.raw_ops.BatchMatMulV3(x=q, y=keys, Tout=tf.float32, adj_y=True)
        weights = tf.nn.softmax(logits if allowed is None else masked_logits(logits, allowed),
                                axis=-1)
        # One row per query, [N, 1, S], whether its queries came one or k to a memory row.
        record_weights(self, tf.reshape(tf.reduce_mean(weights, axis=1),
                                        [-1, 1, tf.shape(weights)[-1]]))
        return tf.raw_ops.BatchMatMulV3(x=weights, y=values, Tout=tf.float32)

    def _step_output(self, context):
        """The heads' contexts [N, heads, 1, d/heads] (or [N / k, k, heads, d/heads]) of one
        position -> the output [N, d]."""
        return self.output_dense(tf.cast(tf.reshape(context, [-1, self.depth]),
                                         self.compute_dtype))

    def attend_step(self, x, keys, values, allowed=None):
        """`attend` for one position x [N, d] (a decoding step) over float32 keys/values
        (`step_key_value`) [M, heads, S, d/heads]: [N, d]. With M = N / k, every k
        consecutive rows of x query one row of keys and values (a beam's hypotheses, their
        sentence's memory), as k queries of one product: the memory is read once a
        sentence, not once a hypothesis, and never tiled. `allowed` broadcasts to
        [M, heads, k, S]."""
        heads, depth = self.num_heads, self.depth // self.num_heads
        q = tf.reshape(self.query_dense(x), [tf.shape(keys)[0], -1, heads, depth])
        # [M, heads, k, d/heads]; at k = 1 the transposes move no data.
        q = tf.transpose(tf.cast(q, tf.float32), [0, 2, 1, 3])
        context = self._step_context(q, keys, values, allowed)
        return self._step_output(tf.transpose(context, [0, 2, 1, 3]))

    def step_key_value(self, values):
        """`project_key_value` as decoding steps read them: float32."""
        return tuple(tf.cast(x, tf.float32) for x in self.project_key_value(values))

    def fused_projection(self):
        """(kernel [d, 3d], bias [3d]) in the compute dtype, each in column blocks
        (tfnmt/parts.py): the query, key and value projections side by side, for
        `self_attend_step`."""
        denses = (self.query_dense, self.key_dense, self.value_dense)
        kernel = tf.cast(tf.concat([dense.kernel for dense in denses], 1), self.compute_dtype)
        bias = tf.cast(tf.concat([dense.bias for dense in denses], 0), self.compute_dtype)
        return in_parts(kernel), in_parts(bias)

    def self_attend_step(self, x, cache, projection, time=None):
        """Self-attention of one position x [N, d] (a decoding step) with the `cache` of the
        earlier ones, its three projections one product in blocks (`projection`,
        `fused_projection`'s): (output [N, d], the cache with this position, as `call` returns
        it)."""
        fused = tf.concat([tf.nn.bias_add(tf.matmul(x, kernel), bias)
                           for kernel, bias in zip(*projection)], axis=-1)
        q, k, v = tf.unstack(tf.cast(tf.reshape(
            fused, [-1, 3, self.num_heads, 1, self.depth // self.num_heads]), tf.float32), axis=1)
        keys, values = extend(cache["key"], k, time), extend(cache["value"], v, time)
        allowed = None if time is None else tf.range(tf.shape(keys)[2]) <= time
        return (self._step_output(self._step_context(q, keys, values, allowed)),
                {"key": keys, "value": values})

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


# A decoder step's cache entry (per layer) that holds its self-attention's projections as
# one (`MultiHeadAttention.fused_projection`), made once per batch or per export.
SELF_PROJECTION = "self_projection"

# A decoder layer's cache entry named with this prefix holds every step's position (allocated
# at the search's length, written at `time`: decoding/compiled.py); without it, it grows.
FIXED = "fixed_"


def extend(cache, new, time=None):
    """A cache [N, H, t, d] with the new position [N, H, 1, d]: appended (time None), or
    written at position `time` of a cache that holds every step."""
    if time is None:
        return tf.concat([cache, new], axis=2)
    return tf.where(tf.equal(tf.range(tf.shape(cache)[2]), time)[:, None], new, cache)
