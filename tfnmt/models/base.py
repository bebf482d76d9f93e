"""The contract every translation model implements.

The trainer, the beam search and the exporter only ever call these methods, so a new
architecture plugs in by subclassing `Seq2SeqModel` and registering itself:

    encode(source [B, S], training) -> memory          any nest of tensors, batch-major
    decode(memory, target_in [B, T], training) -> logits [B, T, V]   (teacher forcing)
    decoding_memory(memory) -> memory                   adds what every step reads (default: as is)
    initial_state(memory) -> state                      any nest of tensors, batch-major
    fixed_initial_state(memory, steps) -> state         the same, every tensor keeping its
                                                        shape over `steps` steps (XLA decoding)
    step(ids [N], time, state, memory) -> (logits [N, V], state)     one decoding step
    translation_loss(labels, logits) -> (loss, num_tokens)

Decoding calls `decoding_memory` once per batch, before beam search tiles the memory once;
`initial_state` and `step` get that memory. Beam search reorders `state` with `tf.gather` on
axis 0 at every step, so what never differs between the hypotheses of one sentence (attention
keys of the source, say) belongs in the memory, not in the state. Everything in both must have
the batch as its first dimension: the rows of a sentence whose result is final leave both, so
`step` may get fewer rows than the step before. Two exceptions (decoding/shared.py):
`memory["shared"]` (`SHARED`), what is the same for every sentence (the transposed output
matrix), which the searches neither tile nor gather; and `memory["by_sentence"]`
(`BY_SENTENCE`), one row per sentence where the rest has one per hypothesis, which a beam
search gathers by sentence: a step reads the hypotheses of a sentence as consecutive rows, k of
them to each of its rows (k = 1 outside a beam search). Auxiliary losses (e.g. a diversity term)
are added with `self.add_loss` inside `call` and summed into the training loss.

A model is decoded by the searches of its `search_family` (decoding/searches.py). A CTC
model (`autoregressive = False`, `search_family = "ctc"`) implements, instead of
`initial_state`/`step`,

    label_log_probs(memory) -> (log_probs [B, L, C], lengths [B])   every position's labels
    blank_id                                                         the blank label's id

and its `decode` may return any nest that its own `translation_loss` takes (CTC: logits and
their lengths).

Scalars worth watching during training (an auxiliary loss term, pairs a loss had to drop) are
recorded with `self.report(name, value)` while the step is computed and logged as train/NAME:
their mean over each logging interval, or their sum with `total=True` (counts). With auxiliary
losses the translation loss alone is reported as train/translation_loss.
"""

import keras
import tensorflow as tf

from tfnmt.data.vocab import PAD_ID
from tfnmt.errors import ConfigError
from tfnmt.objectives.losses import label_smoothed_cross_entropy

# Names of reported scalars (`report(..., total=True)`) that training sums over a logging interval
# instead of averaging.
TOTAL_PREFIX = "total/"
# Keras' fit and evaluate call train_step / test_step, which training/step.py provides.
_UNCOMPILED = ("a translation model trains and evaluates with tfnmt's training step: compile it "
               "with tfnmt.training.step.compile(model, optimizer, ...), not model.compile")


