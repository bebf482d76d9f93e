"""The training stream as checkpointed state: a resumed run goes on with the next batch at
once, instead of re-making the epoch's batches before it.

fit pulls its batches from `SavedStream.dataset()`, which reads an iterator of the stream that
is saved in every checkpoint (tf.data saves its position, shuffle and bucket buffers). fit pulls
ahead of the step it trains (Keras prefetches), so at each save the batches pulled but not
trained yet are saved too, serialized, and given first when the run resumes.
"""

import collections
import contextlib
import threading

import tensorflow as tf

from tfnmt.training.checkpoints import DATA_STATE

# fit's look-ahead is a batch or two; more would mean batches lost, so `prepare` refuses.
_KEPT = 64


class SavedStream:
    def __init__(self, dataset):
        self.iterator = iter(dataset)
        self.spec = dataset.element_spec
        self._recent = collections.deque(maxlen=_KEPT)  # the last elements fit pulled
        self._pulled = 0  # since `start`
        self._start_step = 0
        self._replay = []
        # A save counts and writes what was pulled while nothing is being pulled: tf.data
        # calls the generator from threads of its own.
        self._lock = threading.Lock()
        # The pulled, untrained elements at the last save: every leaf serialized, in order.
        self.ahead = tf.Variable(tf.constant([], tf.string), shape=tf.TensorShape([None]),
                                 trainable=False, name="data_ahead")

    def trackables(self):
        return {DATA_STATE: self.iterator, DATA_STATE + "_ahead": self.ahead}

    def start(self, step):
        """Training starts at `step` (one element of the stream per step)."""
        self._start_step = step

    @contextlib.contextmanager
    def saving(self, step):
        """Around the save at `step`: no element is pulled meanwhile, and what fit pulled
        beyond the elements trained since `start` is in `ahead`."""
        with self._lock:
            self.prepare(step)
            yield

    def prepare(self, step):
        """What fit pulled beyond the elements trained since `start` (at `step`), written to
        `ahead` (call it under `saving`)."""
        ahead = self._pulled - (step - self._start_step)
        if not 0 <= ahead <= len(self._recent):
            raise RuntimeError(f"the training stream is {ahead} batches ahead of the step")
        elements = list(self._recent)[len(self._recent) - ahead:] if ahead else []
        self.ahead.assign(tf.constant(
            [tf.io.serialize_tensor(leaf).numpy() for element in elements
             for leaf in tf.nest.flatten(element)], tf.string, shape=[ahead * self._leaves()]))

    def restored(self):
        """After a restore: the saved untrained elements are given first."""
        values = self.ahead.numpy()
        specs = tf.nest.flatten(self.spec)
        leaves = len(specs)
        self._replay = [
            tf.nest.pack_sequence_as(self.spec, [
                tf.ensure_shape(tf.io.parse_tensor(values[i + j], spec.dtype), spec.shape)
                for j, spec in enumerate(specs)])
            for i in range(0, len(values), leaves)]

    def _leaves(self):
        return len(tf.nest.flatten(self.spec))

    def _next(self):
        with self._lock:
            element = self._replay.pop(0) if self._replay else next(self.iterator)
            self._recent.append(element)
            self._pulled += 1
        return element

    def dataset(self):
        """What fit reads: the replayed elements, then the iterator's."""
        def forever():
            while True:
                yield self._next()
        options = tf.data.Options()
        # No prefetch of tf.data's own here: fewer batches pulled ahead to save.
        options.experimental_optimization.inject_prefetch = False
        # Its iterator, freed at the end, would wait for tf.data's autotuning thread as the
        # stream's does (data/pipeline.py training_stream).
        options.autotune.enabled = False
        return tf.data.Dataset.from_generator(forever, output_signature=self.spec).with_options(
            options)
