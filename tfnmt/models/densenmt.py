"""DenseNMT (paper 000, Shen et al. 2018): densely connected convolutional encoder, decoder and
attention. Every part is a switch, so the paper's ablations (Table 2) are flagfiles:

  --encoder=dense|residual    eq. 6: h^{l+1} = GLU-Conv([h^l; ...; h^0]) of width `growth_rate`,
                              or the residual ConvS2S stack of width `hidden_dim`
  --decoder=dense|residual    eq. 7: z^{l+1} = causal GLU-Conv([z^l; a^l; ...; z^1; a^1; z^0])
  --attention=multistep|dense1|dense2|none
                              ConvS2S's per-layer attention over the top encoder layer, DenseAtt-1
                              (eq. 9) or DenseAtt-2 (eq. 10) over every encoder layer, or none (the
                              decoder then ignores the source: a target language model, an ablation
                              floor)
  --sumlen=N                  a summary layer after every N-1 layers (0 = none); later layers look
                              back only to it
  --embedding_dim=E           source, target and softmax embeddings of width E projected to
                              `embed_dim` (sec. 4.2); 0 = embed_dim

Reading taken where the paper is silent (say so if you compare with its numbers):
- Dense attention outputs a^l are projected to the growth width before joining the features;
  `attention_dim` is the width L(.) maps to in eq. 9/10.
- With summary layers, DenseAtt attends over the encoder layers since the last summary and takes
  that summary as h^0; multi-step attention keeps ConvS2S's values z + e (e = source embedding).
- A dense stack's output (the multi-step keys z on the encoder side; the pre-softmax features on
  the decoder side) is a linear map of the concatenation of its layers since the last summary.

The decoder runs one code path for teacher forcing and for incremental steps: in a step, each
causal convolution reads a window made of its cached last k-1 inputs and the new position.
"""

import keras
import tensorflow as tf

from tfnmt.errors import ConfigError
from tfnmt.layers.conv_blocks import HALF, GLUConv, MultiStepAttention, SummaryLayer
from tfnmt.layers.dense_attention import DenseAttention1, DenseAttention2
from tfnmt.layers.weight_norm import WeightNormDense
from tfnmt.models.base import Seq2SeqModel
from tfnmt.models.registry import register

STACKS = ("dense", "residual")
ATTENTIONS = ("multistep", "dense1", "dense2", "none")


def summary_after(layers, sumlen):
    """1-based indices of the layers followed by a summary layer (never after the last one)."""
    if sumlen < 2:
        return set()
    return {i for i in range(sumlen - 1, layers, sumlen - 1)}


