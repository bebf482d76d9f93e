"""Gradient accumulation (--accumulate_steps): one optimizer step over N batches, weighted by
their target tokens, counted as one step everywhere (schedule, checkpoints, data position)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import events, run_cli, tiny_train_flags
from tfnmt.data.vocab import BOS_ID, EOS_ID
from tfnmt.models import catalog
from tfnmt.training import checkpoints, step

VOCAB = 30


def _batch(rng, lengths, width):
    """(features, labels) of random sentences with these target lengths, padded to `width`."""
    source = np.zeros((len(lengths), width), np.int32)
    target_in = np.zeros((len(lengths), width + 1), np.int32)
    labels = np.zeros((len(lengths), width + 1), np.int32)
    for row, n in enumerate(lengths):
        words = rng.integers(4, VOCAB, size=n)
        source[row, :n] = rng.integers(4, VOCAB, size=n)
        target_in[row, : n + 1] = [BOS_ID, *words]
        labels[row, : n + 1] = [*words, EOS_ID]
    return {"source": tf.constant(source), "target_in": tf.constant(target_in)}, tf.constant(labels)


def _concatenated(a, b):
    (fa, la), (fb, lb) = a, b
    features = {k: tf.concat([fa[k], fb[k]], axis=0) for k in fa}
    return features, tf.concat([la, lb], axis=0)


def _update_after_one_fit_step(element):
    """Weights moved by one training step of a fresh tiny Transformer (plain SGD, lr 1: the
    update is the gradient itself, so any misweighting of the batches shows). Eager, to skip
    tracing; the CLI test below runs the same step inside `fit`."""
    keras.utils.set_random_seed(3)
    model = catalog.get("transformer")(VOCAB, VOCAB, encoder_layers=1, decoder_layers=1,
                                        d_model=16, ffn_dim=32, num_heads=2, dropout=0.0)
    model.label_smoothing = 0.1
    model.build_with_dummy_batch()
    step.compile(model, keras.optimizers.SGD(1.0))
    before = [w.numpy().copy() for w in model.trainable_weights]
    model.train_step(element)
    assert int(model.optimizer.iterations.numpy()) == 1  # one optimizer step, however many batches
    return np.concatenate([(w.numpy() - b).ravel() for w, b in zip(model.trainable_weights, before)])


@pytest.mark.parametrize("policy, tolerance", [("float32", 1e-5), ("mixed_float16", 5e-3)])
def test_two_accumulated_batches_step_like_one_batch_holding_both(policy, tolerance):
    rng = np.random.default_rng(0)
    # Very different token counts (7 vs 43 target tokens with eos): a plain mean of the two
    # batches' mean losses would weigh a token of the small batch about 6x too much.
    small = _batch(rng, [2, 3], width=3)
    large = _batch(rng, [8, 7, 6, 8, 6], width=8)
    keras.mixed_precision.set_global_policy(policy)
    try:
        accumulated = _update_after_one_fit_step((small, large))
        together = _update_after_one_fit_step(_concatenated(_batch_padded(small, 8), large))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert np.abs(together).max() > 1e-3  # the step did move the weights (no skipped step)
    error = np.abs(accumulated - together).max() / np.abs(together).max()
    assert error < tolerance, error


def _batch_padded(batch, width):
    features, labels = batch
    pad = lambda t, w: tf.pad(t, [[0, 0], [0, w - t.shape[1]]])
    return ({"source": pad(features["source"], width), "target_in": pad(features["target_in"], width + 1)},
            pad(labels, width + 1))


def test_a_model_compiled_by_keras_alone_refuses_to_train_and_names_the_step_to_compile_with():
    # The training step is tfnmt.training.step's; Keras' own would train nothing sensible.
    model = catalog.get("transformer")(VOCAB, VOCAB, encoder_layers=1, decoder_layers=1,
                                        d_model=16, ffn_dim=32, num_heads=2)
    model.label_smoothing = 0.1
    model.build_with_dummy_batch()
    model.compile(optimizer=keras.optimizers.SGD(1.0), run_eagerly=True)
    batches = tf.data.Dataset.from_tensors(_batch(np.random.default_rng(0), [2, 3], width=3))
    for run in (model.fit, model.evaluate):
        with pytest.raises(NotImplementedError, match=r"tfnmt\.training\.step\.compile"):
            run(batches, verbose=0)
    step.compile(model, keras.optimizers.SGD(1.0), run_eagerly=True)
    assert np.isfinite(model.fit(batches, verbose=0, shuffle=False).history["loss"][0])
    assert np.isfinite(model.evaluate(batches, verbose=0))


@pytest.mark.slow
def test_accumulated_steps_count_once_per_n_batches_and_resume_after_the_last_batch(corpus, tmp_path):
    model_dir = str(tmp_path / "m")
    for steps in (3, 6):  # the second run resumes the first
        assert run_cli("train", *tiny_train_flags(corpus, model_dir, steps=steps),
                       "--accumulate_steps=2") == 0
    reader = tf.train.load_checkpoint(checkpoints.resolve(model_dir))
    assert reader.get_tensor("optimizer/iteration/.ATTRIBUTES/VARIABLE_VALUE") == 6
    # 6 steps x 2 batches, none trained twice: the last batch trained is batch 11 of epoch 0
    # (an epoch of the tiny corpus holds more than 12 batches of 256 tokens).
    assert reader.get_tensor("data_position/.ATTRIBUTES/VARIABLE_VALUE").tolist() == [0, 11]
    # The schedule logged by optimizer step: the second run started after step 3.
    assert [s for s, _ in events(model_dir, "train/loss")] == [3, 6]


def test_accumulate_steps_must_be_positive(corpus, tmp_path, capsys):
    assert run_cli("train", *tiny_train_flags(corpus, str(tmp_path / "m"), steps=2),
                   "--accumulate_steps=0") == 2
    errors = [l for l in capsys.readouterr().err.splitlines() if "error" in l]
    assert len(errors) == 1 and errors[0].startswith("tfnmt train: error:")
    assert "--accumulate_steps=0" in errors[0] and "must be an integer >= 1" in errors[0]
