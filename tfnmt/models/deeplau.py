"""DeepLAU (paper 001, Wang et al. 2017) and its DeepGRU baseline: deep recurrent encoder-decoder
with additive attention.

Encoder (eq. 9): `encoder_layers` recurrent layers of alternating direction (1st left-to-right,
2nd right-to-left, ...), each reading the whole output sequence of the layer below. A
right-to-left layer reverses each sentence within its own length, so it starts at the real last
token, never at padding.
Attention (eq. 10-11): e_tj = v^T tanh(W_a s^1_{t-1} + U_a h_j + W_y y_{t-1}), the query made of
the FIRST decoder layer's previous state and the previous target embedding.
Decoder: `decoder_layers` forward layers; layer 1 reads [c_t; y_{t-1}]; the prediction is
softmax(W_o dropout(s^top_t)).

The GRU cell is the paper's eq. 2-5 (the reset gate applies before the recurrent matrix), and
`--init_stddev=0.04` gives the paper's N(0, 0.04^2) initialisation of every weight matrix.
Flags choose the paper's comparison rows: `--cell=lau|gru`, and `--stack_connection=none|residual|
fast_forward` between stacked layers (residual: x_{l+1} = h_l + x_l; fast-forward, Zhou et al.
2016: x_{l+1} = [h_l; W_f x_l], a linear path around each layer, the first one included). A
residual connection skips the first layer, whose input has another width.

Where the paper is silent: every decoder layer starts from tanh(W_l mean_j h_j) (the mean of the
encoder output over real tokens), and the teacher-forced pass runs the same step function as
incremental decoding, inside one tf.while_loop over time, so the two cannot disagree.
"""

import keras
import tensorflow as tf

from tfnmt.errors import ConfigError
from tfnmt.layers.attention import masked_logits
from tfnmt.layers.lau import LAUCell
from tfnmt.models.base import Seq2SeqModel
from tfnmt.models.registry import register

CELLS = ("lau", "gru")
CONNECTIONS = ("none", "residual", "fast_forward")


def _initializers(stddev):
    """Keyword arguments for (dense kernels, embeddings, recurrent cells): the paper's
    N(0, stddev^2) for every weight matrix, or Keras's defaults (Glorot uniform, orthogonal
    recurrent kernels) with stddev 0. Biases start at zero either way. A fresh initializer per
    weight: a reused unseeded Keras initializer repeats its values."""
    if not stddev:
        return (lambda: {}), (lambda: {}), (lambda: {})
    normal = lambda: keras.initializers.RandomNormal(stddev=stddev)  # noqa: E731
    return (lambda: {"kernel_initializer": normal()}, lambda: {"embeddings_initializer": normal()},
            lambda: {"kernel_initializer": normal(), "recurrent_initializer": normal()})


def _cell(kind, units, name, init):
    if kind == "lau":
        return LAUCell(units, name=name, **init())
    # The paper's eq. 3 resets the state before the recurrent matrix, W_hh (r * h): Keras's
    # reset_after=False. (Keras's update gate z is the paper's 1 - z: the same function.)
    return keras.layers.GRUCell(units, reset_after=False, name=name, **init())


