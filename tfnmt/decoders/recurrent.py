"""The deep recurrent decoder of DeepLAU and DeepGRU (Wang et al. 2017) with additive attention
(eq. 10-11): e_tj = v^T tanh(W_a s^1_{t-1} + U_a h_j + W_y y_{t-1}), the query made of the
FIRST decoder layer's previous state and the previous target embedding. `decoder_layers`
forward layers; layer 1 reads [c_t; y_{t-1}]; the prediction is softmax(W_o dropout(s^top_t)).

    memory(encoded) -> encoded plus "keys" (U_a h_j, once per sentence)
    decode(memory, target_in [B, T], training) -> logits [B, T, V]
    initial_state(memory) -> {"layer_i": s^i [N, hidden_dim]}
    step(ids [N], time, state, memory) -> (logits [N, V], state)

`encoded` is any encoder's sequence (encoders/recurrent.py in DeepLAU/DeepGRU). Every decoder
layer starts from tanh(W_l s), s the encoder's summary (the mean of its outputs over the real
tokens, unless it gives its own: layers/part.py `summary_of`), and the teacher-forced pass runs the same step
function as incremental decoding, inside one tf.while_loop over time, so the two cannot
disagree.
"""

import keras
import tensorflow as tf

from tfnmt.layers.attention import masked_logits, record_weights
from tfnmt.layers.hparams import ATTENTION_DIM, DECODER_LAYERS, HParam
from tfnmt.layers.lau import HPARAMS, connect, initializers, recurrent_cell, stacked_width
from tfnmt.layers.part import Decoder, register_decoder, summary_of


@register_decoder("recurrent")
class RecurrentDecoder(Decoder):
    HPARAMS = {
        "decoder_layers": DECODER_LAYERS.but(default=4), **HPARAMS,
        "attention_dim": ATTENTION_DIM.but(default=512, help="additive attention width"),
        "output_dropout": HParam(0.5, "dropout on the top decoder state before the softmax layer",
                                 bounds="[0, 1)"),
    }

    def __init__(self, hparams, vocab_size, encoder, **kwargs):
        super().__init__(hparams, **kwargs)
        h = self.hparams
        embed_dim, hidden, attention = h["embed_dim"], h["hidden_dim"], h["attention_dim"]
        stacked = stacked_width(h)
        memory_width = encoder.output_width
        self.connection = h["stack_connection"]
        dense, embedding, recurrent = initializers(h["init_stddev"])
        self.embedding = keras.layers.Embedding(vocab_size, embed_dim, name="target_embedding",
                                                **embedding())
        self.dropout = keras.layers.Dropout(h["dropout"])
        self.output_dropout = keras.layers.Dropout(h["output_dropout"])

        # Built here, with the widths known from the flags, because the decoder calls them
        # inside a tf.while_loop, where variables cannot be created.
        def linear(units, name, width, **kwargs):
            return self.build_now(keras.layers.Dense(units, name=name, **kwargs, **dense()), (None, width))

        widths = [memory_width + embed_dim] + [stacked] * (h["decoder_layers"] - 1)
        self.cells = [self.build_now(recurrent_cell(h["cell"], hidden, f"decoder_cell_{i}", recurrent),
                                     (None, width)) for i, width in enumerate(widths)]
        self.fast = [] if self.connection != "fast_forward" else [
            linear(hidden, f"decoder_fast_{i}", width, use_bias=False) for i, width in enumerate(widths)]
        self.init = [linear(hidden, f"decoder_init_{i}", encoder.summary_width, activation="tanh")
                     for i in range(h["decoder_layers"])]
        self.attention_query = linear(attention, "decoder_attention_query", hidden, use_bias=False)
        self.attention_embedding = linear(attention, "decoder_attention_embedding", embed_dim,
                                          use_bias=False)
        self.attention_keys = linear(attention, "decoder_attention_keys", memory_width)
        self.attention_v = linear(1, "decoder_attention_v", attention, use_bias=False)
        self.output_projection = linear(vocab_size, "output_projection", stacked)

    def memory(self, encoded):
        return {"outputs": encoded.outputs, "mask": encoded.mask, "summary": summary_of(encoded),
                "keys": self.attention_keys(encoded.outputs)}

    def initial_state(self, memory):
        return {f"layer_{i}": init(memory["summary"]) for i, init in enumerate(self.init)}

    def _attend(self, s1, y, memory):
        """Context [N, width] from the first layer's previous state s1 and embedding y."""
        query = self.attention_query(s1) + self.attention_embedding(y)
        scores = self.attention_v(tf.tanh(memory["keys"] + query[:, None]))[:, :, 0]
        weights = tf.nn.softmax(masked_logits(scores, memory["mask"]), axis=-1)
        record_weights(self, weights[:, None])
        return tf.einsum("ns,nsd->nd", tf.cast(weights, memory["outputs"].dtype), memory["outputs"])

    def _step(self, y, state, memory):
        """y [N, E] (embedded y_{t-1}) -> (top features [N, width], new state)."""
        x = tf.concat([self._attend(state["layer_0"], y, memory), y], axis=-1)
        new_state = {}
        for i, cell in enumerate(self.cells):
            h, _ = cell(x, [state[f"layer_{i}"]])
            new_state[f"layer_{i}"] = h
            x = connect(self.connection, i, x, h, self.fast)
        return x, new_state

    def decode(self, memory, target_in, training=False):
        top = self.run_steps(self.dropout(self.embedding(target_in), training=training), memory)
        return self.output_projection(self.output_dropout(top, training=training))

    # Alignments: the attention of the latest `step` (`decode` runs its steps in a loop whose
    # weights stay inside it), models/base.py.
    attends = True

    def latest_attention(self):
        return self.last_weights

    def step(self, ids, time, state, memory):
        top, state = self._step(self.embedding(ids), state, memory)
        return self.output_projection(top), state
