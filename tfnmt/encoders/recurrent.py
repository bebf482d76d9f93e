"""The deep recurrent encoder of DeepLAU and DeepGRU (Wang et al. 2017, eq. 9): `encoder_layers`
LAU or GRU layers of alternating direction (1st left-to-right, 2nd right-to-left, ...), each
reading the whole output sequence of the layer below, joined by `--stack_connection`. A
right-to-left layer reverses each sentence within its own length, so it starts at the real last
token, never at padding.

    encode(source [B, S], training) -> EncoderOutput(outputs [B, S, W], mask [B, S])

(its summary, the mean over real tokens, is layers/part.py's `summary_of`)
"""

import keras
import tensorflow as tf

from tfnmt.data.vocab import PAD_ID
from tfnmt.layers.hparams import ENCODER_LAYERS
from tfnmt.layers.lau import HPARAMS, connect, initializers, recurrent_cell, stacked_width
from tfnmt.layers.part import Encoder, EncoderOutput, register_encoder


@register_encoder("recurrent")
class RecurrentEncoder(Encoder):
    HPARAMS = {"encoder_layers": ENCODER_LAYERS.but(default=4), **HPARAMS}

    def __init__(self, hparams, vocab_size, **kwargs):
        super().__init__(hparams, **kwargs)
        h = self.hparams
        embed_dim, stacked = h["embed_dim"], stacked_width(h)
        self.output_width = self.summary_width = stacked
        dense, embedding, recurrent = initializers(h["init_stddev"])
        self.connection = h["stack_connection"]
        self.embedding = keras.layers.Embedding(vocab_size, embed_dim, name="source_embedding",
                                                **embedding())
        self.dropout = keras.layers.Dropout(h["dropout"])
        widths = [embed_dim] + [stacked] * (h["encoder_layers"] - 1)
        self.cells = [self.build_now(recurrent_cell(h["cell"], h["hidden_dim"], f"encoder_cell_{i}",
                                                    recurrent), (None, width))
                      for i, width in enumerate(widths)]
        self.rnns = [keras.layers.RNN(c, return_sequences=True, name=f"encoder_rnn_{i}")
                     for i, c in enumerate(self.cells)]
        self.fast = [] if self.connection != "fast_forward" else [
            self.build_now(keras.layers.Dense(h["hidden_dim"], name=f"encoder_fast_{i}",
                                              use_bias=False, **dense()), (None, width))
            for i, width in enumerate(widths)]

    def encode(self, source, training=False):
        mask = tf.not_equal(source, PAD_ID)
        lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
        x = self.dropout(self.embedding(source), training=training)
        keep = tf.cast(mask, x.dtype)[:, :, None]
        x = x * keep
        for i, rnn in enumerate(self.rnns):
            if i % 2:  # right to left: reverse every sentence within its own length
                flipped = tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)
                h = tf.reverse_sequence(rnn(flipped, mask=mask, training=training), lengths,
                                        seq_axis=1, batch_axis=0)
            else:
                h = rnn(x, mask=mask, training=training)
            x = connect(self.connection, i, x, h * keep, self.fast) * keep
        return EncoderOutput(outputs=x, mask=mask)
