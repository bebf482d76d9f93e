"""Convolutional sequence to sequence learning (Gehring et al. 2017): the residual baseline of
the DenseNMT paper (000, "BASE-4L/8L"), after fairseq's `fconv`.

Encoder: embeddings + learned positions -> linear to the hidden width -> residual GLU
convolutions scaled by sqrt(0.5) -> linear back to the embedding width (z); attention values are
z + e. Decoder: the same with causal convolutions, each layer followed by attention whose query
is the layer's output projected to the embedding width plus the target embedding g.
Following the spec sheet (architectures.md section 1) the context is `softmax(q z^T) (z + e)`;
fairseq also rescales it by sqrt(source length), which we leave out.
"""

import math

import keras
import tensorflow as tf

from tfnmt.layers.attention import NEG_INF
from tfnmt.layers.weight_norm import WeightNormConv1D, WeightNormDense
from tfnmt.models.base import Seq2SeqModel
from tfnmt.models.registry import register

_HALF = math.sqrt(0.5)


def _glu(x):
    a, b = tf.split(x, 2, axis=-1)
    return a * tf.sigmoid(b)


@register("convs2s")
class ConvS2S(Seq2SeqModel):
    HPARAMS = {
        "encoder_layers": (4, "number of encoder layers"),
        "decoder_layers": (4, "number of decoder layers"),
        "embed_dim": (256, "embedding width (also attention width)"),
        "hidden_dim": (256, "convolution (hidden) width"),
        "kernel_size": (3, "convolution kernel width"),
        "dropout": (0.2, "dropout on embeddings and layer inputs"),
        "max_positions": (1024, "learned positions; later positions reuse the last one"),
    }

    def __init__(self, source_vocab_size, target_vocab_size, label_smoothing=0.1, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, label_smoothing, **hparams)
        h = self.hparams
        e, d, k, p = h["embed_dim"], h["hidden_dim"], h["kernel_size"], h["dropout"]
        self.kernel_size = k
        self.max_positions = h["max_positions"]
        init = keras.initializers.RandomNormal(stddev=0.1)
        self.source_embedding = keras.layers.Embedding(source_vocab_size, e, embeddings_initializer=init,
                                                       name="source_embedding")
        self.target_embedding = keras.layers.Embedding(target_vocab_size, e, embeddings_initializer=init,
                                                       name="target_embedding")
        self.source_position_embedding = keras.layers.Embedding(
            self.max_positions, e, embeddings_initializer=init, name="source_position_embedding")
        self.target_position_embedding = keras.layers.Embedding(
            self.max_positions, e, embeddings_initializer=init, name="target_position_embedding")
        self.dropout = keras.layers.Dropout(p)
        self.encoder_in = WeightNormDense(d, dropout_in=p, name="encoder_in")
        self.encoder_convs = [WeightNormConv1D(2 * d, k, dropout_in=p, name=f"encoder_conv_{i}")
                              for i in range(h["encoder_layers"])]
        self.encoder_out = WeightNormDense(e, name="encoder_out")
        self.decoder_in = WeightNormDense(d, dropout_in=p, name="decoder_in")
        self.decoder_convs = [WeightNormConv1D(2 * d, k, causal=True, dropout_in=p,
                                               name=f"decoder_conv_{i}")
                              for i in range(h["decoder_layers"])]
        self.decoder_attention_in = [WeightNormDense(e, name=f"decoder_attention_in_{i}")
                                     for i in range(h["decoder_layers"])]
        self.decoder_attention_out = [WeightNormDense(d, name=f"decoder_attention_out_{i}")
                                      for i in range(h["decoder_layers"])]
        self.decoder_out = WeightNormDense(e, name="decoder_out")
        self.output_projection = WeightNormDense(target_vocab_size, dropout_in=p, name="output_projection")

    def _embed(self, tokens, positions, ids, offset=0, training=False):
        index = tf.minimum(tf.range(tf.shape(ids)[1]) + offset, self.max_positions - 1)
        return self.dropout(tokens(ids) + positions(index)[None], training=training)

    def encode(self, source, training=False):
        mask = self.padding_mask(source)
        keep = tf.cast(mask, self.compute_dtype)[:, :, None]
        e = self._embed(self.source_embedding, self.source_position_embedding, source, training=training)
        x = self.encoder_in(e)
        for conv in self.encoder_convs:
            residual = x
            # Padding is zeroed before every convolution so it never leaks into real positions.
            x = _glu(conv(self.dropout(x, training=training) * keep))
            x = (x + residual) * _HALF
        z = self.encoder_out(x) * keep
        return {"keys": z, "values": (z + e) * keep, "mask": mask}

    def _attend(self, i, x, g, memory):
        """x [N, T, d], g [N, T, e] -> x with the layer's attention added back."""
        query = (self.decoder_attention_in[i](x) + g) * _HALF
        scores = tf.matmul(query, memory["keys"], transpose_b=True)
        scores += (1.0 - tf.cast(memory["mask"], scores.dtype))[:, None, :] * NEG_INF
        weights = tf.nn.softmax(tf.cast(scores, tf.float32), axis=-1)
        context = tf.matmul(tf.cast(weights, x.dtype), memory["values"])
        return (self.decoder_attention_out[i](context) + x) * _HALF

    def _logits(self, x, training=False):
        return self.output_projection(self.dropout(self.decoder_out(x), training=training))

    def decode(self, memory, target_in, training=False):
        g = self._embed(self.target_embedding, self.target_position_embedding, target_in,
                        training=training)
        x = self.decoder_in(g)
        for i, conv in enumerate(self.decoder_convs):
            residual = x
            x = _glu(conv(self.dropout(x, training=training)))
            x = self._attend(i, x, g, memory)
            x = (x + residual) * _HALF
        return self._logits(x, training)

    def initial_state(self, memory):
        batch = tf.shape(memory["keys"])[0]
        width = self.hparams["hidden_dim"]
        # The last k-1 inputs of each causal convolution; zeros are its left padding.
        return {f"layer_{i}": tf.zeros([batch, self.kernel_size - 1, width], self.compute_dtype)
                for i in range(len(self.decoder_convs))}

    def step(self, ids, time, state, memory):
        g = self._embed(self.target_embedding, self.target_position_embedding, ids[:, None],
                        offset=time)
        x = self.decoder_in(g)
        new_state = {}
        for i, conv in enumerate(self.decoder_convs):
            residual = x
            window = tf.concat([state[f"layer_{i}"], x], axis=1)
            new_state[f"layer_{i}"] = window[:, 1:]
            x = _glu(conv.step(window))[:, None]
            x = self._attend(i, x, g, memory)
            x = (x + residual) * _HALF
        return self._logits(x)[:, 0], new_state
