"""The convolutional decoders of DenseNMT (Shen et al. 2018, eq. 7) and ConvS2S (Gehring et al.
2017), with their attention: ConvS2S's multi-step attention, or DenseAtt-1/-2 (eq. 9/10), or
none.

    memory(encoded) -> {"mask", and "keys", "values" (multistep) or "layers" (DenseAtt)}
    decoding_memory(memory) -> the mask, and that memory one row a sentence (BY_SENTENCE)
    decode(memory, target_in [B, T], training) -> logits [B, T, V]
    initial_state(memory) -> {"layer_i" / "summary_i": the last kernel_size - 1 inputs of
                              that causal convolution, [N, k - 1, width]}
    step(ids [N], time, state, memory) -> (logits [N, V], state)

Multi-step attention reads any encoder's outputs (keys z = the outputs mapped to `embed_dim`;
values z, plus the embedded source when the encoder gives one `embed_dim` wide: extras
"embedded"). DenseAtt needs the DenseNMT encoder's layers (extras "layers" and "base"), so
behind another encoder the attention is multistep or none.

Teacher forcing and incremental steps run one code path: in a step, each causal convolution
reads a window made of its cached last k-1 inputs and the new position.
"""

import tensorflow as tf

from tfnmt.decoding.shared import (BY_SENTENCE, SHARED, output_kernel, split_shared,
                                   with_output_kernel, with_shared)
from tfnmt.layers.conv_blocks import (HALF, HPARAMS, STACKS, GLUConv, LearnedEmbedder,
                                      MultiStepAttention, SummaryLayer, scale_gradient,
                                      summary_after)
from tfnmt.layers.dense_attention import DenseAttention1, DenseAttention2
from tfnmt.layers.hparams import ATTENTION_DIM, DECODER_LAYERS, HParam
from tfnmt.layers.part import Decoder, register_decoder
from tfnmt.layers.transformer_layers import tied_logits
from tfnmt.layers.weight_norm import WeightNormDense

ATTENTIONS = ("multistep", "dense1", "dense2", "none")


