"""The convolutional sentence encoders of Lamb & Xie (paper 004; models/conv_encoder.py): the
source's d x k̄ embedding matrix, zero-padded to k̄ = `source_window` tokens (eos included),
compressed into ONE vector c by convolutions and pooling (layers/conv_sentence_encoder.py).
The encoding is defined on that matrix, so batch padding never changes it.

    encode(source [B, S <= k̄ real tokens], training) -> EncoderOutput(summary=c [B, encoding_dim])
"""

import keras
import tensorflow as tf

from tfnmt.data.vocab import PAD_ID
from tfnmt.errors import ConfigError
from tfnmt.layers.fixed_encoding import HPARAMS
from tfnmt.layers.conv_sentence_encoder import ConvSentenceEncoder
from tfnmt.layers.hparams import HParam
from tfnmt.layers.part import Encoder, EncoderOutput, register_encoder

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


@register_encoder("conv_sentence")
class ConvSentenceEncoderPart(Encoder):
    GIVES_SEQUENCE = False
    HPARAMS = {
        "conv_encoder": HParam("ngram", "convolutional encoder", choices=tuple(ENCODERS)),
        "source_window": HParam(32, "k̄: source tokens (eos included) of the zero-padded sentence "
                                    "matrix; longer sources are translated in chunks", bounds=">= 1"),
        "conv_input_dim": HParam(0, "d: rows of the sentence matrix, the embeddings up-projected "
                                    "to it (0 = the variant's: 1000, or embed_dim for "
                                    "small_filters)", bounds=">= 0"),
        "conv_layers": HParam(0, "convolution + pooling layers (0 = the variant's: 3, 1 for "
                                 "ngram_1layer)", bounds=">= 0"),
        "conv_filters": HParam(0, "filters per layer and n-gram width (0 = the variant's: 500, 100 "
                                  "for ngram_1layer, 32 for small_filters)", bounds=">= 0"),
        "ngram_widths": HParam("2", "n-gram filter widths, comma-separated; several run in "
                                    "parallel (ngram encoders)"),
        "small_filter_size": HParam("3x3", "filter size ROWSxCOLUMNS of small_filters"),
        "gated_pooling": HParam(False, "learned gated pooling instead of max / average pooling"),
        "encoding_dim": HParam(1000, "width of the sentence encoding c (W_f's output)",
                               bounds=">= 1"),
        "embed_dim": HPARAMS["embed_dim"],
        "dropout": HPARAMS["dropout"],
    }

    def __init__(self, hparams, vocab_size, **kwargs):
        super().__init__(hparams, **kwargs)
        h = self.hparams
        defaults = {name: spec.default for name, spec in self.HPARAMS.items()}
        spec = ENCODERS[h["conv_encoder"]]
        variant = spec["variant"]
        layers = h["conv_layers"] or spec["layers"]
        if h["conv_encoder"] == "ngram_1layer" and layers != 1:
            raise ConfigError("--conv_encoder=ngram_1layer has one layer; use --conv_encoder=ngram "
                              f"for --conv_layers={layers}")
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
        self.source_window = window
        self.summary_width = h["encoding_dim"]
        self.embed_dim = h["embed_dim"]
        self.embedding = keras.layers.Embedding(vocab_size, h["embed_dim"], name="source_embedding")
        self.dropout = keras.layers.Dropout(h["dropout"])
        self.sentence = self.build_now(ConvSentenceEncoder(
            variant, window, h["encoding_dim"], input_dim, layers,
            h["conv_filters"] or spec["filters"],
            ngram_widths=_int_list("ngram_widths", h["ngram_widths"], ","),
            filter_size=filter_size,
            gated_pooling=h["gated_pooling"], name="encoder"), (None, window, h["embed_dim"]))

    def encode(self, source, training=False):
        window = self.source_window
        mask = tf.not_equal(source, PAD_ID)
        if source.shape[1] is None or source.shape[1] > window:
            # Batch padding past the window is harmless; real tokens past it are not.
            longest = tf.reduce_max(tf.reduce_sum(tf.cast(mask, tf.int32), axis=1))
            tf.debugging.assert_less_equal(
                longest, window, message=f"a source is longer than --source_window={window} "
                "tokens (eos included); the translator splits such sources into chunks")
        rows = self.dropout(self.embedding(source), training=training)
        rows = rows * tf.cast(mask, rows.dtype)[:, :, None]
        rows = rows[:, :window]
        rows = tf.pad(rows, [[0, 0], [0, window - tf.shape(rows)[1]], [0, 0]])
        rows = tf.reshape(rows, [-1, window, self.embed_dim])  # static for W_f
        return EncoderOutput(summary=self.sentence(rows, training=training))
