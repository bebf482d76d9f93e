"""The training stream's iterator is saved in each checkpoint: a resumed run goes on with the
next batch at once, the batches an uninterrupted run sees, without re-making the ones before."""

import shutil

import numpy as np
import pytest
import tensorflow as tf

from conftest import events, run_cli, tiny_train_flags, write_corpus
from tfnmt.data import pipeline, sources, vocab
from tfnmt.training import checkpoints, trainer
from tfnmt.training.stream_state import SavedStream

BATCHING = dict(batch_tokens=128, batch_size=0, max_source_length=50, max_target_length=50)


@pytest.fixture(scope="module")
def stream_parts(tmp_path_factory):
    """(pairs, vocabulary) of a tiny corpus, and a directory."""
    base = tmp_path_factory.mktemp("data_state")
    corpus = write_corpus(str(base / "corpus"), splits=(("train", 400),))
    spec = sources.DataSpec(f"text:{corpus}", "en", "de")
    vocab.train_sentencepiece(sources.sentences(spec, "train"), str(base / "spm.model"),
                              vocab_size=60, model_type="word")
    return sources.pairs(spec, "train"), vocab.Vocab.from_file(str(base / "spm.model"))


def _stream(parts, accumulate_steps=1):
    pairs, v = parts
    # A shuffle buffer smaller than the corpus: its contents are part of the state.
    return pipeline.training_stream(pairs, v, v, seed=3, shuffle_buffer=150,
                                    accumulate_steps=accumulate_steps, **BATCHING)


def _flat(batch):
    features, labels = batch
    return [features["position"].numpy(), features["source"].numpy(),
            features["target_in"].numpy(), labels.numpy()]


def test_neither_the_stream_nor_what_fit_reads_runs_tf_datas_autotuning(stream_parts):
    """An iterator with tf.data's autotuning waits, when destroyed, for the autotuning thread to
    wake from its sleep: `tfnmt train` sat 10-50 s after its last line before exiting (and a
    run in-process stalled alike where its stream was freed)."""
    saved = SavedStream(_stream(stream_parts))
    saved.start(0)
    for dataset in (_stream(stream_parts), saved.dataset()):
        assert dataset.options().autotune.enabled is False


@pytest.mark.slow
def test_a_saved_stream_goes_on_with_the_batches_of_an_uninterrupted_one(stream_parts, tmp_path):
    uninterrupted = iter(_stream(stream_parts))
    expected = [_flat(next(uninterrupted)) for _ in range(120)]  # over an epoch's end
    saved = SavedStream(_stream(stream_parts))
    saved.start(0)
    pulled = iter(saved.dataset())
    for _ in range(50):  # fit pulls ahead: 47 trained, 3 more pulled
        next(pulled)
    checkpoints.Checkpoints(str(tmp_path), {"step": tf.Variable(47)}, stream=saved).save(47)
    resumed = SavedStream(_stream(stream_parts))
    restoring = checkpoints.Checkpoints(str(tmp_path), {"step": tf.Variable(0)}, stream=resumed)
    assert restoring.restore_latest().endswith("ckpt-47") and restoring.restored_stream
    resumed.start(47)
    batches = iter(resumed.dataset())
    for want in expected[47:]:
        for got, value in zip(_flat(next(batches)), want):
            np.testing.assert_array_equal(got, value)


@pytest.mark.slow
def test_a_checkpoint_without_the_streams_state_or_with_another_pipelines_is_kept(
        stream_parts, tmp_path, caplog):
    # Written before the state was saved: restored, without it.
    checkpoints.Checkpoints(str(tmp_path / "old"), {"step": tf.Variable(5)}).save(5)
    restoring = checkpoints.Checkpoints(str(tmp_path / "old"), {"step": tf.Variable(0)},
                                        stream=SavedStream(_stream(stream_parts)))
    assert restoring.restore_latest().endswith("ckpt-5") and not restoring.restored_stream
    # The state of another pipeline (batches grouped for accumulation): a warning, the
    # checkpoint restored and kept, not set aside as damaged.
    saved = SavedStream(_stream(stream_parts))
    saved.start(0)
    next(iter(saved.dataset()))
    checkpoints.Checkpoints(str(tmp_path / "other"), {"step": tf.Variable(1)},
                            stream=saved).save(1)
    restoring = checkpoints.Checkpoints(str(tmp_path / "other"), {"step": tf.Variable(0)},
                                        stream=SavedStream(_stream(stream_parts, 2)))
    assert restoring.restore_latest().endswith("ckpt-1") and not restoring.restored_stream
    assert "does not fit this run's input pipeline" in caplog.text
    assert checkpoints.list_checkpoints(str(tmp_path / "other"))[0].endswith("ckpt-1")


@pytest.mark.slow
def test_a_resumed_run_trains_the_batches_of_an_uninterrupted_one_without_remaking_any(
        corpus, tmp_path, monkeypatch, caplog):
    def flags(model_dir, steps):
        return [*tiny_train_flags(corpus, str(model_dir), steps=steps), "--log_every=1",
                "--save_every=4", "--validate_every=1000",
                "--keep_checkpoints=5"]
    whole, split = tmp_path / "whole", tmp_path / "split"
    assert run_cli("train", *flags(whole, 10)) == 0
    # The same run stopped at step 4: its checkpoint of step 4 alone, resumed to 10.
    shutil.copytree(whole, split, ignore=shutil.ignore_patterns("logs", "best", "ckpt-8.*", "ckpt-10.*"))
    with open(split / "ckpt" / "checkpoint", "w") as f:
        f.write('model_checkpoint_path: "ckpt-4"\nall_model_checkpoint_paths: "ckpt-4"\n'
                'all_model_checkpoint_timestamps: 1.0\n')
    made = []
    real = trainer.training_stream
    monkeypatch.setattr(trainer, "training_stream",
                        lambda *args, **kwargs: made.append(args[4]) or real(*args, **kwargs))
    with caplog.at_level("INFO"):
        assert run_cli("train", *flags(split, 10)) == 0
    assert f"resuming from {split}/ckpt/ckpt-4 at step 4" in caplog.text
    # It made its stream once, from the start, and restored its iterator.
    assert made == [(0, -1)]
    # The stream is in the checkpoints training resumes from, not in the best ones (decoded).
    names = lambda path: {key.split("/", 1)[0] for key, _ in tf.train.list_variables(path)}
    assert "data" in names(checkpoints.resolve(str(split)))
    best = checkpoints.list_checkpoints(str(whole), "best")
    assert best and all("data" not in names(path) and "model" in names(path) for path in best)
    losses = [dict(events(str(path), "train/loss")) for path in (whole, split)]
    assert sorted(losses[1]) == list(range(5, 11))
    np.testing.assert_allclose([losses[1][s] for s in range(5, 11)],
                               [losses[0][s] for s in range(5, 11)], rtol=1e-5)
