"""Server-side batching: concurrent requests to one model version share a model call.

TF Serving's semantics (BatchingParameters): a batch holds at most `max_batch_size` inputs;
it is closed when full or `batch_timeout_micros` after its first request arrived, whichever
comes first; `num_batch_threads` batches run at once; at most `max_enqueued_batches` batches
may wait, beyond which requests fail with UNAVAILABLE. A request larger than max_batch_size
is split into pieces that may run in different batches (TF Serving's large-batch splitting).

Translation cost grows with the longest sentence of a batch, so merging costs a little per
sentence; what it buys is one model call (one beam search) for many requests.
"""

import collections
import threading
import time

import numpy as np
from absl import logging

from tfnmt.serving.options import BatchingOptions
from tfnmt.serving.status import ServingError, unavailable


def concatenate(arrays):
    """The rows of `arrays` as one array. Outputs whose later dimensions follow the batch's
    longest sentence (the `alignments` signature's tokens and attention) are padded to the
    largest: "" for strings, 0 for numbers, as within one batch."""
    shape = np.max([a.shape for a in arrays], axis=0)
    padded = [np.pad(a, [(0, 0)] + [(0, int(n) - m) for n, m in zip(shape[1:], a.shape[1:])],
                     constant_values=b"" if a.dtype.kind in ("S", "O") else 0)
              for a in arrays]
    return np.concatenate(padded)


class _Piece:
    __slots__ = ("inputs", "enqueued", "done", "outputs", "error", "abandoned")

    def __init__(self, inputs):
        self.inputs = inputs
        self.enqueued = time.monotonic()
        self.done = threading.Event()
        self.outputs = None
        self.error = None
        self.abandoned = False


class Batcher:
    """`run(list of inputs) -> {name: array with one row per input}` on merged batches."""

    def __init__(self, run, options=BatchingOptions(), name="batcher"):
        self.run = run
        self.max_batch_size = options.max_batch_size
        self.timeout = options.batch_timeout_micros / 1e6
        self.capacity = options.max_enqueued_batches * options.max_batch_size
        self._queue = collections.deque()
        self._queued = 0
        self._closed = False
        self._lock = threading.Condition()
        self._threads = [threading.Thread(target=self._loop, name=f"{name}-{i}", daemon=True)
                         for i in range(options.num_batch_threads)]
        for thread in self._threads:
            thread.start()

    def submit(self, inputs, timeout=None):
        """Outputs for `inputs` (in order); blocks until they are computed or `timeout` (s)."""
        pieces = [_Piece(inputs[i:i + self.max_batch_size])
                  for i in range(0, len(inputs), self.max_batch_size)]
        with self._lock:
            if self._closed:
                raise unavailable("the model version is being unloaded; retry")
            if self._queued + len(inputs) > self.capacity:
                raise unavailable("The batch scheduling queue to which this task was submitted is full")
            self._queue.extend(pieces)
            self._queued += len(inputs)
            self._lock.notify_all()
        deadline = None if timeout is None else time.monotonic() + timeout
        for piece in pieces:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not piece.done.wait(left):
                for p in pieces:
                    p.abandoned = True
                raise ServingError("DEADLINE_EXCEEDED", "Deadline exceeded while the request "
                                   "waited for its batch (--rest_api_timeout_in_ms)")
            if piece.error is not None:
                raise piece.error
        return {name: concatenate([p.outputs[name] for p in pieces])
                for name in pieces[0].outputs}

    def close(self):
        """Stops taking requests; the batch threads finish what is queued, then end."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()

    def _next_batch(self):
        with self._lock:
            while not self._queue:
                if self._closed:
                    return None
                self._lock.wait()
            batch = [self._queue.popleft()]
            size = len(batch[0].inputs)
            closes = batch[0].enqueued + self.timeout
            while size < self.max_batch_size:
                if self._queue:
                    if size + len(self._queue[0].inputs) > self.max_batch_size:
                        break
                    piece = self._queue.popleft()
                    batch.append(piece)
                    size += len(piece.inputs)
                    continue
                left = closes - time.monotonic()
                if left <= 0 or self._closed:
                    break
                self._lock.wait(left)
            self._queued -= size
            return batch

    def _loop(self):
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            batch = [p for p in batch if not p.abandoned] or None
            if batch is None:
                continue
            inputs = [x for piece in batch for x in piece.inputs]
            try:
                outputs = self.run(inputs)
            except ServingError as e:
                error = e
            except Exception as e:  # a failed model call fails its requests, not the server
                logging.exception("batch of %d failed", len(inputs))
                error = ServingError("INTERNAL", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            else:
                error = None
            start = 0
            for piece in batch:
                if error is None:
                    end = start + len(piece.inputs)
                    piece.outputs = {name: value[start:end] for name, value in outputs.items()}
                    start = end
                else:
                    piece.error = error
                piece.done.set()
