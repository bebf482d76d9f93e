"""The base of encoders and decoders (tfnmt/encoders, tfnmt/decoders): parts a model wires, the
typed output every encoder gives, and the registries that let any registered encoder feed any
registered decoder that can read it (models/hybrid.py).

An encoder gives an `EncoderOutput`: a sequence (`outputs` [B, S, W] and its `mask` [B, S]), a
`summary` [B, W'] of the sentence, or both, plus `extras` only a matching decoder reads (the
DenseNMT encoder's layers for DenseAtt). A sequence encoder that computes no summary of its own
gets the mean of its outputs over the real tokens (`summary_of`), so every encoder can feed a
decoder that starts from, or only reads, one vector of the source.
"""

import dataclasses

import keras
import tensorflow as tf

from tfnmt.registries import registrar


class Part(keras.layers.Layer):
    """A group of layers that a model drives through the part's methods (`encode`, `decode`,
    `step`, ...), never by calling the part itself. A part that is not called opens no name
    scope: its layers' variables get the paths they would get as the model's own layers, so the
    checkpoint keys of models that held those layers directly stay valid. Keras still tracks the
    part's layers, so the model's weights include them."""

    def __init__(self, hparams, scope=None, **kwargs):
        super().__init__(**kwargs)
        self.hparams = dict(hparams)
        # The model's name: layers built before the model is called (`build_now`) go under it.
        self.scope = scope
        # Its layers build themselves when the model first runs the part.
        self.built = True

    def build_now(self, layer, input_shape):
        """Builds `layer` under the model's name, as a first call inside the model would (the
        checkpoint keys); for layers first called inside a tf.while_loop, where variables
        cannot be created."""
        with keras.name_scope(self.scope):
            layer.build(input_shape)
        return layer

    def call(self, *args, **kwargs):
        raise TypeError(f"{type(self).__name__} is a part: call its methods, not the part")


@dataclasses.dataclass(frozen=True)
class EncoderOutput:
    """What an encoder gives. `outputs`/`mask`: None for a sentence encoder (one vector);
    `summary`: None where the mean of the outputs stands for the sentence."""
    outputs: tf.Tensor = None
    mask: tf.Tensor = None
    summary: tf.Tensor = None
    extras: dict = dataclasses.field(default_factory=dict)

    @property
    def width(self):
        """W, the outputs' width (the encoder's `output_width`); None for a sentence encoder."""
        return None if self.outputs is None else self.outputs.shape[-1]


def summary_of(encoded):
    """The sentence as one vector [B, W']: the encoder's own summary, or the mean of its
    outputs over the real tokens."""
    if encoded.summary is not None:
        return encoded.summary
    outputs = encoded.outputs
    keep = tf.cast(encoded.mask, outputs.dtype)[:, :, None]
    count = tf.reduce_sum(keep, axis=1)
    return tf.reduce_sum(outputs * keep, axis=1) / tf.maximum(count, 1.0)


class Encoder(Part):
    """`encode(source [B, S], training) -> EncoderOutput`. Set in `__init__`, from the
    hyper-parameters alone (a decoder builds layers of those widths before any tensor exists):
    `output_width` (W, None for a sentence encoder) and `summary_width` (W'). A class that
    gives extras names them in EXTRAS."""
    HPARAMS = {}
    EXTRAS = frozenset()
    # The most source tokens (eos included) it reads: the translator splits longer sources into
    # chunks and the trainer drops longer pairs. None = any length.
    source_window = None
    output_width = None
    summary_width = None
    # False for a sentence encoder: it gives only the summary.
    GIVES_SEQUENCE = True

    def encode(self, source, training=False):
        raise NotImplementedError(f"{type(self).__name__} must implement encode()")


class Decoder(Part):
    """`memory(encoded: EncoderOutput) -> memory` (a nest of batch-major tensors, once per
    sentence), `decoding_memory(memory)` (what only the steps read), `decode`, `initial_state`,
    `step` (models/base.py). Built as `Decoder(hparams, vocab_size, encoder=the encoder part)`,
    from which it reads the widths it needs: it reads an encoder of any `output_width` (mapping
    it to the width it attends to where it needs one). READS: "sequence" (attends to the outputs) or
    "summary" (reads only the sentence vector)."""
    HPARAMS = {}
    READS = "sequence"
    attends = False

    @classmethod
    def declared_behind(cls, encoder, declared):
        """Its declarations (name -> HParam) behind `encoder` (a class): a decoder whose options
        need an encoder's extras narrows them here."""
        return declared

    def memory(self, encoded):
        raise NotImplementedError(f"{type(self).__name__} must implement memory()")

    def run_steps(self, y, memory):
        """Teacher forcing for a decoder whose every position reads the one before (input
        feeding, the previous state in the attention query): y [B, T, E], the embedded targets,
        through its `_step(y_t, state, memory) -> (features, state)` inside one tf.while_loop,
        so that it cannot disagree with incremental decoding. Returns features [B, T, W]."""
        y = tf.transpose(y, [1, 0, 2])
        steps = tf.shape(y)[0]

        def body(t, state, outputs):
            features, state = self._step(y[t], state, memory)
            return t + 1, state, outputs.write(t, features)

        outputs = tf.TensorArray(y.dtype, size=steps)
        _, _, outputs = tf.while_loop(lambda t, *_: t < steps, body,
                                      (tf.constant(0), self.initial_state(memory), outputs))
        return tf.transpose(outputs.stack(), [1, 0, 2])

    def decoding_memory(self, memory):
        """The memory its `step` reads (models/base.py; default: the memory as it is)."""
        return memory

    def fixed_initial_state(self, memory, steps):
        """An `initial_state` whose tensors keep their shapes over `steps` steps (models/base.py;
        default: `initial_state`, for a state that never grows)."""
        return self.initial_state(memory)


# --- the registries: `@register_encoder(NAME)` / `@register_decoder(NAME)` on the part's class,
# one line; models/hybrid.py imports every module of tfnmt/encoders and tfnmt/decoders.
ENCODERS, DECODERS = {}, {}
register_encoder = registrar(ENCODERS, "encoder", "part_name")
register_decoder = registrar(DECODERS, "decoder", "part_name")


def can_read(encoder, decoder):
    """Whether `decoder` (a class) can be wired behind `encoder` (a class)."""
    return decoder.READS == "summary" or encoder.GIVES_SEQUENCE
