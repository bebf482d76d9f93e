"""A stacked-LSTM decoder with Luong et al.'s (2015) global attention, "general" score and input
feeding, behind any encoder that gives a sequence (models/hybrid.py):

    x_t  = [E y_{t-1}; h~_{t-1}]                          input feeding (h~_0 = 0)
    h_t  = LSTM stack (x_t)                               `decoder_layers` layers, zero start
    a_t  = softmax_s(h_t^T W_a h_s)                       over the encoder's outputs h_s
    c_t  = sum_s a_ts h_s
    h~_t = tanh(W_c [c_t; h_t])
    p(y_t) = softmax(W_s dropout(h~_t))

    memory(encoded) -> {"outputs", "mask", "keys": W_a^T h_s, once per sentence}
    initial_state(memory) -> {"layer_i": {"h", "c"}, "attentional": h~}, zeros
    step(ids [N], time, state, memory) -> (logits [N, V], state)

The LSTM starts from zeros rather than from the encoder's last state, so that every encoder can
feed it. Teacher forcing runs the step in a tf.while_loop over time (input feeding makes each
position depend on the previous one), so the two cannot disagree; dropout applies to the
embeddings and to h~ outside the loop.
"""

import keras
import tensorflow as tf

from tfnmt.layers.attention import masked_logits, record_weights
from tfnmt.layers.hparams import DECODER_LAYERS, HParam
from tfnmt.layers.part import Decoder, register_decoder


@register_decoder("luong")
class LuongDecoder(Decoder):
    HPARAMS = {
        "decoder_layers": DECODER_LAYERS.but(default=2),
        "lstm_units": HParam(512, "LSTM width of the Luong decoder (and of its attentional vector)",
                             bounds=">= 1"),
        "lstm_embed_dim": HParam(512, "target embedding width of the Luong decoder", bounds=">= 1"),
        "lstm_dropout": HParam(0.3, "dropout on the Luong decoder's embeddings and attentional "
                                    "vector", bounds="[0, 1)"),
    }
    attends = True

    def __init__(self, hparams, vocab_size, encoder, **kwargs):
        super().__init__(hparams, **kwargs)
        h = self.hparams
        units, embed_dim = h["lstm_units"], h["lstm_embed_dim"]
        self.units = units
        self.embedding = keras.layers.Embedding(vocab_size, embed_dim, name="target_embedding")
        self.dropout = keras.layers.Dropout(h["lstm_dropout"])
        # Built now: the step runs inside a tf.while_loop, where variables cannot be created.
        widths = [embed_dim + units] + [units] * (h["decoder_layers"] - 1)
        self.cells = [self.build_now(keras.layers.LSTMCell(units, name=f"decoder_lstm_{i}"),
                                     (None, width)) for i, width in enumerate(widths)]
        self.attention_keys = self.build_now(
            keras.layers.Dense(units, use_bias=False, name="decoder_attention_keys"),
            (None, encoder.output_width))
        self.attentional = self.build_now(
            keras.layers.Dense(units, use_bias=False, activation="tanh", name="decoder_attentional"),
            (None, encoder.output_width + units))
        self.output_projection = self.build_now(
            keras.layers.Dense(vocab_size, name="output_projection"), (None, units))

    def memory(self, encoded):
        return {"outputs": encoded.outputs, "mask": encoded.mask,
                "keys": self.attention_keys(encoded.outputs)}

    def initial_state(self, memory):
        zeros = tf.zeros([tf.shape(memory["mask"])[0], self.units], self.embedding.compute_dtype)
        return {"attentional": zeros,
                **{f"layer_{i}": {"h": zeros, "c": zeros} for i in range(len(self.cells))}}

    def _step(self, y, state, memory):
        """y [N, E] (embedded y_{t-1}) -> (h~_t [N, units], new state)."""
        x = tf.concat([y, state["attentional"]], axis=-1)
        new_state = {}
        for i, cell in enumerate(self.cells):
            x, (h, c) = cell(x, [state[f"layer_{i}"]["h"], state[f"layer_{i}"]["c"]])
            new_state[f"layer_{i}"] = {"h": h, "c": c}
        scores = tf.einsum("nsd,nd->ns", memory["keys"], tf.cast(x, memory["keys"].dtype))
        weights = tf.nn.softmax(masked_logits(scores, memory["mask"]), axis=-1)
        record_weights(self, weights[:, None])
        context = tf.einsum("ns,nsd->nd", tf.cast(weights, memory["outputs"].dtype), memory["outputs"])
        attentional = self.attentional(tf.concat([tf.cast(context, x.dtype), x], axis=-1))
        new_state["attentional"] = attentional
        return attentional, new_state

    def decode(self, memory, target_in, training=False):
        attentional = self.run_steps(self.dropout(self.embedding(target_in), training=training),
                                     memory)
        return self.output_projection(self.dropout(attentional, training=training))

    def latest_attention(self):
        return self.last_weights

    def step(self, ids, time, state, memory):
        attentional, state = self._step(self.embedding(ids), state, memory)
        return self.output_projection(attentional), state
