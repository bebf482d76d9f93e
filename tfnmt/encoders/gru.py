"""The GRU encoder of Cho et al. 2014: a GRU over the source whose last state, taken at the
sentence's real last token (eos), not at batch padding, gives c = tanh(V h_N).

    encode(source [B, S], training) -> EncoderOutput(summary=c [B, hidden_dim])
"""

import keras
import tensorflow as tf

from tfnmt.data.vocab import PAD_ID
from tfnmt.layers.fixed_encoding import HPARAMS
from tfnmt.layers.part import Encoder, EncoderOutput, register_encoder


@register_encoder("gru")
class GRUEncoder(Encoder):
    HPARAMS = HPARAMS
    GIVES_SEQUENCE = False

    def __init__(self, hparams, vocab_size, **kwargs):
        super().__init__(hparams, **kwargs)
        h = self.hparams
        self.summary_width = h["hidden_dim"]
        self.embedding = keras.layers.Embedding(vocab_size, h["embed_dim"], name="source_embedding")
        self.dropout = keras.layers.Dropout(h["dropout"])
        self.gru = keras.layers.GRU(h["hidden_dim"], reset_after=False, name="encoder_gru")
        self.summary = self.build_now(
            keras.layers.Dense(h["hidden_dim"], activation="tanh", name="encoder_summary"),
            (None, h["hidden_dim"]))

    def encode(self, source, training=False):
        mask = tf.not_equal(source, PAD_ID)
        x = self.dropout(self.embedding(source), training=training)
        # With the mask, the GRU carries its state over padding: its output is h_N, the state
        # after the last real token; c = tanh(V h_N) (Cho et al.'s appendix A.1.1).
        return EncoderOutput(summary=self.summary(self.gru(x, mask=mask, training=training)))
