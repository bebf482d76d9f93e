"""ConvS2S (Gehring et al. 2017): incremental decoding, causality, masking, and a Multi30k
overfit. The weight-normalised layers alone: tests/layers/test_weight_norm.py."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import multi30k_lines
from contract import assert_incremental_equals_teacher_forcing, overfit_export_and_compare
from tfnmt.models import catalog

SMALL = dict(encoder_layers=2, decoder_layers=3, embed_dim=16, residual_dim=24)
SOURCE = tf.constant([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]])
TARGET_IN = tf.constant([[2, 10, 11, 12, 13], [2, 13, 14, 0, 0]])


def make(**overrides):
    model = catalog.get("convs2s")(50, 60, **dict(SMALL, **overrides))
    model.build_with_dummy_batch()
    return model


@pytest.mark.parametrize("kernel_size", [2, 3, 5])
def test_incremental_steps_equal_teacher_forcing(kernel_size):
    model = make(kernel_size=kernel_size)
    state = assert_incremental_equals_teacher_forcing(model, SOURCE, TARGET_IN, atol=1e-5)
    # Only the last k-1 inputs of each causal convolution are kept: the state after decoding
    # forgets a word further back and remembers one within the window.
    assert state["layer_0"].shape == (2, kernel_size - 1, 24)
    steps = TARGET_IN.shape[1]
    for position, remembered in ((steps - kernel_size, False), (steps - kernel_size + 1, True)):
        changed = tf.tensor_scatter_nd_update(TARGET_IN, [[0, position]], [40])
        other = assert_incremental_equals_teacher_forcing(model, SOURCE, changed, atol=1e-5)
        differs = np.abs(other["layer_0"][0].numpy() - state["layer_0"][0].numpy()).max() > 1e-6
        assert differs == remembered, (position, remembered)


def test_decoder_is_causal_and_source_padding_is_masked():
    model = make(kernel_size=3)
    a = model({"source": SOURCE, "target_in": TARGET_IN}).numpy()
    changed = tf.tensor_scatter_nd_update(TARGET_IN, [[0, 3]], [40])
    b = model({"source": SOURCE, "target_in": changed}).numpy()
    np.testing.assert_allclose(a[0, :3], b[0, :3], atol=1e-6)
    assert not np.allclose(a[0, 3], b[0, 3])
    longer = tf.pad(SOURCE, [[0, 0], [0, 4]])
    c = model({"source": longer, "target_in": TARGET_IN}).numpy()
    np.testing.assert_allclose(a, c, atol=1e-5)


# --- fairseq's scalings (Gehring et al. 2017, sec. 3.4; fairseq's fconv) -------------------------
OFF = dict(scale_context=False, scale_encoder_gradients=False, scale_values=False)


def test_the_three_scalings_are_on_by_default():
    """A model built without the three flags computes as one with all three on (the same
    weights give the same logits and gradients), and not as one with any of them off (the
    encoder's gradient scaling shows in the gradients only)."""
    def computed(**flags):
        keras.utils.set_random_seed(0)
        model = make(**flags)
        with tf.GradientTape() as tape:
            logits = model({"source": SOURCE, "target_in": TARGET_IN})
            loss = tf.reduce_sum(tf.square(logits))
        grads = tape.gradient(loss, model.trainable_weights)
        return logits.numpy(), [tf.convert_to_tensor(g).numpy() for g in grads]

    def same(a, b):
        return np.allclose(a[0], b[0], atol=1e-5) and all(
            np.allclose(x, y, atol=1e-5) for x, y in zip(a[1], b[1]))
    default = computed()
    assert same(default, computed(**{name: True for name in OFF}))
    for name in OFF:
        assert not same(default, computed(**{name: False})), name


def test_the_attention_output_is_scaled_by_the_square_root_of_the_real_source_length():
    from tfnmt.layers.conv_blocks import MultiStepAttention
    rng = np.random.default_rng(0)
    x, g = (rng.normal(size=(2, 3, d)).astype(np.float32) for d in (6, 4))
    keys, values = (rng.normal(size=(2, 5, 4)).astype(np.float32) for _ in range(2))
    mask = np.array([[True] * 5, [True] * 2 + [False] * 3])
    memory = {"keys": tf.constant(keys), "values": tf.constant(values), "mask": tf.constant(mask)}
    for scale in (True, False):
        layer = MultiStepAttention(4, scale_context=scale)
        out = layer(x, g, memory).numpy()
        q = (layer.query(x).numpy() + g) * np.sqrt(0.5)
        scores = np.where(mask[:, None], q @ keys.transpose(0, 2, 1), -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        context = (weights / weights.sum(-1, keepdims=True)) @ values
        # fairseq: times s * sqrt(1/s) = sqrt(s), s the sentence's source length without padding
        expected = context * (np.sqrt([5.0, 2.0])[:, None, None] if scale else 1.0)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("scale", [True, False])
def test_the_attention_values_are_z_plus_e_scaled_by_the_square_root_of_a_half(scale):
    model = make(scale_values=scale)
    encoded = model.encoder.encode(SOURCE)
    memory = model.encode(SOURCE)
    keep = (SOURCE.numpy() != 0)[:, :, None]
    z = model.decoder.keys(encoded.outputs).numpy() * keep
    np.testing.assert_allclose(memory["keys"].numpy(), z, atol=1e-6)
    expected = (z + encoded.extras["embedded"].numpy() * keep) * (np.sqrt(0.5) if scale else 1.0)
    np.testing.assert_allclose(memory["values"].numpy(), expected, rtol=1e-5, atol=1e-6)


def test_gradients_into_the_encoder_output_are_scaled_by_one_over_twice_the_attentions():
    # Forward unchanged; every encoder convolution's gradient reaches it through z only, so it
    # is 1 / (2 x 3 attention layers) of the unscaled one.
    models = [make(scale_encoder_gradients=scale) for scale in (True, False)]
    models[0].set_weights(models[1].get_weights())
    weights = tf.constant(np.random.default_rng(1).normal(size=(2, 5, 60)), tf.float32)
    logits, grads = [], []
    for model in models:
        with tf.GradientTape() as tape:
            out = model({"source": SOURCE, "target_in": TARGET_IN})
            objective = tf.reduce_sum(out * weights)
        variables = [v for v in model.trainable_variables if "encoder_conv" in v.path]
        logits.append(out.numpy())
        grads.append([g.numpy() for g in tape.gradient(objective, variables)])
    np.testing.assert_array_equal(logits[0], logits[1])
    assert grads[0]
    for scaled, plain in zip(*grads):
        np.testing.assert_allclose(scaled, plain / 6.0, rtol=1e-4, atol=1e-7)


@pytest.mark.slow
def test_convs2s_overfits_multi30k_pairs_and_the_export_translates_them(multi30k_dir, tmp_path):
    run = overfit_export_and_compare(
        str(tmp_path), multi30k_dir, "--model=convs2s", "--encoder_layers=2", "--decoder_layers=2",
        "--embed_dim=64", "--residual_dim=64", steps=100, learning_rate=5e-3, below=1.2, lines=20,
        export_flags=("--beam_size=1",), compare=((("--beam_size=1",), ()),))  # 5.3 -> 0.09 seen
    from tfnmt.evaluation import bleu
    score = bleu.score(run.outputs[0], multi30k_lines(multi30k_dir, "de", 20))["bleu"]
    # CPU training is not bit-reproducible run to run (threaded reductions).
    assert score > 20, score
    # The signature itself, as TF Serving calls it, on a batch with an empty sentence.
    signature = tf.saved_model.load(run.saved_model).signatures["serving_default"]
    out = signature(text=tf.constant(["the red dog", ""]))["translations"].numpy()
    assert out[0] and out[1] == b""
