import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import multi30k_lines, overfit_multi30k, run_cli
from contract import assert_incremental_equals_teacher_forcing
from tfnmt.errors import ConfigError
from tfnmt.layers.lau import LAUCell
from tfnmt.models import registry

SOURCE = tf.constant([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]])
TARGET_IN = tf.constant([[2, 10, 11, 12, 13, 14], [2, 13, 14, 0, 0, 0]])
TINY = dict(encoder_layers=3, decoder_layers=2, embed_dim=8, hidden_dim=12, attention_dim=6,
            dropout=0.0, output_dropout=0.0)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def random_weights(cell, seed=0):
    rng = np.random.default_rng(seed)
    for w in cell.weights:
        w.assign(rng.normal(0, 0.5, w.shape).astype(np.float32))


def test_lau_cell_is_equation_6_to_8():
    cell = LAUCell(4)
    cell.build((None, 3))
    random_weights(cell)
    x = np.random.default_rng(1).normal(size=(2, 3)).astype(np.float32)
    h = np.random.default_rng(2).normal(size=(2, 4)).astype(np.float32)
    Wx, Wh, b = (w.numpy() for w in (cell.input_kernel, cell.recurrent_kernel, cell.bias))
    Wxr, Wxz, Wxg, Wxh, Wlin = np.split(Wx, 5, axis=1)
    Whr, Whz, Whg, Whh = np.split(Wh, 4, axis=1)
    br, bz, bg, bh = np.split(b, 4)
    r = sigmoid(x @ Wxr + h @ Whr + br)
    z = sigmoid(x @ Wxz + h @ Whz + bz)
    g = sigmoid(x @ Wxg + h @ Whg + bg)
    candidate = np.tanh((1 - r) * (x @ Wxh) + r * (h @ Whh) + bh)
    expected = ((1 - z) * h + z * candidate) * (1 - g) + g * (x @ Wlin)
    out, (state,) = cell(tf.constant(x), [tf.constant(h)])
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_with_the_linear_gate_open_the_state_is_the_linear_input_path():
    cell = LAUCell(4)
    cell.build((None, 3))
    random_weights(cell)
    bias = cell.bias.numpy()
    bias[8:12] = 60.0  # g = sigmoid(... + 60) = 1 in float32
    cell.bias.assign(bias)
    x = np.random.default_rng(3).normal(size=(2, 3)).astype(np.float32)
    h = np.random.default_rng(4).normal(size=(2, 4)).astype(np.float32)
    out, _ = cell(tf.constant(x), [tf.constant(h)])
    np.testing.assert_allclose(out.numpy(), x @ cell.input_kernel.numpy()[:, 16:], rtol=1e-6)


def test_lau_cell_runs_in_keras_rnn_and_round_trips_its_config():
    cell = LAUCell(5, name="lau")
    rnn = keras.layers.RNN(cell, return_sequences=True)
    x = tf.random.stateless_normal([2, 7, 3], seed=[0, 1])
    out = rnn(x)
    assert out.shape == (2, 7, 5)
    # The RNN's last output equals stepping the cell by hand.
    h = tf.zeros([2, 5])
    for t in range(7):
        h, _ = cell(x[:, t], [h])
    np.testing.assert_allclose(out[:, -1].numpy(), h.numpy(), atol=1e-6)
    clone = LAUCell.from_config(cell.get_config())
    assert clone.units == 5 and clone.name == "lau"


GRID = list(itertools.product(["deeplau", "deepgru"], ["none", "residual", "fast_forward"]))


@pytest.mark.parametrize("name,connection", GRID)
def test_incremental_decoding_equals_teacher_forcing(name, connection):
    model = registry.get(name)(50, 60, stack_connection=connection, **TINY)
    model.build_with_dummy_batch()
    state = assert_incremental_equals_teacher_forcing(model, SOURCE, TARGET_IN, atol=1e-5)
    assert sorted(state) == ["layer_0", "layer_1"] and state["layer_0"].shape == (2, 12)
    paths = [v.path for v in model.weights]
    assert len(set(paths)) == len(paths) and all(p.startswith(f"{name}/") for p in paths)


