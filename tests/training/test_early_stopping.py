"""Early stopping on the validation metric (--early_stopping_patience): training stops after N
validations without improvement, says why, and a resumed run remembers the count, as it
remembers the clipping threshold that --clip_halving halves at each validation."""

import logging

import pytest

import tensorflow as tf

from conftest import run_cli, tiny_train_flags


def _latest_step(model_dir):
    path = tf.train.latest_checkpoint(f"{model_dir}/ckpt")
    return int(path.rsplit("-", 1)[1])


def _clip_threshold(model_dir):
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(f"{model_dir}/ckpt"))
    return reader.get_tensor("clip_norm/.ATTRIBUTES/VARIABLE_VALUE")


def _train(corpus, model_dir, steps, *extra):
    # A learning rate this small leaves the greedy translations, hence validation BLEU, as they
    # are: no validation after the first improves on it.
    flags = tiny_train_flags(corpus, model_dir, steps=steps) + [
        "--validate_every=5", "--save_every=5", "--log_every=5", "--learning_rate=1e-9",
        "--warmup_steps=0", "--best_metric=bleu", "--bleu_sentences=10", "--beam_size=1", *extra]
    assert run_cli("train", *flags) == 0


@pytest.mark.slow
def test_stops_after_patience_validations_without_improvement_and_remembers_the_count(
        corpus, tmp_path, caplog):
    model_dir = str(tmp_path / "m")
    # Started without early stopping or clip halving: its checkpoints hold neither's state, and
    # resuming with them still works.
    _train(corpus, model_dir, 5)
    halving = ("--early_stopping_patience=2", "--clip_norm=1.0", "--clip_halving")
    # Counting starts at the resume: 10 is its first validation (the best so far), 15 one
    # without improvement, then the step budget ends the run.
    _train(corpus, model_dir, 15, *halving)
    assert _latest_step(model_dir) == 15
    assert _clip_threshold(model_dir) == 0.25  # halved at 10 and 15
    # Resumed with that count remembered, 20 is the second validation without improvement
    # (a fresh count would stop at 30).
    with caplog.at_level(logging.INFO):
        _train(corpus, model_dir, 100, *halving)
    assert _latest_step(model_dir) == 20
    assert "early stopping" in caplog.text and "--early_stopping_patience=2" in caplog.text
    assert _clip_threshold(model_dir) == 0.125  # a fresh threshold would be 0.5
    assert "gradient clipping threshold -> 0.125" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO):
        _train(corpus, model_dir, 100, "--early_stopping_patience=2")
    assert _latest_step(model_dir) == 20
    assert "stopped early at step 20" in caplog.text
