import glob
import json
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import events, run_cli, tiny_train_flags
from tfnmt import model_dir as model_dir_lib
from tfnmt.models import catalog
from tfnmt.training import checkpoints
from tfnmt.training.callbacks import ClipHalving, ShrinkOnValidationRise, Validator
from tfnmt.training.options import TrainOptions
from tfnmt.training.optimizers import (InverseSqrtSchedule, LinearDecaySchedule, clip_threshold,
                                      make_optimizer)


def test_loss_falls_on_a_tiny_overfit_set(trained_model):
    losses = events(trained_model, "train/loss")
    assert len(losses) >= 5
    assert losses[-1][1] < 0.7 * losses[0][1], losses
    assert events(trained_model, "validation/loss")
    assert events(trained_model, "validation/bleu")


def test_model_dir_layout(trained_model):
    config = model_dir_lib.read_config(trained_model)
    assert config["model"] == "transformer" and config["hparams"]["d_model"] == 32
    assert [os.path.basename(p) for p in checkpoints.list_checkpoints(trained_model)] == ["ckpt-80", "ckpt-40"]
    best = checkpoints.read_best_index(trained_model)
    assert best and best[0]["step"] == 80


def _copy_of(trained_model, tmp_path):
    """A copy of the session's tiny model (trained to step 80, checkpoints 40 and 80), to resume."""
    model_dir = str(tmp_path / "m")
    shutil.copytree(trained_model, model_dir)
    return model_dir


@pytest.mark.slow
def test_resume_continues_from_the_last_checkpoint(corpus, trained_model, tmp_path):
    model_dir = _copy_of(trained_model, tmp_path)
    before = tf.train.load_checkpoint(checkpoints.resolve(model_dir))
    position = before.get_tensor("data_position/.ATTRIBUTES/VARIABLE_VALUE")
    assert position[1] >= 0
    assert run_cli("train", *tiny_train_flags(corpus, model_dir, steps=90)) == 0
    steps = [s for s, _ in events(model_dir, "train/loss")]
    assert steps == sorted(steps) and steps[0] == 10 and steps[-1] == 90
    assert 80 in steps and steps.count(80) == 1  # the second run started after step 80
    after = tf.train.load_checkpoint(checkpoints.resolve(model_dir))
    assert after.get_tensor("optimizer/iteration/.ATTRIBUTES/VARIABLE_VALUE") == 90


def test_resume_refuses_a_different_architecture(corpus, trained_model, capsys):
    flags = [f for f in tiny_train_flags(corpus, trained_model, steps=100) if not f.startswith("--d_model")]
    assert run_cli("train", *flags, "--d_model=64") == 2
    assert "trained with --d_model=32, not 64" in capsys.readouterr().err


@pytest.mark.slow
def test_corrupt_latest_checkpoint_falls_back_to_the_previous_one_and_is_set_aside(
        corpus, trained_model, tmp_path, caplog):
    model_dir = _copy_of(trained_model, tmp_path)
    latest = checkpoints.resolve(model_dir)
    assert latest.endswith("ckpt-80")
    assert [e["step"] for e in checkpoints.read_best_index(model_dir)] == [80]
    for data in glob.glob(latest + ".data-*") + glob.glob(os.path.join(model_dir, "best", "ckpt-80.data-*")):
        with open(data, "r+b") as f:
            f.truncate(10)
    # What saves killed mid-way leave behind.
    os.makedirs(os.path.join(model_dir, "ckpt", "ckpt-85_temp"))
    open(os.path.join(model_dir, "ckpt", "checkpoint.tmp0123abcd"), "w").close()
    assert run_cli("train", *tiny_train_flags(corpus, model_dir, steps=90)) == 0  # saves 45, 90
    assert "ckpt-80 is unreadable" in caplog.text
    assert "resuming from" in caplog.text and "ckpt-40 at step 40" in caplog.text
    set_aside = [r.getMessage() for r in caplog.records if "set aside" in r.getMessage()]
    assert len(set_aside) == 2 and "best/ckpt-80" in set_aside[1], set_aside
    ckpt_dir = os.path.join(model_dir, "ckpt")
    assert glob.glob(os.path.join(ckpt_dir, "ckpt-80.corrupt-*.index"))
    assert not glob.glob(os.path.join(ckpt_dir, "ckpt-80.index"))
    assert not glob.glob(os.path.join(ckpt_dir, "*_temp*")) + glob.glob(os.path.join(ckpt_dir, "*.tmp*"))
    listed = [os.path.basename(p) for p in checkpoints.list_checkpoints(model_dir)]
    assert listed == ["ckpt-90", "ckpt-45", "ckpt-40"]
    assert "ckpt-80" not in open(os.path.join(ckpt_dir, "checkpoint")).read()
    assert [e["step"] for e in checkpoints.read_best_index(model_dir)] == [90]
    for which in ("last", "best"):
        assert run_cli("average", f"--model_dir={model_dir}", f"--output_dir={tmp_path / which}",
                       f"--average_from={which}") == 0


