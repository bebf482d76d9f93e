"""The server's batcher (serving/batching.py): concurrent requests merged, large ones split, a
request's pieces padded to one shape."""

import threading
import time

import numpy as np
import pytest

from tfnmt.serving.batching import Batcher
from tfnmt.serving.options import BatchingOptions
from tfnmt.serving.status import ServingError


def test_batcher_merges_concurrent_requests_and_splits_large_ones():
    sizes = []

    def run(batch):
        sizes.append(len(batch))
        time.sleep(0.01)
        return {"out": np.array([s.upper() for s in batch]), "n": np.arange(len(batch))}

    batcher = Batcher(run, BatchingOptions(max_batch_size=4, batch_timeout_micros=200_000,
                                           max_enqueued_batches=4))
    results = {}

    def client(i):
        results[i] = batcher.submit([f"s{i}"])["out"].tolist()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: [f"S{i}"] for i in range(8)}
    assert max(sizes) == 4 and sum(sizes) == 8  # requests were merged, never past max_batch_size
    sizes.clear()
    out = batcher.submit([f"w{i}" for i in range(10)])
    assert out["out"].tolist() == [f"W{i}" for i in range(10)] and sizes == [4, 4, 2]
    with pytest.raises(ServingError, match="queue to which this task was submitted is full") as error:
        batcher.submit(["x"] * 17)
    assert error.value.http_status == 503
    batcher.close()


def test_batcher_pads_the_pieces_of_a_request_to_one_shape():
    # A request split into pieces (max_batch_size 1) whose outputs have their batch's lengths.
    # Strings come back from TensorFlow as bytes objects.
    batcher = Batcher(lambda inputs: {"tokens": np.array([[c.encode() for c in inputs[0]]], object),
                                      "attention": np.ones([1, len(inputs[0]), 2])},
                      BatchingOptions(max_batch_size=1))
    try:
        out = batcher.submit(["ab", "abcd"])
    finally:
        batcher.close()
    assert out["tokens"].tolist() == [[b"a", b"b", b"", b""], [b"a", b"b", b"c", b"d"]]
    assert out["attention"].sum(axis=(1, 2)).tolist() == [4.0, 8.0]
