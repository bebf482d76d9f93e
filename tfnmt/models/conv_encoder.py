"""Convolutional sentence encoders into a GRU decoder (Lamb & Xie, paper 004), and the GRU
encoder-decoder of Cho et al. 2014 they are measured against.

Both models compress the source into ONE vector c (no attention) and decode with the Cho et al.
GRU decoder (layers/conditional_gru_decoder.py): s_0 = tanh(V c), s_t = GRU(y_{t-1}, s_{t-1}, c)
with c in both gates and, through the reset gate, in the candidate, o_t = maxout(O [s_t;
y_{t-1}; c]), p(y_t) = softmax(G_l G_r o_t), where G_r maps o_t to `embed_dim` and G_l to the
vocabulary (Cho et al.'s rank-`embed_dim` output matrix).

`conv_encoder`: c is the convolutional encoding of the source's d x k̄ embedding matrix
(layers/conv_sentence_encoder.py). Sentences are zero-padded to k̄ = `source_window` tokens
(eos included) and the encoding is defined on that matrix, so batch padding never changes it.
A longer source cannot be encoded at once: training drops such pairs (the report's practice;
the trainer lowers --max_source_length to k̄ - 1), and the translator splits it into chunks of
at most k̄ - 1 tokens, translates the chunks as extra rows of the batch and joins their outputs
(decoding/chunking.py), or refuses it with --long_input=error.

`gru_encdec`: c = tanh(V h_N), h_N the last state of a GRU encoder over the source, taken at
the sentence's real last token (eos), not at batch padding.

Where the report is silent (its sizes are the defaults; 0 in a size flag means "the variant's"):
- small_filters reads the e-wide embeddings without up-projection (the report tested it "for its
  lower parameter size"), with 32 channels per layer (no count is given);
- the one-layer n-gram model pools like the three-layer one (max, width 2) before W_f;
- dropout (0 by default, as in the report) applies to the embeddings and to o_t.
"""

import keras
import tensorflow as tf

from tfnmt.errors import ConfigError
from tfnmt.layers.conditional_gru_decoder import ConditionalGRUDecoder
from tfnmt.layers.conv_sentence_encoder import ConvSentenceEncoder
from tfnmt.models.base import Seq2SeqModel
from tfnmt.models.registry import register

# The report's sizes per --conv_encoder; a size flag left at 0 takes these.
ENCODERS = {
    "small_filters": {"variant": "small_filters", "layers": 3, "filters": 32, "input_dim": None},
    "ngram_1layer": {"variant": "ngram", "layers": 1, "filters": 100, "input_dim": 1000},
    "ngram": {"variant": "ngram", "layers": 3, "filters": 500, "input_dim": 1000},
}


def _int_list(flag, text, separator):
    try:
        values = [int(v) for v in text.split(separator)]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise ConfigError(f"--{flag}={text!r}: expected positive integers separated by "
                          f"{separator!r}")
    return values


class _FixedEncodingSeq2Seq(Seq2SeqModel):
    """The shared decoder side: memory is {"encoding": c [B, C]}, state {"state": s [B, H]}."""

    DECODER_HPARAMS = {
        "embed_dim": (100, "word embedding width (source and target)", ">= 1"),
        "hidden_dim": (1000, "GRU state width", ">= 1"),
        "maxout_dim": (500, "maxout units of the decoder's deep output", ">= 1"),
        "dropout": (0.0, "dropout on the word embeddings and on the maxout output", "[0, 1)"),
    }

    def _build(self, layer, shape):
        # Under the model's name, as variables built in a call would be (checkpoint keys).
        with keras.name_scope(self.name):
            layer.build(shape)
        return layer

    def _init_decoder(self, encoding_dim):
        h = self.hparams
        E = h["embed_dim"]
        self.target_embedding = keras.layers.Embedding(self.target_vocab_size, E,
                                                       name="target_embedding")
        self.dropout = keras.layers.Dropout(h["dropout"])
        self.decoder = self._build(ConditionalGRUDecoder(h["hidden_dim"], h["maxout_dim"],
                                                         name="decoder"),
                                   ((None, None, E), (None, encoding_dim)))
        self.output_bottleneck = self._build(
            keras.layers.Dense(E, use_bias=False, name="output_bottleneck"), (None, h["maxout_dim"]))
        self.output_projection = self._build(
            keras.layers.Dense(self.target_vocab_size, name="output_projection"), (None, E))

    def _logits(self, o, training=False):
        return self.output_projection(self.output_bottleneck(self.dropout(o, training=training)))

    def decode(self, memory, target_in, training=False):
        y = self.dropout(self.target_embedding(target_in), training=training)
        return self._logits(self.decoder((y, memory["encoding"]), training=training), training)

    def initial_state(self, memory):
        return {"state": self.decoder.initial_state(memory["encoding"])}

    def step(self, ids, time, state, memory):
        o, s = self.decoder.step(self.target_embedding(ids), memory["encoding"], state["state"])
        return self._logits(o), {"state": s}


