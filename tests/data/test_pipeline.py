import numpy as np
import pytest
import tensorflow as tf

from conftest import synthetic_pairs
from tfnmt.data import pipeline, vocab


@pytest.fixture(scope="module")
def tiny_vocab(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("vocab") / "spm.model")
    vocab.train_sentencepiece([s for p in synthetic_pairs(300) for s in p], path, 60, "word")
    return vocab.Vocab.from_file(path)


def _pairs(n=200):
    pairs = synthetic_pairs(n, seed=3)
    return tf.data.Dataset.from_tensor_slices(([p[0] for p in pairs], [p[1] for p in pairs]))


def test_tokenize_appends_eos_to_source_only(tiny_vocab):
    example = next(iter(tf.data.Dataset.from_tensor_slices((["the dog"], ["Hund der"]))
                        .apply(pipeline.tokenize(tiny_vocab, tiny_vocab))))
    assert example["source"].numpy().tolist() == tiny_vocab.encode("the dog") + [vocab.EOS_ID]
    assert example["target"].numpy().tolist() == tiny_vocab.encode("Hund der")


def test_teacher_forcing_shifts_by_one(tiny_vocab):
    features, labels = next(iter(tf.data.Dataset.from_tensor_slices((["the dog"], ["Hund der"]))
                                 .apply(pipeline.tokenize(tiny_vocab, tiny_vocab))
                                 .apply(pipeline.teacher_forcing())))
    target = tiny_vocab.encode("Hund der")
    assert features["target_in"].numpy().tolist() == [vocab.BOS_ID] + target
    assert labels.numpy().tolist() == target + [vocab.EOS_ID]


def test_filter_drops_empty_and_long(tiny_vocab):
    data = tf.data.Dataset.from_tensor_slices((["the dog", "", "a a a a a a", "cat"],
                                               ["Hund der", "x", "ein", ""]))
    kept = list(data.apply(pipeline.tokenize(tiny_vocab, tiny_vocab))
                .apply(pipeline.filter_length(4, 4)).as_numpy_iterator())
    assert len(kept) == 1 and kept[0]["source"].tolist()[:-1] == tiny_vocab.encode("the dog")


def test_token_batches_respect_the_budget_and_pad_with_zero(tiny_vocab):
    batches = list(pipeline.training_epoch(_pairs(), tiny_vocab, tiny_vocab, epoch=0, seed=1,
                                           batch_tokens=64, max_source_length=10,
                                           max_target_length=10))
    total = 0
    for features, labels in batches:
        source, target_in = features["source"].numpy(), features["target_in"].numpy()
        assert source.shape[0] * max(source.shape[1], labels.shape[1]) <= 64
        assert target_in.shape == labels.shape
        total += source.shape[0]
        # Labels are padded exactly where the shifted inputs are, each tensor to its longest
        # row in the batch (not the sorting window's).
        assert np.array_equal(labels == 0, target_in == 0)
        assert (source[:, -1] != 0).any() and (labels.numpy()[:, -1] != 0).any()
    assert total == 200


def _row_lengths(features, labels):
    """Each row's length as the budget counts it: its longer side, padding excluded."""
    return np.maximum((features["source"].numpy() != 0).sum(1), (labels.numpy() != 0).sum(1))


def test_a_sorted_window_is_cut_greedily_with_one_partial_batch(tiny_vocab):
    """Pairs sorted by length fill each batch up to the budget: taken shortest first, every
    batch but the window's last is full (one more pair of the next batch would not fit), where
    length buckets left a partial batch per bucket."""
    batches = list(pipeline.training_epoch(_pairs(), tiny_vocab, tiny_vocab, epoch=0, seed=1,
                                           batch_tokens=64, max_source_length=10,
                                           max_target_length=10))
    rows = sorted((_row_lengths(f, l) for f, l in batches), key=lambda r: (r.max(), r.min()))
    lengths = sorted(int(n) for r in rows for n in r)
    expected, current = [], []
    for n in lengths:  # the greedy cut, by hand
        if current and (len(current) + 1) * n > 64:
            expected.append(current)
            current = []
        current.append(n)
    expected.append(current)
    assert [sorted(r.tolist()) for r in rows] == expected
    for batch, following in zip(rows, rows[1:]):
        assert (len(batch) + 1) * min(following) > 64  # full: the next pair would not fit


def test_sorted_batches_waste_less_than_length_buckets_did(tiny_vocab):
    batches = list(pipeline.training_epoch(_pairs(), tiny_vocab, tiny_vocab, epoch=0, seed=1,
                                           batch_tokens=64, max_source_length=10,
                                           max_target_length=10))
    padded = sum(f["source"].shape[0] * max(f["source"].shape[1], l.shape[1]) for f, l in batches)
    real = sum(_row_lengths(f, l).sum() for f, l in batches)
    # The 8 length buckets this replaced padded these 200 pairs to 1.09x their length; 1.02 now.
    assert padded / real < 1.05, padded / real


@pytest.mark.slow
def test_epochs_are_reproducible_and_differ(tiny_vocab):
    def first_sources(epoch, seed):
        data = pipeline.training_epoch(_pairs(), tiny_vocab, tiny_vocab, epoch=epoch, seed=seed,
                                       batch_size=8)
        return [b[0]["source"].numpy().tolist() for b in data.take(3)]
    assert first_sources(0, 5) == first_sources(0, 5)
    assert first_sources(0, 5) != first_sources(1, 5)


@pytest.mark.slow
@pytest.mark.parametrize("global_seed", [0, 1234, None])
def test_an_epoch_alone_is_the_streams_epoch_whatever_the_global_seed(tiny_vocab, global_seed):
    # The trainer checks the first epoch alone and trains on the stream; the data service test
    # compares the two. With TensorFlow's global seed 0 (an earlier `--seed=0` in the process)
    # they once shuffled differently.
    kwargs = dict(seed=5, batch_tokens=64, max_source_length=10, max_target_length=10)
    tf.random.set_seed(global_seed)
    try:
        alone = list(pipeline.training_epoch(_pairs(), tiny_vocab, tiny_vocab, epoch=0, **kwargs))
        stream = list(pipeline.training_stream(_pairs(), tiny_vocab, tiny_vocab, **kwargs)
                      .take(len(alone)))
    finally:
        tf.random.set_seed(None)
    assert len(alone) > 5
    for a, b in zip(alone, stream):
        assert a[0]["position"].numpy().tolist() == b[0]["position"].numpy().tolist()
        assert np.array_equal(a[0]["source"].numpy(), b[0]["source"].numpy())


@pytest.mark.slow
def test_resumed_stream_continues_with_the_next_batch(tiny_vocab):
    kwargs = dict(seed=7, batch_tokens=64, max_source_length=10, max_target_length=10)
    full = list(pipeline.training_stream(_pairs(), tiny_vocab, tiny_vocab, **kwargs).take(40))
    epoch, index = full[24][0]["position"].numpy()
    resumed = list(pipeline.training_stream(_pairs(), tiny_vocab, tiny_vocab, start_epoch=epoch,
                                            skip_batches=index + 1, **kwargs).take(15))
    for a, b in zip(full[25:], resumed):
        assert a[0]["position"].numpy().tolist() == b[0]["position"].numpy().tolist()
        assert np.array_equal(a[0]["source"].numpy(), b[0]["source"].numpy())
        assert np.array_equal(a[1].numpy(), b[1].numpy())
    # The stream crosses epochs: positions restart at batch 0 of the next epoch.
    epochs = [b[0]["position"].numpy()[0] for b in full]
    assert epochs[0] == 0 and epochs[-1] >= 1