@register("deeplau")
class DeepLAU(Seq2SeqModel):
    HPARAMS = {
        "encoder_layers": (4, "recurrent encoder layers, alternating direction", ">= 1"),
        "decoder_layers": (4, "recurrent decoder layers", ">= 1"),
        "cell": ("lau", "recurrent cell: lau | gru"),
        "stack_connection": ("none", "between stacked layers: none | residual | fast_forward"),
        "embed_dim": (512, "word embedding width", ">= 1"),
        "hidden_dim": (512, "recurrent state width", ">= 1"),
        "attention_dim": (512, "additive attention width", ">= 1"),
        "dropout": (0.2, "dropout on the word embeddings", "[0, 1)"),
        "output_dropout": (0.5, "dropout on the top decoder state before the softmax layer", "[0, 1)"),
        "init_stddev": (0.0, "draw every weight matrix from N(0, init_stddev^2), as the paper "
                             "does with 0.04 (0 = Keras's Glorot / orthogonal defaults)", ">= 0"),
    }
    FIXED = {}

    def __init__(self, source_vocab_size, target_vocab_size, label_smoothing=0.1, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, label_smoothing, **hparams)
        h = dict(self.FIXED, **self.hparams)
        if h["cell"] not in CELLS:
            raise ConfigError(f"--cell={h['cell']!r}: choose one of {', '.join(CELLS)}")
        if h["stack_connection"] not in CONNECTIONS:
            raise ConfigError(f"--stack_connection={h['stack_connection']!r}: choose one of "
                              f"{', '.join(CONNECTIONS)}")
        self.settings = h
        E, H, A = h["embed_dim"], h["hidden_dim"], h["attention_dim"]
        self.connection = h["stack_connection"]
        dense, embedding, recurrent = _initializers(h["init_stddev"])
        self.source_embedding = keras.layers.Embedding(source_vocab_size, E, name="source_embedding",
                                                       **embedding())
        self.target_embedding = keras.layers.Embedding(target_vocab_size, E, name="target_embedding",
                                                       **embedding())
        self.dropout = keras.layers.Dropout(h["dropout"])
        self.output_dropout = keras.layers.Dropout(h["output_dropout"])
        stacked = 2 * H if self.connection == "fast_forward" else H  # width between layers

        # Layers are built here, with the widths known from the flags, because the decoder
        # calls them inside a tf.while_loop, where variables cannot be created.
        def built(layer, width):
            # Under the model's name, as variables built in a call would be (checkpoint keys).
            with keras.name_scope(self.name):
                layer.build((None, width))
            return layer

        def linear(units, name, width, **kwargs):
            return built(keras.layers.Dense(units, name=name, **kwargs, **dense()), width)

        def cell(name, width):
            return built(_cell(h["cell"], H, name, recurrent), width)

        self.encoder_cells = [cell(f"encoder_cell_{i}", E if i == 0 else stacked)
                              for i in range(h["encoder_layers"])]
        self.encoder_rnns = [keras.layers.RNN(c, return_sequences=True, name=f"encoder_rnn_{i}")
                             for i, c in enumerate(self.encoder_cells)]
        self.decoder_cells = [cell(f"decoder_cell_{i}", stacked + E if i == 0 else stacked)
                              for i in range(h["decoder_layers"])]
        self.encoder_fast = self.decoder_fast = []
        if self.connection == "fast_forward":
            self.encoder_fast = [linear(H, f"encoder_fast_{i}", E if i == 0 else stacked, use_bias=False)
                                 for i in range(h["encoder_layers"])]
            self.decoder_fast = [linear(H, f"decoder_fast_{i}", stacked + E if i == 0 else stacked,
                                        use_bias=False) for i in range(h["decoder_layers"])]
        self.decoder_init = [linear(H, f"decoder_init_{i}", stacked, activation="tanh")
                             for i in range(h["decoder_layers"])]
        self.decoder_attention_query = linear(A, "decoder_attention_query", H, use_bias=False)
        self.decoder_attention_embedding = linear(A, "decoder_attention_embedding", E, use_bias=False)
        self.decoder_attention_keys = linear(A, "decoder_attention_keys", stacked)
        self.decoder_attention_v = linear(1, "decoder_attention_v", A, use_bias=False)
        self.output_projection = linear(target_vocab_size, "output_projection", stacked)

    def _connect(self, i, x, h, fast):
        """The input of the layer above layer i, from layer i's input x and output h."""
        if self.connection == "fast_forward":
            return tf.concat([h, fast[i](x)], axis=-1)
        if self.connection == "residual" and i > 0:
            return h + x
        return h

    # --- encoder --------------------------------------------------------------------------------
    def encode(self, source, training=False):
        mask = self.padding_mask(source)
        lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
        keep = tf.cast(mask, self.compute_dtype)[:, :, None]
        x = self.dropout(self.source_embedding(source), training=training) * keep
        for i, rnn in enumerate(self.encoder_rnns):
            if i % 2:  # right to left: reverse every sentence within its own length
                flipped = tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)
                h = tf.reverse_sequence(rnn(flipped, mask=mask, training=training), lengths,
                                        seq_axis=1, batch_axis=0)
            else:
                h = rnn(x, mask=mask, training=training)
            x = self._connect(i, x, h * keep, self.encoder_fast) * keep
        mean = tf.reduce_sum(x, axis=1) / tf.maximum(tf.cast(lengths, x.dtype), 1.0)[:, None]
        return {"outputs": x, "keys": self.decoder_attention_keys(x), "mask": mask, "mean": mean}

    # --- decoder --------------------------------------------------------------------------------
    def initial_state(self, memory):
        return {f"layer_{i}": init(memory["mean"]) for i, init in enumerate(self.decoder_init)}

    def _attend(self, s1, y, memory):
        """Context [N, width] from the first layer's previous state s1 and embedding y."""
        query = self.decoder_attention_query(s1) + self.decoder_attention_embedding(y)
        scores = self.decoder_attention_v(tf.tanh(memory["keys"] + query[:, None]))[:, :, 0]
        weights = tf.nn.softmax(masked_logits(scores, memory["mask"]), axis=-1)
        return tf.einsum("ns,nsd->nd", tf.cast(weights, memory["outputs"].dtype), memory["outputs"])

    def _step(self, y, state, memory):
        """y [N, E] (embedded y_{t-1}) -> (top features [N, width], new state)."""
        x = tf.concat([self._attend(state["layer_0"], y, memory), y], axis=-1)
        new_state = {}
        for i, cell in enumerate(self.decoder_cells):
            h, _ = cell(x, [state[f"layer_{i}"]])
            new_state[f"layer_{i}"] = h
            x = self._connect(i, x, h, self.decoder_fast)
        return x, new_state

    def decode(self, memory, target_in, training=False):
        y = tf.transpose(self.dropout(self.target_embedding(target_in), training=training), [1, 0, 2])
        steps = tf.shape(target_in)[1]

        def body(t, state, outputs):
            top, state = self._step(y[t], state, memory)
            return t + 1, state, outputs.write(t, top)

        outputs = tf.TensorArray(self.compute_dtype, size=steps)
        _, _, outputs = tf.while_loop(lambda t, *_: t < steps, body,
                                      (tf.constant(0), self.initial_state(memory), outputs))
        top = tf.transpose(outputs.stack(), [1, 0, 2])
        return self.output_projection(self.output_dropout(top, training=training))

    def step(self, ids, time, state, memory):
        top, state = self._step(self.target_embedding(ids), state, memory)
        return self.output_projection(top), state


@register("deepgru")
class DeepGRU(DeepLAU):
    """The paper's DeepGRU baseline: the same network with GRU cells."""
    HPARAMS = {name: spec for name, spec in DeepLAU.HPARAMS.items() if name != "cell"}
    FIXED = {"cell": "gru"}
