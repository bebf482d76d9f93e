"""Epoch-based schedules: the training stream marks each epoch's last batch, --validate_per_epoch
validates (and runs the NAG lr shrink) right after it, and --lr_shrink_mode=after_first_rise
anneals at every validation once the validation loss has risen (DenseNMT's WMT14 recipe)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import events, run_cli, synthetic_pairs, tiny_train_flags
from tfnmt.data import pipeline, vocab
from tfnmt.training import checkpoints
from tfnmt.training.callbacks import ShrinkOnValidationRise
from tfnmt.training.options import TrainOptions
from tfnmt.training.optimizers import make_optimizer


@pytest.fixture(scope="module")
def tiny_vocab(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("vocab") / "spm.model")
    vocab.train_sentencepiece([s for p in synthetic_pairs(300) for s in p], path, 60, "word")
    return vocab.Vocab.from_file(path)


@pytest.mark.parametrize("batching", [dict(batch_tokens=64), dict(batch_size=7)])
def test_the_stream_marks_the_last_batch_of_every_epoch(tiny_vocab, batching):
    pairs = synthetic_pairs(90, seed=3)
    data = tf.data.Dataset.from_tensor_slices(([p[0] for p in pairs], [p[1] for p in pairs]))
    stream = pipeline.training_stream(data, tiny_vocab, tiny_vocab, seed=7, max_source_length=10,
                                      max_target_length=10, **batching)
    batches = [(f["position"].numpy().tolist(), bool(f["epoch_end"].numpy()))
               for f, _ in stream.take(60)]
    epochs = [position[0] for position, _ in batches]
    assert epochs[-1] >= 2  # the sample crosses at least two epoch boundaries
    for (position, end), (following, _) in zip(batches, batches[1:]):
        assert end == (following[0] != position[0]), (position, following)


def _validation_steps(model_dir):
    return [step for step, _ in events(model_dir, "validation/loss")]


@pytest.mark.slow
def test_validate_per_epoch_validates_right_after_each_epoch_ends(corpus, tmp_path):
    model_dir = str(tmp_path / "m")
    steps = 45
    flags = [f for f in tiny_train_flags(corpus, model_dir, steps=steps) if not f.startswith("--validate_every")]
    assert run_cli("train", *flags, "--validate_every=1000", "--validate_per_epoch") == 0
    epoch, index = tf.train.load_checkpoint(checkpoints.resolve(model_dir)).get_tensor(
        "data_position/.ATTRIBUTES/VARIABLE_VALUE").tolist()
    assert epoch >= 2
    per_epoch = (steps - (index + 1)) // epoch  # batches in an epoch (the same in every epoch)
    expected = [per_epoch * e for e in range(1, epoch + 1)]
    assert _validation_steps(model_dir) == sorted(set(expected + [steps]))


def test_after_first_rise_the_lr_shrinks_at_every_validation_and_survives_a_restart():
    optimizer = make_optimizer(TrainOptions(optimizer="nag", learning_rate=0.25, momentum=0.99,
                                            clip_norm=0.1))
    optimizer.build([keras.Variable(np.zeros(2, np.float32))])
    control = ShrinkOnValidationRise(0.1, 1e-4, mode="after_first_rise", initial_learning_rate=0.25)
    assert not control.update(optimizer, 3.0)
    assert not control.update(optimizer, 2.5)
    assert optimizer.learning_rate.numpy() == pytest.approx(0.25)
    assert not control.update(optimizer, 2.6)  # the first rise
    assert optimizer.learning_rate.numpy() == pytest.approx(0.025)
    assert not control.update(optimizer, 2.4)  # lower, but annealing has begun
    assert optimizer.learning_rate.numpy() == pytest.approx(0.0025)
    # A resumed run builds a new controller; the checkpointed lr tells it annealing has begun.
    resumed = ShrinkOnValidationRise(0.1, 1e-4, mode="after_first_rise", initial_learning_rate=0.25)
    resumed.previous.assign(2.4)
    assert not resumed.update(optimizer, 2.3)
    assert optimizer.learning_rate.numpy() == pytest.approx(0.00025)
    assert resumed.update(optimizer, 2.2)  # 2.5e-5 < 1e-4: stop


def test_on_rise_mode_shrinks_only_when_the_loss_rises():
    optimizer = make_optimizer(TrainOptions(optimizer="nag", learning_rate=0.25))
    optimizer.build([keras.Variable(np.zeros(2, np.float32))])
    control = ShrinkOnValidationRise(0.1, 1e-4, mode="on_rise", initial_learning_rate=0.25)
    for loss in (3.0, 3.1, 2.0, 1.9):
        control.update(optimizer, loss)
    assert optimizer.learning_rate.numpy() == pytest.approx(0.025)


def test_an_unknown_shrink_mode_is_one_error_line(corpus, tmp_path, capsys):
    assert run_cli("train", *tiny_train_flags(corpus, str(tmp_path / "m"), steps=2),
                   "--optimizer=nag", "--learning_rate=0.25", "--lr_shrink_mode=sometimes") == 2
    errors = [l for l in capsys.readouterr().err.splitlines() if "error" in l]
    assert len(errors) == 1 and errors[0].startswith("tfnmt train: error:")
    assert "--lr_shrink_mode" in errors[0] and "after_first_rise" in errors[0]


def test_a_global_seed_of_zero_still_makes_a_stream_of_distinct_epochs(tiny_vocab):
    """`tfnmt train --seed=0` sets TensorFlow's global seed to 0, under which the epoch's
    tensor seed once failed the shuffle ("a symbolic tf.Tensor as a Python bool")."""
    import keras
    pairs = synthetic_pairs(40, seed=3)
    data = tf.data.Dataset.from_tensor_slices(([p[0] for p in pairs], [p[1] for p in pairs]))
    keras.utils.set_random_seed(0)
    try:
        stream = pipeline.training_stream(data, tiny_vocab, tiny_vocab, seed=7, batch_size=40,
                                          max_source_length=10, max_target_length=10)
        first, second = [batch[0]["source"].numpy() for batch in stream.take(2)]
    finally:
        keras.utils.set_random_seed(1)
    assert sorted(map(tuple, first)) == sorted(map(tuple, second))  # one epoch each
    assert not np.array_equal(first, second)  # shuffled differently