@pytest.mark.parametrize("name,connection", GRID)
def test_alternating_encoder_gives_a_padded_sentence_its_unpadded_output(name, connection):
    model = registry.get(name)(50, 60, stack_connection=connection, **TINY)
    model.build_with_dummy_batch()
    batch = model.encode(tf.constant([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]]))
    alone = model.encode(tf.constant([[9, 10, 3]]))
    np.testing.assert_allclose(batch["outputs"][1, :3].numpy(), alone["outputs"][0].numpy(), atol=1e-5)
    np.testing.assert_allclose(batch["outputs"][1, 3:].numpy(), 0.0)
    np.testing.assert_allclose(batch["mean"][1].numpy(), alone["mean"][0].numpy(), atol=1e-5)


def test_layers_alternate_direction():
    # With one layer the first output sees only the first token; with two, the second
    # (right-to-left) layer lets it see the last one too.
    for layers, sees_future in ((1, False), (2, True)):
        model = registry.get("deeplau")(50, 60, **dict(TINY, encoder_layers=layers))
        model.build_with_dummy_batch()
        a = model.encode(tf.constant([[5, 6, 7, 3]]))["outputs"][0, 0].numpy()
        b = model.encode(tf.constant([[5, 6, 9, 3]]))["outputs"][0, 0].numpy()
        assert (not np.allclose(a, b)) == sees_future


def test_attention_query_uses_the_first_layer_state_and_the_previous_word():
    model = registry.get("deeplau")(50, 60, **TINY)
    model.build_with_dummy_batch()
    random_weights(model)  # large enough weights that the attention is far from uniform
    memory = model.encode(SOURCE)
    state = model.initial_state(memory)
    y = model.target_embedding(tf.constant([10, 10]))
    base = model._attend(state["layer_0"], y, memory).numpy()
    other_word = model._attend(state["layer_0"], model.target_embedding(tf.constant([20, 20])),
                               memory).numpy()
    assert np.abs(base - other_word).max() > 1e-2
    assert np.abs(base - model._attend(state["layer_1"], y, memory).numpy()).max() > 1e-2


def test_bad_choices_are_config_errors():
    with pytest.raises(ConfigError, match="--cell"):
        registry.get("deeplau")(50, 60, cell="lstm")
    with pytest.raises(ConfigError, match="--stack_connection"):
        registry.get("deeplau")(50, 60, stack_connection="highway")
    with pytest.raises(ConfigError, match="no hyper-parameter cell"):
        registry.get("deepgru")(50, 60, cell="lau")


# The LAU's linear path makes it learn much faster than the GRU (as the paper argues): on the
# first 100 pairs LAU is at 0.29 nats/token by step 500, GRU at 1.25 by step 800 and 0.88 by 900.
@pytest.mark.parametrize("name,steps", [("deeplau", 500), ("deepgru", 900)])
def test_tiny_model_overfits_multi30k_and_its_export_matches_in_process(name, steps, multi30k_dir,
                                                                      tmp_path, capsys):
    model_dir = str(tmp_path / "m")
    losses = overfit_multi30k(model_dir, multi30k_dir, f"--model={name}", "--encoder_layers=2",
                              "--decoder_layers=2", "--embed_dim=64", "--hidden_dim=96",
                              "--attention_dim=64", "--output_dropout=0", steps=steps, pairs=100)
    assert losses[-1] < 1.5, losses  # nats per target token over the last 100 steps; from 4.8
    export_dir = tmp_path / "e"
    assert run_cli("export", f"--model_dir={model_dir}", f"--export_dir={export_dir}",
                   "--beam_size=3") == 0
    sources = tmp_path / "in.txt"
    sources.write_text("\n".join(multi30k_lines(multi30k_dir, "en", 12)) + "\n", encoding="utf-8")
    capsys.readouterr()
    outputs = []
    # The export decodes with the beam it was exported with.
    for flags in ((f"--model_dir={model_dir}", "--beam_size=3"),
                  (f"--saved_model={export_dir / name / '1'}",)):
        assert run_cli("translate", *flags, f"--input={sources}") == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == 12