@register_decoder("densenmt")
class ConvDecoder(Decoder):
    HPARAMS = {"decoder_layers": DECODER_LAYERS.but(default=4),
               "decoder": HParam("dense", "decoder stack", choices=STACKS),
               "attention": HParam("dense2", "attention", choices=ATTENTIONS),
               "attention_dim": ATTENTION_DIM.but(default=128, help="DenseAtt width (eq. 9/10)"),
               # ConvS2S's (Gehring et al. 2017, sec. 3.4, as fairseq's fconv), for multistep
               # attention: the BASE rows of paper 000 are that model.
               "scale_context": HParam(True, "multistep attention: each context times "
                                             "sqrt(source length without padding)"),
               "scale_encoder_gradients": HParam(True, "multistep attention: gradients into the "
                                                       "encoder output z times 1 / (2 x attention "
                                                       "layers); the forward pass is unchanged"),
               "scale_values": HParam(True, "multistep attention: values (z + e) times sqrt(0.5)"),
               "tie_output": HParam(False, "the softmax table is the target embedding table "
                                           "(--table_dim wide, no bias); not the paper's"),
               **HPARAMS}

    @classmethod
    def declared_behind(cls, encoder, declared):
        if {"layers", "base"} <= encoder.EXTRAS:
            return declared
        return dict(declared, attention=declared["attention"].but(default="multistep",
                                                                  choices=("multistep", "none")))

    def __init__(self, hparams, vocab_size, encoder=None, embedding=None, **kwargs):
        super().__init__(hparams, **kwargs)
        h = self.hparams
        layers, kernel, dropout = h["decoder_layers"], h["kernel_size"], h["dropout"]
        embed_dim, attention = h["embed_dim"], h["attention"]
        self.kernel_size = kernel
        self.embedder = LearnedEmbedder(h, "target", vocab_size, embedding=embedding,
                                        name="target_embedder")
        self.dropout = self.embedder.dropout
        self.dense = h["decoder"] == "dense"
        width = h["growth_rate"] if self.dense else h["residual_dim"]

        def attention_layer(i):
            if attention == "multistep":
                return MultiStepAttention(embed_dim, h["scale_context"],
                                          name=f"decoder_attention_{i}")
            if attention == "dense1":
                return DenseAttention1(h["attention_dim"], name=f"decoder_attention_{i}")
            return DenseAttention2(h["attention_dim"], encoder.memory_layers,
                                   name=f"decoder_attention_{i}")

        self.attention = [] if attention == "none" else [attention_layer(i) for i in range(layers)]
        self.attention_out = [WeightNormDense(width, name=f"decoder_attention_out_{i}")
                              for i in range(len(self.attention))]
        # z, the multi-step keys, from the encoder's output; DenseAtt projects the layers itself.
        self.keys = WeightNormDense(embed_dim, name="encoder_out") if attention == "multistep" else None
        self.summary_indices = summary_after(layers, h["sumlen"]) if self.dense else set()
        self.convs = [GLUConv(width, kernel, causal=True, dropout_in=dropout, name=f"decoder_conv_{i}")
                      for i in range(layers)]
        self.summaries = {i: SummaryLayer(embed_dim, kernel, causal=True, dropout_in=dropout,
                                          name=f"decoder_summary_{i}")
                          for i in sorted(self.summary_indices)}
        self.input_projection = None if self.dense else WeightNormDense(width, dropout_in=dropout,
                                                                         name="decoder_in")
        # Projects to the softmax embedding width directly: a second linear map would add nothing.
        self.output_features = WeightNormDense(self.embedder.table_dim, name="decoder_out")
        self.output_projection = None if h["tie_output"] else WeightNormDense(
            vocab_size, dropout_in=dropout, name="output_projection")
        self.input_widths = self._input_widths()

    def _input_widths(self):
        """Input width of every causal convolution, keyed like the decoding state."""
        h = self.hparams
        if not self.dense:
            return {f"layer_{i}": h["residual_dim"] for i in range(h["decoder_layers"])}
        per_layer = h["growth_rate"] * (2 if self.attention else 1)
        widths, current = {}, h["embed_dim"]
        for i in range(1, h["decoder_layers"] + 1):
            widths[f"layer_{i - 1}"] = current
            current += per_layer
            if i in self.summary_indices:
                widths[f"summary_{i}"] = current
                current = h["embed_dim"]
        return widths

    # --- memory -------------------------------------------------------------------------------
    def memory(self, encoded):
        mask = encoded.mask
        keep = tf.cast(mask, encoded.outputs.dtype)[:, :, None]
        memory = {"mask": mask}
        if self.keys is not None:
            h = self.hparams
            z = self.keys(encoded.outputs) * keep
            if h["scale_encoder_gradients"]:
                # Every attention layer sends the encoder a gradient: fairseq keeps the sum at the
                # scale of about half of one (the embeddings' own path e stays unscaled).
                z = scale_gradient(z, 1.0 / (2 * len(self.attention)))
            embedded = encoded.extras.get("embedded")
            if embedded is not None and embedded.shape[-1] == z.shape[-1]:
                values = (z + embedded) * keep
                if h["scale_values"]:
                    values = values * HALF  # the sum of two unit-variance terms back to one
            else:
                values = z
            memory.update(keys=z, values=values)
        elif self.attention:
            memory["layers"] = [a.project_memory([l * keep for l in encoded.extras["layers"]],
                                                 encoded.extras["base"] * keep, mask)
                                for a in self.attention]
        return memory

    # --- decoder ------------------------------------------------------------------------------
    def _attend(self, i, x, g, memory):
        """The context of decoder layer i, projected to the layer's width."""
        layer = self.attention[i]
        if isinstance(layer, MultiStepAttention):
            context = layer(x, g, memory)
        else:
            context = layer(x, memory["layers"][i])
        return self.attention_out[i](context)

    def logits(self, out, memory):
        """The softmax layer: its own, or the target table (with `memory`'s transposed copy in a
        search, as the Transformer's: decoders/transformer.py)."""
        if self.output_projection is not None:
            return self.output_projection(out)
        return tied_logits(out, self.embedder.embedding.embeddings, output_kernel(memory))

    def decoding_memory(self, memory):
        # What the attention reads is the same for every hypothesis of a sentence: one row a
        # sentence, which a beam's hypotheses query together (dense_attention.attend); the
        # mask, one row a hypothesis, sizes the state.
        rows, shared = split_shared(memory)
        memory = with_shared({"mask": rows["mask"], BY_SENTENCE: rows}, shared)
        if self.output_projection is not None:
            return memory
        return with_output_kernel(memory, self.embedder.embedding.embeddings)

    def run(self, g, memory, state=None, training=False):
        """Logits [N, T, V] for target embeddings g [N, T, e]. With a `state` (T = 1) every
        causal convolution reads its cached window; returns (logits, new state)."""
        new_state = {}

        def causal(layer, key, x):
            x = self.dropout(x, training=training)
            if state is None:
                return layer(x)
            window = tf.concat([state[key], x], axis=1)
            new_state[key] = window[:, 1:]
            return layer.step(window)[:, None]

        if self.dense:
            features = [g]
            for i, layer in enumerate(self.convs):
                z = causal(layer, f"layer_{i}", tf.concat(features, -1))
                features.append(z)
                if self.attention:
                    features.append(self._attend(i, z, g, memory))
                if i + 1 in self.summaries:
                    features = [causal(self.summaries[i + 1], f"summary_{i + 1}",
                                       tf.concat(features, -1))]
            x = tf.concat(features, -1)
        else:
            x = self.input_projection(g)
            for i, layer in enumerate(self.convs):
                residual = x
                x = causal(layer, f"layer_{i}", x)
                if self.attention:
                    x = (self._attend(i, x, g, memory) + x) * HALF
                x = (x + residual) * HALF
        out = self.output_features(x)
        return self.logits(self.dropout(out, training=training), memory), new_state

    def decode(self, memory, target_in, training=False):
        logits, _ = self.run(self.embedder.embed(target_in, training=training), memory,
                             training=training)
        return logits

    def initial_state(self, memory):
        batch = tf.shape(memory["mask"])[0]
        dtype = self.embedder.embedding.compute_dtype
        # The last k-1 inputs of each causal convolution; zeros are its left padding.
        return {key: tf.zeros([batch, self.kernel_size - 1, width], dtype)
                for key, width in self.input_widths.items()}

    @property
    def attends(self):
        return bool(self.attention)

    def latest_attention(self):
        """Alignments: the last layer's attention (models/base.py)."""
        return self.attention[-1].last_weights

    def step(self, ids, time, state, memory):
        logits, new_state = self.run(self.embedder.embed(ids[:, None], offset=time),
                                     with_shared(memory[BY_SENTENCE], memory.get(SHARED)), state)
        return logits[:, 0], new_state
