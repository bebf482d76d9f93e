"""The decoder of Cho et al. 2014 over a fixed-length source encoding c (no attention; layers/
conditional_gru_decoder.py): s_0 = tanh(V c), s_t = GRU(y_{t-1}, s_{t-1}, c) with c in both
gates and in the candidate (`--decoder_gru_form`: GroundHog's or the appendix's),
o_t = maxout(O [s_t; y_{t-1}; c]), p(y_t) = softmax(G_l G_r o_t), where G_r maps o_t to
`embed_dim` and G_l to the vocabulary (Cho et al.'s rank-`embed_dim` output matrix).

    decode(memory, target_in [B, T], training) -> logits [B, T, V]
    initial_state(memory) -> {"state": s [N, hidden_dim]}
    step(ids [N], time, state, memory) -> (logits [N, V], state)

`memory` is {"encoding": c [B, W']}, the encoder's summary (encoders/conv_sentence.py,
encoders/gru.py; behind a sequence encoder, the mean of its outputs: layers/part.py).
"""

import keras

from tfnmt.layers.conditional_gru_decoder import FORMS, ConditionalGRUDecoder
from tfnmt.layers.fixed_encoding import HPARAMS
from tfnmt.layers.hparams import HParam
from tfnmt.layers.part import Decoder, register_decoder, summary_of


@register_decoder("conditional_gru")
class ConditionalGRU(Decoder):
    READS = "summary"
    HPARAMS = {**HPARAMS, "maxout_dim": HParam(500, "maxout units of the decoder's deep output",
                                               bounds=">= 1"),
               "decoder_gru_form": HParam(
                   "groundhog", "the decoder GRU's candidate: groundhog = tanh(W y + C c + "
                   "U (r * s)), as GroundHog, which paper 004 ran; appendix = tanh(W y + r * "
                   "(U s + C c)), as Cho et al.'s appendix A.1.2 prints it", choices=FORMS)}

    def __init__(self, hparams, vocab_size, encoder, **kwargs):
        super().__init__(hparams, **kwargs)
        h = self.hparams
        embed_dim = h["embed_dim"]
        self.embedding = keras.layers.Embedding(vocab_size, embed_dim, name="target_embedding")
        self.dropout = keras.layers.Dropout(h["dropout"])
        self.gru = self.build_now(ConditionalGRUDecoder(h["hidden_dim"], h["maxout_dim"],
                                                        h["decoder_gru_form"], name="decoder"),
                                  ((None, None, embed_dim), (None, encoder.summary_width)))
        self.output_bottleneck = self.build_now(
            keras.layers.Dense(embed_dim, use_bias=False, name="output_bottleneck"),
            (None, h["maxout_dim"]))
        self.output_projection = self.build_now(
            keras.layers.Dense(vocab_size, name="output_projection"), (None, embed_dim))

    def memory(self, encoded):
        return {"encoding": summary_of(encoded)}

    def _logits(self, o, training=False):
        return self.output_projection(self.output_bottleneck(self.dropout(o, training=training)))

    def decode(self, memory, target_in, training=False):
        y = self.dropout(self.embedding(target_in), training=training)
        return self._logits(self.gru((y, memory["encoding"]), training=training), training)

    def initial_state(self, memory):
        return {"state": self.gru.initial_state(memory["encoding"])}

    def step(self, ids, time, state, memory):
        o, s = self.gru.step(self.embedding(ids), memory["encoding"], state["state"])
        return self._logits(o), {"state": s}