class Seq2SeqModel(keras.Model):
    HPARAMS = {}
    registry_name = None
    # Non-autoregressive models (CTC) set this False.
    autoregressive = True
    # Which searches decode it (decoding/searches.py FAMILIES).
    search_family = "autoregressive"
    # A model whose encoder reads at most this many source tokens (eos included) sets it; the
    # translator then splits longer sources into chunks (or refuses them, --long_input=error)
    # and the trainer drops longer training pairs. None = any length.
    source_window = None

    def __init__(self, source_vocab_size, target_vocab_size, **hparams):
        super().__init__(name=self.registry_name)
        self.source_vocab_size = source_vocab_size
        self.target_vocab_size = target_vocab_size
        # Of the training loss: a training setting (training/options.py), which training sets
        # (trainer.compiled_model); a model that is only decoded has none, and its loss refuses
        # to be computed.
        self.label_smoothing = None
        self.hparams = self.with_defaults(hparams)
        # Where training is in its data stream: (epoch, batch index). Checkpointed for resume.
        # Under tf.distribute every replica assigns the same value (training/step.py).
        self.data_position = tf.Variable([0, -1], dtype=tf.int64, trainable=False, name="data_position",
                                         aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        # Scalars of the step being traced; a plain dict, hidden from Keras/TF tracking (it holds
        # graph tensors that must not become part of the model's saved state).
        object.__setattr__(self, "_reports", {})
        # The loss fit and evaluate report (training/step.py), per replica, averaged over
        # sentences since the last reset (Keras resets `metrics` at each epoch, i.e. every
        # --log_every steps).
        self.loss_tracker = keras.metrics.Mean(name="loss")

    @property
    def metrics(self):
        return [self.loss_tracker]

    # --- the contract -------------------------------------------------------------------------
    def encode(self, source, training=False):
        raise NotImplementedError(f"{type(self).__name__} must implement encode()")

    def decode(self, memory, target_in, training=False):
        raise NotImplementedError(f"{type(self).__name__} must implement decode()")

    def decoding_memory(self, memory):
        return memory

    def initial_state(self, memory):
        raise NotImplementedError(f"{type(self).__name__} must implement initial_state()")

    def step(self, ids, time, state, memory):
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def fixed_initial_state(self, memory, steps):
        return self.initial_state(memory)

    def translation_loss(self, labels, logits):
        if self.label_smoothing is None:
            raise ConfigError(f"model {self.registry_name!r} has no label_smoothing (it is set "
                              "for training, trainer.compiled_model): set it to train the model")
        return label_smoothed_cross_entropy(labels, logits, self.label_smoothing)

    # --- alignments (optional) ----------------------------------------------------------------
    # A model that attends over the source sets `attends` and returns, from `latest_attention`,
    # the weights [N, T, S] (rows sum to 1 over real source positions, 0 on padding) of the
    # latest `step` (T = 1) or `decode` in the same trace: the beam search reads them after
    # each step when alignments are asked for (decoding/beam_search.py).
    @property
    def attends(self):
        return False

    def latest_attention(self):
        raise ConfigError(self.cannot_align())

    def cannot_align(self):
        return (f"--alignments: model {self.registry_name!r} has no attention over the source "
                "words to align with")

    # --- Keras plumbing -----------------------------------------------------------------------
    def call(self, inputs, training=False):
        memory = self.encode(inputs["source"], training=training)
        return self.decode(memory, inputs["target_in"], training=training)

    def build(self, inputs_shape):
        # Without a build() of its own, Keras traces call() symbolically to create the variables
        # before the first real call, which then creates them anyway: the trace doubled the cost
        # of building a model. Every layer still builds itself when first called.
        pass

    def build_with_dummy_batch(self):
        """Creates all variables (before restoring a checkpoint or counting parameters)."""
        dummy = tf.constant([[4, 3]], tf.int32)
        self({"source": dummy, "target_in": dummy}, training=False)

    def report(self, name, value, total=False):
        """Records a scalar of the training step being computed (an auxiliary loss term, say);
        the step (training/step.py) returns it in its logs and the trainer logs train/NAME: the
        mean over each logging interval, or the sum with `total=True` (counts, such as dropped
        pairs)."""
        self._reports[f"{TOTAL_PREFIX}{name}" if total else name] = tf.cast(value, tf.float32)

    def take_reports(self):
        """The scalars `report` recorded since the last take, which it forgets: the training
        step (training/step.py) takes them around each batch it computes."""
        reports = dict(self._reports)
        self._reports.clear()
        return reports

    def train_step(self, data):
        raise NotImplementedError(_UNCOMPILED)

    def test_step(self, data):
        raise NotImplementedError(_UNCOMPILED)

    def get_config(self):
        return dict(source_vocab_size=self.source_vocab_size,
                    target_vocab_size=self.target_vocab_size, **self.hparams)

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    # --- helpers for subclasses -----------------------------------------------------------------
    @classmethod
    def declared(cls, hparams):
        """The declarations (name -> HParam) that hold for `hparams`: a model whose parts are
        chosen by hyper-parameters (hybrid) declares those of the chosen parts."""
        return cls.HPARAMS

    @classmethod
    def title(cls, hparams):
        """The model as an error message names it."""
        return repr(cls.registry_name)

    @classmethod
    def with_defaults(cls, hparams):
        """The model's declared defaults overridden by `hparams`; undeclared names and values
        their declaration refuses are errors."""
        declared = cls.declared(hparams)
        unknown = sorted(set(hparams) - set(declared))
        if unknown:
            raise ConfigError(f"model {cls.title(hparams)} has no hyper-parameter "
                              f"{', '.join(unknown)}")
        for name, value in sorted(hparams.items()):
            declared[name].check(name, value, cls.title(hparams))
        return dict({name: spec.default for name, spec in declared.items()}, **hparams)

    @staticmethod
    def padding_mask(ids):
        return tf.not_equal(ids, PAD_ID)


class EncoderDecoder(Seq2SeqModel):
    """A model wired from parts: `self.encoder` (tfnmt/encoders) and `self.decoder`
    (tfnmt/decoders, built with `encoder=self.encoder`), set in `__init__`. The decoder turns
    the encoder's output (layers/part.py EncoderOutput) into the memory it attends to
    (`decoder.memory(encoded)`: attention keys, say), once per sentence."""

    def encode(self, source, training=False):
        return self.decoder.memory(self.encoder.encode(source, training=training))

    @property
    def source_window(self):
        return self.encoder.source_window

    def decode(self, memory, target_in, training=False):
        return self.decoder.decode(memory, target_in, training=training)

    def decoding_memory(self, memory):
        return self.decoder.decoding_memory(memory)

    def initial_state(self, memory):
        return self.decoder.initial_state(memory)

    def step(self, ids, time, state, memory):
        return self.decoder.step(ids, time, state, memory)

    def fixed_initial_state(self, memory, steps):
        return self.decoder.fixed_initial_state(memory, steps)

    @property
    def attends(self):
        return getattr(self.decoder, "attends", False)

    def latest_attention(self):
        if not self.attends:
            return super().latest_attention()
        return self.decoder.latest_attention()
