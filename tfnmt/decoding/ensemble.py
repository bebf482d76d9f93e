"""An ensemble: several autoregressive models with one vocabulary, decoded as one model.

`Ensemble(models)` implements the decoding side of the model contract (models/base.py) over its
members, so every search (beam, greedy, sampling, n-best, XLA) and the teacher-forced score
decode it unchanged: its memory and state are tuples of the members', and its `step` (and
`decode`) give the arithmetic mean of the members' log-probabilities, log p(y_t) = 1/N sum_i
log p_i(y_t), as OpenNMT-py does. That mean is not renormalised (it is the log of a geometric
mean of distributions, which sums to less than 1), so it sets `gives_log_probs`: the searches
and the scorer take its outputs as they are (beam_search.log_probs_of) where they take a
model's log_softmax. (fairseq averages probabilities, log(1/N sum_i p_i); Marian sums weighted
log-probabilities.)
"""

import tensorflow as tf

from tfnmt.decoding.shared import SHARED, split_shared, with_shared
from tfnmt.errors import ConfigError

MEMBERS = "members"


class Ensemble:
    registry_name = "ensemble"
    autoregressive = True
    search_family = "autoregressive"
    gives_log_probs = True
    # The members' attention is several alignments, not one.
    attends = False

    def __init__(self, models):
        for model in models:
            if not model.autoregressive:
                raise ConfigError(f"model {model.registry_name!r} cannot join an ensemble: it "
                                  "chooses its labels all at once, with no log-probabilities "
                                  "of each next token to average")
        self.models = tuple(models)

    @property
    def source_window(self):
        # Chunks short enough for every member's window.
        windows = [m.source_window for m in self.models if m.source_window]
        return min(windows) if windows else None

    @property
    def weights(self):
        return [weight for model in self.models for weight in model.weights]

    def cannot_align(self):
        return "--alignments: not for an ensemble, whose members attend each in its own way"

    def latest_attention(self):
        raise ConfigError(self.cannot_align())

    def encode(self, source, training=False):
        return tuple(model.encode(source, training=training) for model in self.models)

    def decode(self, memory, target_in, training=False):
        return _mean_log_probs([model.decode(part, target_in, training=training)
                                for model, part in zip(self.models, memory)])

    def decoding_memory(self, memory):
        # Each member's SHARED entry moves to the ensemble's own, which the searches neither
        # tile nor gather.
        rows, shared = zip(*(split_shared(model.decoding_memory(part))
                             for model, part in zip(self.models, memory)))
        return {MEMBERS: rows, SHARED: shared}

    def initial_state(self, memory):
        return tuple(model.initial_state(part)
                     for model, part in zip(self.models, _members(memory)))

    def fixed_initial_state(self, memory, steps):
        return tuple(model.fixed_initial_state(part, steps)
                     for model, part in zip(self.models, _members(memory)))

    def step(self, ids, time, state, memory):
        outputs = [model.step(ids, time, member_state, part)
                   for model, member_state, part in zip(self.models, state, _members(memory))]
        return _mean_log_probs([logits for logits, _ in outputs]), tuple(s for _, s in outputs)


def _members(memory):
    """Each member's memory as its `step` reads it (its SHARED entry back in place)."""
    rows, shared = split_shared(memory)
    return [with_shared(part, entry) for part, entry in zip(rows[MEMBERS], shared)]


def _mean_log_probs(logits):
    """The mean of the log_softmax of each of `logits` (a list of float [..., V])."""
    return tf.reduce_mean(tf.stack([tf.nn.log_softmax(tf.cast(x, tf.float32), axis=-1)
                                    for x in logits]), axis=0)
