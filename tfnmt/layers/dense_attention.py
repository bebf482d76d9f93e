"""DenseAtt (DenseNMT, paper 000, eq. 8-10): attention of a decoder layer over ALL encoder layers.

Both variants use the multiplicative core F(Q, K, V) = softmax(Q K^T) V (eq. 8) and linear maps
L(.) to the attention width. The encoder side is projected once per sentence (`project_memory`)
and reused at every decoding step, as the decoder's incremental state does not depend on it.

  DenseAtt-1 (eq. 9):  a = F(L(z), P, P + L(h^0)),  P = L([h^1; ...; h^L])
      The same projection P serves as keys and, plus the embedding term, as values, mirroring
      ConvS2S's keys z and values z + e.
  DenseAtt-2 (eq. 10): a = sum_i F(L(z), L_i(h^i), L'_i([h^i; h^0]))
      with L'_i([h^i; h^0]) = L_i(h^i) + L(h^0): the paper's "same number of parameters".
"""

import keras
import tensorflow as tf

from tfnmt.layers.attention import masked_logits, record_weights
from tfnmt.layers.configured import Configured


def attend(query, keys, values, mask, layer=None, scale=None):
    """query [N, T, a], keys/values [M, S, a], mask [M, S] -> [N, T, a], times `scale` [M]
    when given. M = N, or M = N / k: every k consecutive rows of the query read one row of
    keys and values (a beam's hypotheses, their sentence's memory: decoding/shared.py
    BY_SENTENCE), as k T queries of one product. The weights [N, T, S] are left on `layer` as
    `last_weights` (attention.record_weights)."""
    # T as a constant where it is known (1 in a decoding step): fewer shape ops a step.
    length = query.shape[1] if query.shape[1] is not None else tf.shape(query)[1]
    grouped = tf.reshape(query, [tf.shape(keys)[0], -1, query.shape[-1]])
    # expand_dims, not mask[:, None]: see attention.key_mask.
    scores = masked_logits(tf.matmul(grouped, keys, transpose_b=True), tf.expand_dims(mask, 1))
    weights = tf.nn.softmax(scores, axis=-1)
    if layer is not None:
        record_weights(layer, tf.reshape(weights, [-1, length, tf.shape(keys)[1]]))
    context = tf.matmul(tf.cast(weights, values.dtype), values)
    if scale is not None:
        context *= scale[:, None, None]
    return tf.reshape(context, [-1, length, values.shape[-1]])


@keras.saving.register_keras_serializable(package="tfnmt")
class DenseAttention1(Configured, keras.layers.Layer):
    def __init__(self, attention_dim, **kwargs):
        super().__init__(**kwargs)
        self.set_config(attention_dim=attention_dim)
        self.query = keras.layers.Dense(attention_dim, name="query")
        self.layers_projection = keras.layers.Dense(attention_dim, name="layers")
        self.embedding_projection = keras.layers.Dense(attention_dim, use_bias=False, name="embedding")

    def project_memory(self, encoder_layers, embedding, mask):
        """encoder_layers: [h^1..h^L], each [B, S, d_i]; embedding h^0 [B, S, d_0]."""
        # Not called through __call__, so without this scope the projections would be built
        # (and checkpointed) under the caller's name, colliding across decoder layers.
        with keras.name_scope(self.name):
            projected = self.layers_projection(tf.concat(encoder_layers, axis=-1))
            return {"keys": projected, "values": projected + self.embedding_projection(embedding),
                    "mask": mask}

    def call(self, z, memory):
        return attend(self.query(z), memory["keys"], memory["values"], memory["mask"], self)


@keras.saving.register_keras_serializable(package="tfnmt")
class DenseAttention2(Configured, keras.layers.Layer):
    """L_i(h^i) = K_i h^i and L'_i([h^i; h^0]) = K_i h^i + E h^0 + b: the value map's h^i block is
    the key map and its h^0 block is shared by every layer, as DenseAtt-1's values are its keys
    plus L(h^0). That is what keeps DenseAtt-2 at DenseAtt-1's parameter count, as the paper
    states (eq. 10): sum_i d_i x a for the keys (DenseAtt-1's projection of the concatenation),
    d_0 x a + a for the embedding term, and the query."""

    def __init__(self, attention_dim, num_encoder_layers, **kwargs):
        super().__init__(**kwargs)
        self.set_config(attention_dim=attention_dim, num_encoder_layers=num_encoder_layers)
        self.query = keras.layers.Dense(attention_dim, name="query")
        # No key bias: it would add the same q.b to every source position, which softmax ignores.
        self.key_projections = [keras.layers.Dense(attention_dim, use_bias=False, name=f"key_{i}")
                                for i in range(num_encoder_layers)]
        self.embedding_projection = keras.layers.Dense(attention_dim, name="embedding")

    def project_memory(self, encoder_layers, embedding, mask):
        if len(encoder_layers) != self.num_encoder_layers:
            raise ValueError(f"expected {self.num_encoder_layers} encoder layers, got {len(encoder_layers)}")
        with keras.name_scope(self.name):  # see DenseAttention1.project_memory
            keys = [k(h) for k, h in zip(self.key_projections, encoder_layers)]
            embedded = self.embedding_projection(embedding)
            return {"keys": keys, "values": [k + embedded for k in keys], "mask": mask}

    def call(self, z, memory):
        query = self.query(z)
        contexts, weights = [], []
        for k, v in zip(memory["keys"], memory["values"]):
            contexts.append(attend(query, k, v, memory["mask"], self))
            weights.append(self.last_weights)
        # Alignments: the mean over the encoder layers' attentions (each sums to 1).
        record_weights(self, tf.add_n(weights) / len(weights))
        return tf.add_n(contexts)