@register("conv_encoder")
class ConvEncoderSeq2Seq(_FixedEncodingSeq2Seq):
    HPARAMS = {
        "conv_encoder": ("ngram", "convolutional encoder: small_filters | ngram_1layer | ngram"),
        "source_window": (32, "k̄: source tokens (eos included) of the zero-padded sentence "
                              "matrix; longer sources are translated in chunks", ">= 1"),
        "conv_input_dim": (0, "d: rows of the sentence matrix, the embeddings up-projected to it "
                              "(0 = the variant's: 1000, or embed_dim for small_filters)", ">= 0"),
        "conv_layers": (0, "convolution + pooling layers (0 = the variant's: 3, 1 for ngram_1layer)",
                        ">= 0"),
        "conv_filters": (0, "filters per layer and n-gram width (0 = the variant's: 500, 100 "
                            "for ngram_1layer, 32 for small_filters)", ">= 0"),
        "ngram_widths": ("2", "n-gram filter widths, comma-separated; several run in parallel "
                              "(ngram encoders)"),
        "small_filter_size": ("3x3", "filter size ROWSxCOLUMNS of small_filters"),
        "gated_pooling": (False, "learned gated pooling instead of max / average pooling"),
        "encoding_dim": (1000, "width of the sentence encoding c (W_f's output)", ">= 1"),
        **_FixedEncodingSeq2Seq.DECODER_HPARAMS,
    }

    def __init__(self, source_vocab_size, target_vocab_size, label_smoothing=0.1, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, label_smoothing, **hparams)
        h = self.hparams
        if h["conv_encoder"] not in ENCODERS:
            raise ConfigError(f"--conv_encoder={h['conv_encoder']!r}: choose one of "
                              f"{', '.join(ENCODERS)}")
        spec = ENCODERS[h["conv_encoder"]]
        variant = spec["variant"]
        layers = h["conv_layers"] or spec["layers"]
        if h["conv_encoder"] == "ngram_1layer" and layers != 1:
            raise ConfigError("--conv_encoder=ngram_1layer has one layer; use --conv_encoder=ngram "
                              f"for --conv_layers={layers}")
        defaults = {name: declared[0] for name, declared in self.HPARAMS.items()}
        if variant == "ngram" and h["small_filter_size"] != defaults["small_filter_size"]:
            raise ConfigError("--small_filter_size applies to --conv_encoder=small_filters only")
        if variant == "small_filters" and h["ngram_widths"] != defaults["ngram_widths"]:
            raise ConfigError("--ngram_widths applies to the ngram encoders only")
        filter_size = _int_list("small_filter_size", h["small_filter_size"], "x")
        if len(filter_size) != 2:
            raise ConfigError(f"--small_filter_size={h['small_filter_size']!r}: expected ROWSxCOLUMNS")
        input_dim = h["conv_input_dim"] or spec["input_dim"] or h["embed_dim"]
        window = h["source_window"]
        if window // 2 ** layers < 1 or (variant == "small_filters" and input_dim // 2 ** layers < 1):
            raise ConfigError(f"{layers} pooling layers halve the sentence matrix below one "
                              f"element (--source_window={window}, d={input_dim}); use fewer "
                              "--conv_layers or a larger matrix")
        # The translator reads this: sources longer than the window are split into chunks.
        self.source_window = window
        self.source_embedding = keras.layers.Embedding(source_vocab_size, h["embed_dim"],
                                                       name="source_embedding")
        self.encoder = self._build(ConvSentenceEncoder(
            variant, window, h["encoding_dim"], input_dim, layers,
            h["conv_filters"] or spec["filters"],
            ngram_widths=_int_list("ngram_widths", h["ngram_widths"], ","),
            filter_size=filter_size,
            gated_pooling=h["gated_pooling"], name="encoder"), (None, window, h["embed_dim"]))
        self._init_decoder(h["encoding_dim"])

    def encode(self, source, training=False):
        window = self.source_window
        mask = self.padding_mask(source)
        if source.shape[1] is None or source.shape[1] > window:
            # Batch padding past the window is harmless; real tokens past it are not.
            longest = tf.reduce_max(tf.reduce_sum(tf.cast(mask, tf.int32), axis=1))
            tf.debugging.assert_less_equal(
                longest, window, message=f"a source is longer than --source_window={window} "
                "tokens (eos included); the translator splits such sources into chunks")
        keep = tf.cast(mask, self.compute_dtype)[:, :, None]
        rows = self.dropout(self.source_embedding(source), training=training) * keep
        rows = rows[:, :window]
        rows = tf.pad(rows, [[0, 0], [0, window - tf.shape(rows)[1]], [0, 0]])
        rows = tf.reshape(rows, [-1, window, self.hparams["embed_dim"]])  # static for W_f
        return {"encoding": self.encoder(rows, training=training)}


@register("gru_encdec")
class GRUEncoderDecoder(_FixedEncodingSeq2Seq):
    """Cho et al. 2014: a GRU encoder whose last state is c, and the same decoder."""
    HPARAMS = dict(_FixedEncodingSeq2Seq.DECODER_HPARAMS)

    def __init__(self, source_vocab_size, target_vocab_size, label_smoothing=0.1, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, label_smoothing, **hparams)
        h = self.hparams
        self.source_embedding = keras.layers.Embedding(source_vocab_size, h["embed_dim"],
                                                       name="source_embedding")
        self.encoder_gru = keras.layers.GRU(h["hidden_dim"], reset_after=False, name="encoder_gru")
        self.encoder_summary = self._build(
            keras.layers.Dense(h["hidden_dim"], activation="tanh", name="encoder_summary"),
            (None, h["hidden_dim"]))
        self._init_decoder(h["hidden_dim"])

    def encode(self, source, training=False):
        mask = self.padding_mask(source)
        x = self.dropout(self.source_embedding(source), training=training)
        # With the mask, the GRU carries its state over padding: its output is h_N, the state
        # after the last real token; c = tanh(V h_N) (Cho et al.'s appendix A.1.1).
        return {"encoding": self.encoder_summary(self.encoder_gru(x, mask=mask, training=training))}