@register("densenmt")
class DenseNMT(Seq2SeqModel):
    HPARAMS = {
        "encoder_layers": (4, "number of encoder layers", ">= 1"),
        "decoder_layers": (4, "number of decoder layers", ">= 1"),
        "encoder": ("dense", "encoder stack: dense | residual"),
        "decoder": ("dense", "decoder stack: dense | residual"),
        "attention": ("dense2", "attention: multistep | dense1 | dense2 | none"),
        "embed_dim": (256, "model embedding width (h^0, z^0; the multi-step attention width)", ">= 1"),
        "embedding_dim": (0, "width of the source/target/softmax embedding tables, projected to "
                             "embed_dim (0 = embed_dim)", ">= 0"),
        "hidden_dim": (256, "width of residual layers", ">= 1"),
        "growth_rate": (128, "output width of each dense layer", ">= 1"),
        "attention_dim": (128, "DenseAtt width (eq. 9/10)", ">= 1"),
        "sumlen": (0, "a summary layer after every sumlen-1 layers (0 = none)", ">= 0"),
        "kernel_size": (3, "convolution kernel width", ">= 1"),
        "dropout": (0.2, "dropout on embeddings and layer inputs", "[0, 1)"),
        "max_positions": (1024, "learned positions; later positions reuse the last one", ">= 1"),
    }
    # Subclasses pin some switches (ConvS2S is the all-residual, multi-step case).
    FIXED = {}

    def __init__(self, source_vocab_size, target_vocab_size, label_smoothing=0.1, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, label_smoothing, **hparams)
        h = dict(self.FIXED, **self.hparams)
        for name, choices in (("encoder", STACKS), ("decoder", STACKS), ("attention", ATTENTIONS)):
            if h[name] not in choices:
                raise ConfigError(f"--{name}={h[name]!r}: choose one of {', '.join(choices)}")
        self.settings = h
        e, k, p = h["embed_dim"], h["kernel_size"], h["dropout"]
        w = h["embedding_dim"] or e
        self.kernel_size = k
        self.max_positions = h["max_positions"]
        self.dropout = keras.layers.Dropout(p)
        init = keras.initializers.RandomNormal(stddev=0.1)

        def embedding(name, vocab, width):
            return keras.layers.Embedding(vocab, width, embeddings_initializer=init, name=name)

        self.source_embedding = embedding("source_embedding", source_vocab_size, w)
        self.target_embedding = embedding("target_embedding", target_vocab_size, w)
        self.source_position_embedding = embedding("source_position_embedding", self.max_positions, e)
        self.target_position_embedding = embedding("target_position_embedding", self.max_positions, e)
        self.source_embedding_projection = self.target_embedding_projection = None
        if w != e:
            self.source_embedding_projection = keras.layers.Dense(e, use_bias=False,
                                                                  name="source_embedding_projection")
            self.target_embedding_projection = keras.layers.Dense(e, use_bias=False,
                                                                  name="target_embedding_projection")

        # --- encoder ---
        L, dense_enc = h["encoder_layers"], h["encoder"] == "dense"
        self.encoder_summaries = summary_after(L, h["sumlen"]) if dense_enc else set()
        if dense_enc:
            self.encoder_convs = [GLUConv(h["growth_rate"], k, dropout_in=p, name=f"encoder_conv_{i}")
                                  for i in range(L)]
            self.encoder_summary = {i: SummaryLayer(e, k, dropout_in=p, name=f"encoder_summary_{i}")
                                    for i in sorted(self.encoder_summaries)}
            self.encoder_in = None
        else:
            self.encoder_in = WeightNormDense(h["hidden_dim"], dropout_in=p, name="encoder_in")
            self.encoder_convs = [GLUConv(h["hidden_dim"], k, dropout_in=p, name=f"encoder_conv_{i}")
                                  for i in range(L)]
            self.encoder_summary = {}
        self.encoder_layer_count = (L - max(self.encoder_summaries, default=0))
        # z, the multi-step keys; DenseAtt projects the encoder layers itself.
        self.encoder_out = (WeightNormDense(e, name="encoder_out")
                            if h["attention"] == "multistep" else None)

        # --- attention, one per decoder layer ---
        D, dense_dec = h["decoder_layers"], h["decoder"] == "dense"
        att = h["attention"]
        width = h["growth_rate"] if dense_dec else h["hidden_dim"]

        def attention(i):
            if att == "multistep":
                return MultiStepAttention(e, name=f"decoder_attention_{i}")
            if att == "dense1":
                return DenseAttention1(h["attention_dim"], name=f"decoder_attention_{i}")
            return DenseAttention2(h["attention_dim"], self.encoder_layer_count,
                                   name=f"decoder_attention_{i}")

        self.decoder_attention = [] if att == "none" else [attention(i) for i in range(D)]
        self.decoder_attention_out = [] if att == "none" else [
            WeightNormDense(width, name=f"decoder_attention_out_{i}") for i in range(D)]

        # --- decoder ---
        self.decoder_summaries = summary_after(D, h["sumlen"]) if dense_dec else set()
        self.decoder_convs = [GLUConv(width, k, causal=True, dropout_in=p, name=f"decoder_conv_{i}")
                              for i in range(D)]
        self.decoder_summary = {i: SummaryLayer(e, k, causal=True, dropout_in=p,
                                                name=f"decoder_summary_{i}")
                                for i in sorted(self.decoder_summaries)}
        self.decoder_in = None if dense_dec else WeightNormDense(width, dropout_in=p, name="decoder_in")
        # Projects to the softmax embedding width directly: a second linear map would add nothing.
        self.decoder_out = WeightNormDense(w, name="decoder_out")
        self.output_projection = WeightNormDense(target_vocab_size, dropout_in=p, name="output_projection")
        self._conv_input_widths = self._decoder_conv_widths()

    # --- widths ---------------------------------------------------------------------------------
    def _decoder_conv_widths(self):
        """Input width of every causal convolution of the decoder, keyed like the decoding state."""
        h = self.settings
        e = h["embed_dim"]
        if h["decoder"] == "residual":
            return {f"layer_{i}": h["hidden_dim"] for i in range(h["decoder_layers"])}
        per_layer = h["growth_rate"] * (1 if h["attention"] == "none" else 2)
        widths, current = {}, e
        for i in range(1, h["decoder_layers"] + 1):
            widths[f"layer_{i - 1}"] = current
            current += per_layer
            if i in self.decoder_summaries:
                widths[f"summary_{i}"] = current
                current = e
        return widths

    # --- embeddings -----------------------------------------------------------------------------
    def _embed(self, tokens, projection, positions, ids, offset=0, training=False):
        x = tokens(ids)
        if projection is not None:
            x = projection(x)
        index = tf.minimum(tf.range(tf.shape(ids)[1]) + offset, self.max_positions - 1)
        return self.dropout(x + positions(index)[None], training=training)

    # --- encoder --------------------------------------------------------------------------------
    def encode(self, source, training=False):
        mask = self.padding_mask(source)
        keep = tf.cast(mask, self.compute_dtype)[:, :, None]
        e = self._embed(self.source_embedding, self.source_embedding_projection,
                        self.source_position_embedding, source, training=training)

        def conv(layer, x):
            # Padding is zeroed before every convolution so it never leaks into real positions.
            return layer(self.dropout(x, training=training) * keep)

        if self.encoder_in is None:
            features = [e]
            for i, layer in enumerate(self.encoder_convs, start=1):
                features.append(conv(layer, tf.concat(features, -1)))
                if i in self.encoder_summary:
                    features = [conv(self.encoder_summary[i], tf.concat(features, -1))]
            base, layers = features[0], features[1:]
            top = tf.concat(features, -1)
        else:
            x = self.encoder_in(e)
            base, layers = e, []
            for layer in self.encoder_convs:
                x = (conv(layer, x) + x) * HALF
                layers.append(x)
            top = x
        memory = {"mask": mask}
        if self.encoder_out is not None:
            z = self.encoder_out(top) * keep
            memory.update(keys=z, values=(z + e) * keep)
        elif self.decoder_attention:
            memory["layers"] = [a.project_memory([l * keep for l in layers], base * keep, mask)
                                for a in self.decoder_attention]
        return memory

    # --- decoder --------------------------------------------------------------------------------
    def _attend(self, i, x, g, memory):
        """The context of decoder layer i, projected to the layer's width."""
        layer = self.decoder_attention[i]
        if isinstance(layer, MultiStepAttention):
            context = layer(x, g, memory)
        else:
            context = layer(x, memory["layers"][i])
        return self.decoder_attention_out[i](context)

    def _decoder(self, g, memory, state=None, training=False):
        """Decoder features [N, T, w] for target embeddings g [N, T, e]. With a `state` (T = 1)
        every causal convolution reads its cached window; returns (features, new state)."""
        new_state = {}

        def causal(layer, key, x):
            x = self.dropout(x, training=training)
            if state is None:
                return layer(x)
            window = tf.concat([state[key], x], axis=1)
            new_state[key] = window[:, 1:]
            return layer.step(window)[:, None]

        attention = bool(self.decoder_attention)
        if self.decoder_in is None:
            features = [g]
            for i, layer in enumerate(self.decoder_convs):
                z = causal(layer, f"layer_{i}", tf.concat(features, -1))
                features.append(z)
                if attention:
                    features.append(self._attend(i, z, g, memory))
                if i + 1 in self.decoder_summary:
                    features = [causal(self.decoder_summary[i + 1], f"summary_{i + 1}",
                                       tf.concat(features, -1))]
            x = tf.concat(features, -1)
        else:
            x = self.decoder_in(g)
            for i, layer in enumerate(self.decoder_convs):
                residual = x
                x = causal(layer, f"layer_{i}", x)
                if attention:
                    x = (self._attend(i, x, g, memory) + x) * HALF
                x = (x + residual) * HALF
        out = self.decoder_out(x)
        return self.output_projection(self.dropout(out, training=training)), new_state

    def _target_embedding(self, ids, offset=0, training=False):
        return self._embed(self.target_embedding, self.target_embedding_projection,
                           self.target_position_embedding, ids, offset, training)

    def decode(self, memory, target_in, training=False):
        logits, _ = self._decoder(self._target_embedding(target_in, training=training), memory,
                                  training=training)
        return logits

    def initial_state(self, memory):
        batch = tf.shape(memory["mask"])[0]
        # The last k-1 inputs of each causal convolution; zeros are its left padding.
        return {key: tf.zeros([batch, self.kernel_size - 1, width], self.compute_dtype)
                for key, width in self._conv_input_widths.items()}

    def step(self, ids, time, state, memory):
        g = self._target_embedding(ids[:, None], offset=time)
        logits, new_state = self._decoder(g, memory, state)
        return logits[:, 0], new_state
