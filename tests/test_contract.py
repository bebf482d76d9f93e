"""What every registered model must do, run over the whole registry (sizes in contract.TINY)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import events, run_cli, tiny_train_flags
from contract import TINY, logits_of, tiny_model
from tfnmt.models import catalog
from tfnmt.training import checkpoints
from tfnmt.training.checkpoints import Checkpoints, trackables
from tfnmt.training.optimizers import make_optimizer

SOURCE = tf.constant([[5, 6, 7, 3, 0, 0], [8, 9, 3, 0, 0, 0]])
TARGET_IN = tf.constant([[2, 10, 11, 12, 13, 14], [2, 13, 14, 0, 0, 0]])
TARGET_OUT = tf.constant([[10, 11, 12, 13, 14, 3], [13, 14, 3, 0, 0, 0]])


def test_every_registered_model_has_a_contract_size():
    assert sorted(TINY) == catalog.names()


@pytest.mark.parametrize("name", sorted(TINY))
def test_building_a_model_runs_its_forward_pass_once_eagerly(name, monkeypatch):
    # Keras would first trace call() symbolically to create the variables, doubling the cost of
    # every model build (a paper-size one takes seconds).
    cls, calls = catalog.get(name), []
    call = cls.call
    monkeypatch.setattr(cls, "call", lambda self, *args, **kwargs: (
        calls.append(tf.executing_eagerly()), call(self, *args, **kwargs))[1])
    assert tiny_model(name).count_params() > 0
    assert calls == [True]


@pytest.fixture
def policy(request):
    keras.mixed_precision.set_global_policy(request.param)
    yield request.param
    keras.mixed_precision.set_global_policy("float32")


def _compiled(name):
    model = tiny_model(name)
    # As the trainer does: under mixed_float16 Keras wraps it in a LossScaleOptimizer.
    # Eagerly: tracing a train step per model and policy would cost most of this test's time.
    model.compile(optimizer=make_optimizer("adam", 1e-3, warmup_steps=0, clip_norm=1.0),
                  run_eagerly=True)
    model.optimizer.build(model.trainable_variables)
    return model


def _train(model, steps):
    batches = tf.data.Dataset.from_tensors(({"source": SOURCE, "target_in": TARGET_IN},
                                            TARGET_OUT)).repeat(steps)
    return model.fit(batches, epochs=1, verbose=0).history["loss"]


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"], indirect=True)
@pytest.mark.parametrize("name", sorted(TINY))
def test_mixed_precision_trains_saves_and_resumes_with_finite_loss_and_logits(name, policy, tmp_path):
    model = _compiled(name)
    assert model.compute_dtype == policy.split("_")[1]
    loss = _train(model, 3)
    scaled = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert scaled == (policy == "mixed_float16")
    if scaled:
        # A loss scale that training could not have reached, so resuming must have read it.
        model.optimizer.dynamic_scale.assign(1024.0)
    saved = Checkpoints(str(tmp_path), trackables(model, model.optimizer))
    saved.save(3)

    resumed = _compiled(name)
    assert Checkpoints(str(tmp_path), trackables(resumed, resumed.optimizer)).restore_latest()
    # (A float16 step whose gradients overflow is skipped: iterations may be below 3.)
    assert int(resumed.optimizer.iterations.numpy()) == int(model.optimizer.iterations.numpy()) > 0
    if scaled:
        assert float(resumed.optimizer.dynamic_scale.numpy()) == 1024.0
    for a, b in zip(model.weights, resumed.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    loss += _train(resumed, 1)
    assert np.all(np.isfinite(loss)), loss
    logits = logits_of(resumed({"source": SOURCE, "target_in": TARGET_IN}))
    assert logits.dtype == policy.split("_")[1]
    assert np.all(np.isfinite(tf.cast(logits, tf.float32).numpy()))


def test_model_trained_under_mixed_float16_resumes_and_translates_the_same_exported(corpus, tmp_path):
    model_dir_path = str(tmp_path / "model")
    flags = [f for f in tiny_train_flags(corpus, model_dir_path, steps=60)
             if not f.startswith(("--train_steps", "--save_every"))]
    for steps in (30, 60):  # the second run resumes from the first one's checkpoint
        assert run_cli("train", *flags, f"--train_steps={steps}", "--save_every=30",
                       "--precision=mixed_float16") == 0
    losses = [loss for _, loss in events(model_dir_path, "train/loss")]
    assert len(losses) == 6 and np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert checkpoints.resolve(model_dir_path).endswith("ckpt-60")

    sentences = tmp_path / "in.txt"
    sentences.write_text("the red dog sees a bird\na cat\nthe old man runs\n")
    export_dir = str(tmp_path / "export")
    assert run_cli("export", f"--model_dir={model_dir_path}", f"--export_dir={export_dir}",
                   "--beam_size=3") == 0
    outputs = []
    # The export decodes with the beam it was exported with.
    for source in (f"--model_dir={model_dir_path}", "--beam_size=3"), \
            (f"--saved_model={export_dir}/transformer/1",):
        out = tmp_path / f"out{len(outputs)}.txt"
        assert run_cli("translate", *source, f"--input={sentences}", f"--output={out}") == 0
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == 3
