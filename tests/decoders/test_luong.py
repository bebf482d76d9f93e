"""The Luong-attention LSTM decoder (decoders/luong.py): a part added as one file and its registry
line, which every sequence encoder then feeds through `--model=hybrid` with no other edit."""

import numpy as np
import pytest
import tensorflow as tf

from contract import overfit_export_and_compare, tiny_model
from tfnmt.layers.part import DECODERS, ENCODERS

SOURCE = tf.constant([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]])


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_lstm(cell, x, h, c):
    """Hochreiter & Schmidhuber's LSTM with a forget gate, on a Keras LSTMCell's weights
    (gate columns i, f, candidate, o)."""
    z = x @ cell.kernel.numpy() + h @ cell.recurrent_kernel.numpy() + cell.bias.numpy()
    i, f, g, o = np.split(z, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def numpy_luong_step(decoder, y, state, outputs, mask):
    """One step of Luong et al. 2015 (general score, input feeding) written out in numpy:
    (logits, h~, {"layer_i": (h, c)}, attention weights)."""
    x = np.concatenate([y, state["attentional"]], axis=-1)
    layers = {}
    for i, cell in enumerate(decoder.cells):
        h, c = numpy_lstm(cell, x, *state[f"layer_{i}"])
        layers[f"layer_{i}"] = (h, c)
        x = h
    W_a = decoder.attention_keys.kernel.numpy()                   # h_t^T W_a h_s = (W_a^T h_s) . h_t
    scores = np.einsum("nsd,nd->ns", outputs @ W_a, x)
    scores = np.where(mask, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    context = np.einsum("ns,nsd->nd", weights, outputs)
    attentional = np.tanh(np.concatenate([context, x], -1) @ decoder.attentional.kernel.numpy())
    projection = decoder.output_projection
    logits = attentional @ projection.kernel.numpy() + projection.bias.numpy()
    return logits, attentional, layers, weights


def test_two_steps_are_luong_et_al_general_attention_with_input_feeding():
    model = tiny_model("hybrid:transformer+luong")
    decoder = model.decoder
    rng = np.random.default_rng(0)
    for weight in model.weights:  # away from the initial zeros, so every term counts
        weight.assign(rng.normal(0, 0.5, weight.shape).astype(np.float32))
    memory = model.decoding_memory(model.encode(SOURCE))
    outputs, mask = memory["outputs"].numpy(), memory["mask"].numpy()
    state = model.initial_state(memory)
    expected_state = {"attentional": np.zeros([2, decoder.units], np.float32),
                      **{f"layer_{i}": (np.zeros([2, decoder.units]),) * 2 for i in range(2)}}
    for time, ids in enumerate([[2, 2], [10, 13]]):
        logits, state = model.step(tf.constant(ids), time, state, memory)
        y = decoder.embedding(tf.constant(ids)).numpy()
        expected, attentional, layers, weights = numpy_luong_step(decoder, y, expected_state,
                                                                  outputs, mask)
        np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(model.latest_attention()[:, 0].numpy(), weights, atol=1e-5)
        for i in range(2):
            np.testing.assert_allclose(state[f"layer_{i}"]["h"].numpy(), layers[f"layer_{i}"][0],
                                       atol=1e-5)
            np.testing.assert_allclose(state[f"layer_{i}"]["c"].numpy(), layers[f"layer_{i}"][1],
                                       atol=1e-5)
        # Input feeding: the next step reads this step's attentional vector.
        np.testing.assert_allclose(state["attentional"].numpy(), attentional, atol=1e-5)
        expected_state = dict(layers, attentional=attentional)
    assert np.all(weights[1, 3:] == 0) and np.all(weights[1, :3] > 0)  # padding gets no attention


def test_it_is_registered_and_every_sequence_encoder_feeds_it():
    assert DECODERS["luong"].READS == "sequence"
    for encoder in (name for name, part in ENCODERS.items() if part.GIVES_SEQUENCE):
        model = tiny_model(f"hybrid:{encoder}+luong")
        # The keys map each encoder's width to the LSTM's.
        assert model.decoder.attention_keys.kernel.shape == (model.encoder.output_width,
                                                            model.decoder.units)


@pytest.mark.slow
def test_behind_the_transformer_encoder_it_overfits_multi30k_and_its_export_translates_alike(
        multi30k_dir, tmp_path):
    # (Every pair's untrained export is checked against in-process decoding in test_pairs.py,
    # loaded in a fresh process: a Luong pair among them. Serving an export through `tfnmt serve`
    # does not depend on the decoder behind its signature: tests/serving/test_serving.py.)
    # 20 pairs (the 12 translated among them): at 8e-3, from 4.81 nats/token over steps 1-30 to
    # 0.41 over steps 91-120 (at 5e-3, 200 steps to reach about 0.7; at 1e-2, 0.63 over steps
    # 76-100); 40 pairs at 3e-3 took 320 steps to reach about 1.1.
    overfit_export_and_compare(str(tmp_path), multi30k_dir, "--model=hybrid",
                               "--encoder_type=transformer", "--decoder_type=luong",
                               "--encoder_layers=2", "--d_model=64", "--ffn_dim=128",
                               "--num_heads=4", "--dropout=0", "--decoder_layers=2",
                               "--lstm_units=96", "--lstm_embed_dim=64", "--lstm_dropout=0",
                               steps=120, learning_rate=8e-3, pairs=20, below=1.5)
