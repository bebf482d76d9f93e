"""Training batches from a tf.data service: a dispatcher and two workers on 127.0.0.1, in this
process. Two training workers of one run share its job: they see disjoint batches whose union
is the epoch, each as the local pipeline makes it."""

import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import TINY_MODEL_FLAGS, run_cli, write_corpus
from tfnmt.cli import data_service
from tfnmt.data import pipeline, sources, vocab
from tfnmt.data.options import DataServiceOptions

BATCHING = dict(batch_tokens=96, batch_size=0, max_source_length=50, max_target_length=50)


def _batches_by_position(stream):
    return {tuple(features["position"].numpy()): features["source"].numpy()
            for features, _ in stream}


@pytest.mark.slow
def test_two_training_workers_share_an_epoch_through_the_data_service(tmp_path, capsys):
    corpus = write_corpus(str(tmp_path / "corpus"), splits=(("train", 300), ("valid", 10)))
    spec = sources.DataSpec(f"text:{corpus}", "en", "de")
    vocab.train_sentencepiece(sources.sentences(spec, "train"), str(tmp_path / "spm.model"),
                              vocab_size=60, model_type="word")
    vocabs = (vocab.Vocab.from_file(str(tmp_path / "spm.model")),) * 2
    dispatcher = data_service.start(DataServiceOptions(data_service_port=0))
    workers = [data_service.start(DataServiceOptions(data_service=dispatcher.target,
                                                     data_service_port=0,
                                                     data_service_host="localhost"))
               for _ in range(2)]
    assert "dispatcher at grpc://" in data_service.address(dispatcher, DataServiceOptions())
    try:
        pairs = sources.pairs(spec, "train")
        local = _batches_by_position(pipeline.training_epoch(pairs, *vocabs, epoch=0, seed=5,
                                                             **BATCHING))
        consumers = [iter(pipeline.training_stream(pairs, *vocabs, seed=5,
                                                   data_service=dispatcher.target,
                                                   job_name="run", **BATCHING))
                     for _ in range(2)]
        seen = [{}, {}]
        # The stream is endless: workers make epochs 0, 1, ... at once; read until epoch 0 is
        # complete in the union (or clearly never will be).
        for _ in range(10 * len(local)):
            for consumer, got in zip(consumers, seen):
                features, _ = next(consumer)
                position = tuple(features["position"].numpy())
                assert position not in seen[0] and position not in seen[1], position
                got[position] = features["source"].numpy()
            if all(p in seen[0] or p in seen[1] for p in local):
                break
        union = {**seen[0], **seen[1]}
        assert set(local) <= set(union)
        for position, source in local.items():
            np.testing.assert_array_equal(union[position], source)
        assert seen[0] and seen[1]
        # `train` through the service: a few steps, the batches from the workers.
        model_dir = tmp_path / "m"
        assert run_cli("train", f"--model_dir={model_dir}", f"--data=text:{corpus}",
                       *TINY_MODEL_FLAGS, "--train_steps=3", "--batch_tokens=256", "--max_source_length=20",
                       "--max_target_length=20",
                       "--validate_every=3", "--valid_split=", "--save_every=3", "--evaluate_at_end=false",
                       f"--data_service={dispatcher.target}") == 0
        assert os.path.isfile(model_dir / "ckpt" / "ckpt-3.index")
    finally:
        for server in (*workers, dispatcher):
            server.stop()
    assert run_cli("data-service", "--data_service=localhost:5050") == 2
    assert capsys.readouterr().err.strip().endswith(
        "give the dispatcher as grpc://HOST:PORT")