def test_corrupt_checkpoint_is_a_clear_error_for_translation(trained_model, tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    for path in glob.glob(os.path.join(trained_model, "ckpt", "ckpt-80.*")):
        data = open(path, "rb").read()
        (broken / os.path.basename(path)).write_bytes(data[: len(data) // 3] if ".data" in path else data)
    (tmp_path / "in.txt").write_text("the dog\n")
    code = run_cli("translate", f"--model_dir={trained_model}", f"--checkpoint={broken}/ckpt-80",
                   f"--input={tmp_path / 'in.txt'}")
    assert code == 2
    assert "cannot restore" in capsys.readouterr().err


def test_average_of_checkpoints_is_the_mean_of_their_weights(trained_model, tmp_path):
    out = str(tmp_path / "avg")
    assert run_cli("average", f"--model_dir={trained_model}", f"--output_dir={out}",
                   "--num_checkpoints=2") == 0
    readers = [tf.train.load_checkpoint(p) for p in checkpoints.list_checkpoints(trained_model)]
    averaged = tf.train.load_checkpoint(checkpoints.resolve(out))
    key = [k for k in averaged.get_variable_to_shape_map() if "encoder_layer_0.Sffn.Souter.Skernel" in k][0]
    expected = (readers[0].get_tensor(key) + readers[1].get_tensor(key)) / 2
    np.testing.assert_allclose(averaged.get_tensor(key), expected, rtol=1e-6)
    assert os.path.isfile(os.path.join(out, "spm.model"))
    assert json.load(open(os.path.join(out, "config.json")))["model"] == "transformer"


def test_inverse_sqrt_schedule():
    schedule = InverseSqrtSchedule(1.0, warmup_steps=100)
    assert schedule(tf.constant(49)).numpy() == pytest.approx(0.5)
    assert schedule(tf.constant(99)).numpy() == pytest.approx(1.0)
    assert schedule(tf.constant(399)).numpy() == pytest.approx(0.5)


def test_linear_decay_schedule_warms_up_then_falls_straight_to_zero_at_the_last_step():
    schedule = LinearDecaySchedule(1.0, warmup_steps=100, total_steps=1100)
    values = [float(schedule(tf.constant(s)).numpy()) for s in (49, 99, 100, 600, 1099, 1100, 2000)]
    assert values == pytest.approx([0.5, 1.0, 1.0, 0.5, 0.001, 0.0, 0.0])


def test_lr_decay_linear_anneals_a_training_run_to_zero_at_its_last_step(corpus, tmp_path):
    model_dir = str(tmp_path / "m")
    assert run_cli("train", *tiny_train_flags(corpus, model_dir, steps=40), "--lr_decay=linear") == 0
    lrs = dict(events(model_dir, "train/learning_rate"))
    # The peak (5e-3) after the 20 warm-up steps, then equal falls to 0 (inverse-sqrt: 3.5e-3).
    assert [lrs[s] for s in (20, 30, 40)] == pytest.approx([5e-3, 2.5e-3, 0.0], abs=1e-6)


def test_nag_shrinks_on_validation_rise_and_stops_below_the_floor():
    optimizer = make_optimizer(TrainOptions(optimizer="nag", learning_rate=0.25, momentum=0.99,
                                            clip_norm=0.1))
    optimizer.build([keras.Variable(np.zeros(2, np.float32))])
    control = ShrinkOnValidationRise(factor=0.1, floor=1e-2, mode="on_rise")
    assert not control.update(optimizer, 3.0)
    assert not control.update(optimizer, 2.5)
    assert optimizer.learning_rate.numpy() == pytest.approx(0.25)
    assert not control.update(optimizer, 2.6)
    assert optimizer.learning_rate.numpy() == pytest.approx(0.025)
    assert control.update(optimizer, 2.7)  # 0.025 -> 0.0025 < 1e-2: stop
    assert clip_threshold(optimizer).numpy() == pytest.approx(0.1) and optimizer.nesterov


def test_a_traced_step_clips_to_the_threshold_that_clip_halving_halves():
    optimizer = make_optimizer(TrainOptions(optimizer="nag", learning_rate=1.0, momentum=0.0,
                                            clip_norm=1.0, clip_halving=True))
    weights = keras.Variable(np.zeros(2, np.float32))
    optimizer.build([weights])
    step = tf.function(lambda: optimizer.apply_gradients([(tf.constant([6.0, 8.0]), weights)]))
    step()  # a gradient of norm 10, clipped to norm 1
    np.testing.assert_allclose(weights.numpy(), [-0.6, -0.8], rtol=1e-6)
    assert not ClipHalving().update(optimizer, 2.0)
    step()  # the same trace, clipped to norm 0.5
    np.testing.assert_allclose(weights.numpy(), [-0.9, -1.2], rtol=1e-6)
    assert step.experimental_get_tracing_count() == 1


def test_a_loss_scaled_optimizer_clips_to_the_threshold_of_the_one_it_wraps():
    inner = make_optimizer(TrainOptions(clip_norm=1.0, clip_halving=True))
    assert clip_threshold(keras.optimizers.LossScaleOptimizer(inner)) is clip_threshold(inner)


@pytest.mark.parametrize("name", ["adam", "adadelta"])
def test_clipping_updates_as_keras_global_clipnorm_does_with_a_repeated_token(name):
    # A sparse embedding gradient whose row 1 appears twice: Keras' clipping makes it dense,
    # and Adam's and Adadelta's squared-gradient sums differ between the two forms.
    grad = tf.IndexedSlices(tf.constant([[3.0, 0.0], [1.0, 2.0], [2.0, 2.0]]),
                            tf.constant([1, 1, 0]), tf.constant([3, 2]))
    options = TrainOptions(optimizer=name, learning_rate=0.1, warmup_steps=0, clip_norm=1.0)
    ours = make_optimizer(options)
    keras_own = type(ours).from_config(dict(ours.get_config(), global_clipnorm=1.0))
    updated = []
    for optimizer in (ours, keras_own):
        weights = keras.Variable(np.ones((3, 2), np.float32))
        optimizer.build([weights])
        for _ in range(2):
            optimizer.apply_gradients([(grad, weights)])
        updated.append(weights.numpy())
    np.testing.assert_allclose(updated[0], updated[1], rtol=1e-6)


def test_adadelta_uses_the_deeplau_setting():
    optimizer = make_optimizer(TrainOptions(optimizer="adadelta", learning_rate=1.0))
    assert optimizer.rho == 0.95 and optimizer.epsilon == 1e-6


def _record_build_policies(monkeypatch, flags):
    """Makes the CPU have `flags` (no GPU, bfloat16 products the faster); returns the list of
    the Keras dtype policies the trainer's models are built under, as they are built."""
    from helpers.cpu import pretend_cpu
    from tfnmt.training import trainer
    pretend_cpu(monkeypatch, flags)
    chosen = []
    build = trainer.catalog.build

    def recording(config):  # the policy the model is built under
        chosen.append(keras.mixed_precision.global_policy().name)
        return build(config)
    monkeypatch.setattr(trainer.catalog, "build", recording)
    return chosen


# --precision=auto on a CPU that multiplies bfloat16 faster is also the mixed-precision run: the explicit
# --precision=mixed_bfloat16 trains the same way (runtime.choose_bfloat16 returns it as asked:
# tests/test_runtime.py). The CPU without it: test_deterministic_runs_are_bit_identical_... below.
@pytest.mark.slow
def test_precision_auto_on_a_bfloat16_cpu_trains_mixed_and_translates_in_float32(
        corpus, tmp_path, monkeypatch):
    chosen = _record_build_policies(monkeypatch, "avx2 avx512f avx512_bf16")
    model_dir = str(tmp_path / "m")
    flags = tiny_train_flags(corpus, model_dir, steps=4)
    # --decode_dtype=auto too: the test sets after training decode as the CPU allows.
    assert run_cli("train", *flags, "--precision=auto", "--decode_dtype=auto") == 0
    assert chosen and set(chosen) == {"mixed_bfloat16"}
    assert checkpoints.resolve(model_dir).endswith("ckpt-4")
    reader = tf.train.load_checkpoint(checkpoints.resolve(model_dir))
    dtypes = reader.get_variable_to_dtype_map()
    kernel = [k for k in dtypes if "encoder_layer_0.Sffn.Souter.Skernel" in k][0]
    assert dtypes[kernel] == tf.float32  # mixed policies keep float32 weights
    (tmp_path / "in.txt").write_text("the dog\n")
    assert run_cli("translate", f"--model_dir={model_dir}", f"--input={tmp_path / 'in.txt'}",
                   f"--output={tmp_path / 'out.txt'}") == 0
    assert keras.mixed_precision.global_policy().name == "float32"
    assert (tmp_path / "out.txt").read_text().count("\n") == 1


@pytest.mark.slow
def test_resume_with_another_optimizer_is_refused(corpus, trained_model, tmp_path, capsys):
    model_dir = _copy_of(trained_model, tmp_path)  # trained with adam
    assert run_cli("train", *tiny_train_flags(corpus, model_dir, steps=90), "--optimizer=adadelta",
                   "--learning_rate=1.0") == 2
    errors = [l for l in capsys.readouterr().err.splitlines() if l.startswith("tfnmt train: error:")]
    assert len(errors) == 1 and "does not match this model and optimizer" in errors[0]


@pytest.mark.slow
def test_deterministic_runs_are_bit_identical_and_precision_auto_without_bfloat16_is_float32(
        corpus, tmp_path, monkeypatch):
    # The first run is also --precision=auto (--decode_dtype=auto too) on a CPU without
    # bfloat16 instructions: it must choose float32, and so train bit for bit what the second run, float32
    # by default, trains.
    chosen = _record_build_policies(monkeypatch, "avx2 fma")

    def weights(name, *extra):
        model_dir = str(tmp_path / name)
        assert run_cli("train", *tiny_train_flags(corpus, model_dir, steps=10), "--deterministic",
                       *extra) == 0
        assert checkpoints.resolve(model_dir).endswith("ckpt-10")
        reader = tf.train.load_checkpoint(checkpoints.resolve(model_dir))
        return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map() if k.startswith("model/")}
    a = weights("a", "--precision=auto", "--decode_dtype=auto")
    assert chosen and set(chosen) == {"float32"}
    b = weights("b")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _checkpoints_with_distinct_weights(model_dir, best_metric, offers):
    """A tiny model whose weights all equal the step at each offer_best(step, results)."""
    from tfnmt.models import catalog
    from tfnmt.training.checkpoints import Checkpoints, trackables
    config = {"model": "transformer", "hparams": dict(encoder_layers=1, decoder_layers=1, d_model=8,
                                                      ffn_dim=8, num_heads=2),
              "source_vocab_size": 20, "target_vocab_size": 20}
    model_dir_lib.write_config(model_dir, config)
    model = catalog.build(config)
    manager = Checkpoints(model_dir, trackables(model), keep_best=2, best_metric=best_metric)
    kept = []
    for step, results in offers:
        for variable in model.weights:
            variable.assign(np.full(variable.shape, step, np.float32))
        kept.append(manager.offer_best(step, results))
    return kept


OFFERS = [(1, {"loss": 3.0, "bleu": 10.0}), (2, {"loss": 2.5, "bleu": 12.0}),
          (3, {"loss": 2.0, "bleu": 11.0}), (4, {"loss": 1.9, "bleu": 9.0})]


@pytest.mark.parametrize("metric, kept, best", [("bleu", [True, True, True, False], [2, 3]),
                                                ("loss", [True, True, True, True], [4, 3])])
def test_best_checkpoints_by_validation_bleu_or_loss_and_their_average(tmp_path, metric, kept, best):
    model_dir = str(tmp_path / "m")
    assert _checkpoints_with_distinct_weights(model_dir, metric, OFFERS) == kept
    entries = checkpoints.read_best_index(model_dir)
    assert [e["step"] for e in entries] == best
    assert entries[0] == dict(OFFERS[best[0] - 1][1], step=best[0], path=f"ckpt-{best[0]}")
    on_disk = {os.path.basename(p).split(".")[0] for p in glob.glob(os.path.join(model_dir, "best", "ckpt-*"))}
    assert on_disk == {f"ckpt-{s}" for s in best}
    out = str(tmp_path / "avg")
    assert run_cli("average", f"--model_dir={model_dir}", f"--output_dir={out}",
                   "--average_from=best", "--num_checkpoints=2") == 0
    reader = tf.train.load_checkpoint(checkpoints.resolve(out))
    key = [k for k in reader.get_variable_to_shape_map() if "encoder_layer_0.Sffn.Souter.Skernel" in k][0]
    np.testing.assert_allclose(reader.get_tensor(key), sum(best) / 2)


def test_a_step_validated_again_replaces_its_old_result(tmp_path):
    model_dir = str(tmp_path / "m")
    _checkpoints_with_distinct_weights(model_dir, "bleu", OFFERS[:2] + [(2, {"loss": 2.5, "bleu": 8.0})])
    assert [(e["step"], e["bleu"]) for e in checkpoints.read_best_index(model_dir)] == [(1, 10.0), (2, 8.0)]


def test_best_by_bleu_needs_validation_bleu(corpus, tmp_path, capsys):
    assert run_cli("train", *tiny_train_flags(corpus, str(tmp_path / "m"), steps=4),
                   "--best_metric=bleu", "--bleu_sentences=0") == 2
    assert "--best_metric=bleu needs validation BLEU" in capsys.readouterr().err


def test_validation_loss_is_traced_once_over_batches_of_every_shape():
    model = catalog.get("transformer")(30, 30, encoder_layers=1, decoder_layers=1, d_model=8,
                                       ffn_dim=8, num_heads=2)
    model.label_smoothing = 0.1
    model.build_with_dummy_batch()

    def batch(rows, source_length, target_length):
        ids = lambda length: tf.fill([rows, length], 5)  # noqa: E731
        return {"source": ids(source_length), "target_in": ids(target_length),
                "position": tf.constant([0, 0], tf.int64)}, ids(target_length)
    batches = [batch(2, 3, 4), batch(3, 7, 5), batch(1, 2, 9)]
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(batches), output_signature=tf.nest.map_structure(
            lambda t: tf.TensorSpec([None] * t.shape.rank, t.dtype), batches[0]))
    validator = Validator(dataset)
    loss = validator(model)["loss"]
    assert validator._loss_fn.experimental_get_tracing_count() == 1
    sums = [model.translation_loss(y, model({k: v for k, v in f.items() if k != "position"}))
            for f, y in batches]  # eagerly
    assert loss == pytest.approx(sum(float(mean * n) for mean, n in sums)
                                 / sum(float(n) for _, n in sums), rel=1e-5)
