"""The convolutional sentence encoder of Lamb & Xie (paper 004): a fixed-length vector from the
d x k̄ matrix of a sentence's word embeddings (columns), zero-padded to k̄ columns.

    h_0 = p_0(f_0(conv(W_0, X) + b_0)),  h_i = p_i(f_i(conv(W_i, h_{i-1}) + b_i)),  h_f = W_f h_m + b_f

f is ReLU, p a pooling, h_f (linear, no non-linearity) the encoding. The input arrives as
[B, k̄, e] (rows = positions, the transpose of the paper's matrix) and is first mapped to d rows
by a linear up-projection without bias, so zero (padding) columns stay zero ("100-dimensional
embeddings up-sampled to 1000"); with d = e there is no projection.

Variants (`variant`):
- "small_filters" (report 5.2): the matrix as a one-channel d x k̄ image; `layers` 2-D
  convolutions of `filters` channels of `filter_size` (3x3; "same" zero padding, so zero
  padding is preserved), each followed by 2x2 average pooling with stride 2.
- "ngram" (report 5.4): `layers` layers of `filters` d x n filters. A d x n 2-D filter on a
  d-row matrix is a width-n 1-D convolution over time with d input channels; the report's
  "transpose the middle two dimensions" makes the previous layer's filter outputs the next
  layer's rows, i.e. its input channels, which is what a 1-D convolution already reads. Each
  convolution sees n - 1 zero columns appended at the end ("one column of zero padding" for
  bigrams), so it keeps k̄ positions; then ReLU and max pooling of width 2, stride 2 over time.
  The one-layer variant of 5.3 is this with one layer of 100 filters.
- Extensions the report proposes: `ngram_widths` of several n in parallel (Kim 2014's multi-path
  convolution: each width has its own `filters` filters and their outputs are concatenated
  before pooling), and `gated_pooling` (layers/gated_pooling.py) in place of max / average
  pooling.

Pooling windows are non-overlapping and a trailing odd position is dropped ("valid" pooling),
so with k̄ = 32 and 3 layers the ngram encoder flattens 4 positions x 500 features into W_f.
"""

import keras
import tensorflow as tf

from tfnmt.layers.configured import Configured
from tfnmt.layers.gated_pooling import GatedPooling

VARIANTS = ("small_filters", "ngram")


@keras.saving.register_keras_serializable(package="tfnmt")
class ConvSentenceEncoder(Configured, keras.layers.Layer):
    """[B, k̄, e] zero-padded embedding rows -> encoding [B, encoding_dim]."""

    def __init__(self, variant, window, encoding_dim, input_dim, layers, filters,
                 ngram_widths=(2,), filter_size=(3, 3), gated_pooling=False, **kwargs):
        super().__init__(**kwargs)
        if variant not in VARIANTS:
            raise ValueError(f"unknown convolutional encoder variant {variant!r}")
        self.set_config(variant=variant, window=int(window), encoding_dim=int(encoding_dim),
                        input_dim=int(input_dim), num_layers=int(layers), filters=int(filters),
                        ngram_widths=tuple(int(n) for n in ngram_widths),
                        filter_size=tuple(int(n) for n in filter_size),
                        gated_pooling=bool(gated_pooling))
        self.upprojection = None
        self.convolutions = []  # per layer: a list of convolutions (one per n-gram width)
        self.poolings = []
        for i in range(self.num_layers):
            if variant == "small_filters":
                self.convolutions.append([keras.layers.Conv2D(
                    self.filters, self.filter_size, padding="same", activation="relu",
                    name=f"conv_{i}")])
                self.poolings.append(GatedPooling((2, 2), name=f"gated_pool_{i}") if gated_pooling
                                     else keras.layers.AveragePooling2D(2, 2, name=f"pool_{i}"))
            else:
                self.convolutions.append([keras.layers.Conv1D(
                    self.filters, n, padding="valid", activation="relu", name=f"conv_{i}_n{n}")
                    for n in self.ngram_widths])
                self.poolings.append(GatedPooling((2,), name=f"gated_pool_{i}") if gated_pooling
                                     else keras.layers.MaxPooling1D(2, 2, name=f"pool_{i}"))
        self.projection = keras.layers.Dense(self.encoding_dim, name="projection")

    def feature_shape(self):
        """Shape of h_m (per sentence) for this encoder's k̄ and d."""
        if self.variant == "small_filters":
            rows, columns = self.input_dim, self.window
            for _ in range(self.num_layers):
                rows, columns = rows // 2, columns // 2
            return (rows, columns, self.filters)
        return (self.window // 2 ** self.num_layers, self.filters * len(self.ngram_widths))

    def build(self, input_shape):
        embed_dim = input_shape[-1]
        if embed_dim != self.input_dim:
            self.upprojection = keras.layers.Dense(self.input_dim, use_bias=False,
                                                   name="upprojection")
            self.upprojection.build((None, self.window, embed_dim))

    def call(self, rows, training=False):
        x = self.upprojection(rows) if self.upprojection is not None else rows  # [B, k̄, d]
        if self.variant == "small_filters":
            x = tf.transpose(x, [0, 2, 1])[..., None]  # the d x k̄ image, one channel
        for convolutions, pooling in zip(self.convolutions, self.poolings):
            if self.variant == "ngram":
                outputs = [conv(tf.pad(x, [[0, 0], [0, conv.kernel_size[0] - 1], [0, 0]]))
                           for conv in convolutions]
                x = tf.concat(outputs, axis=-1) if len(outputs) > 1 else outputs[0]
            else:
                x = convolutions[0](x)
            x = pooling(x)
        size = 1
        for n in self.feature_shape():
            size *= n
        return self.projection(tf.reshape(x, [-1, size]))

    def get_config(self):
        # The argument `layers` is kept as `num_layers`: Keras takes a layer's `layers` for its
        # sublayers (summary(expand_nested=True)).
        config = super().get_config()
        config["layers"] = config.pop("num_layers")
        return config
