"""The deep recurrent decoder of DeepLAU and DeepGRU (decoders/recurrent.py, paper 001): its
steps are teacher forcing, and its attention reads the first layer's previous state and the
previous word (eq. 10-11)."""

import numpy as np
import pytest
import tensorflow as tf

from contract import assert_incremental_equals_teacher_forcing
from helpers.families import RECURRENT_GRID as GRID, SOURCE, TARGET_IN, recurrent
from helpers.recurrent import random_weights


@pytest.mark.parametrize("name,connection", GRID)
def test_incremental_decoding_equals_teacher_forcing(name, connection):
    model = recurrent(name, stack_connection=connection)
    state = assert_incremental_equals_teacher_forcing(model, SOURCE, TARGET_IN, atol=1e-5)
    assert sorted(state) == ["layer_0", "layer_1"] and state["layer_0"].shape == (2, 12)
    if connection == "none":
        # The state after decoding is the top layer's last output: softmax(W_o s^top_T).
        logits = model({"source": SOURCE, "target_in": TARGET_IN})
        np.testing.assert_allclose(model.decoder.output_projection(state["layer_1"]).numpy(),
                                   logits[:, -1].numpy(), atol=1e-5)
    paths = [v.path for v in model.weights]
    assert len(set(paths)) == len(paths) and all(p.startswith(f"{name}/") for p in paths)


def additive_context(model, s1, y, memory):
    """Eq. 10-11 in numpy: c = sum_j softmax_j(v^T tanh(W_a s1 + W_y y + U_a h_j + b)) h_j."""
    h = memory["outputs"].numpy()
    keys = h @ model.decoder.attention_keys.kernel.numpy() + model.decoder.attention_keys.bias.numpy()
    query = (s1 @ model.decoder.attention_query.kernel.numpy()
             + y @ model.decoder.attention_embedding.kernel.numpy())
    scores = (np.tanh(keys + query[:, None]) @ model.decoder.attention_v.kernel.numpy())[..., 0]
    scores = np.where(memory["mask"].numpy(), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    return np.einsum("ns,nsd->nd", weights, h)


@pytest.mark.parametrize("connection", ["none", "fast_forward"])
def test_attention_query_uses_the_first_layer_state_and_the_previous_word(connection):
    # What the decoder step itself computes: the first layer's new state must be
    # cell_0([c_t; y_{t-1}], s^1_{t-1}) with c_t from eq. 10-11 on the state the step RECEIVED
    # (s^1_{t-1}: layer 0, before this step), not another layer's, not the new one.
    model = recurrent("deeplau", stack_connection=connection)
    random_weights(model)  # large enough weights that the attention is far from uniform
    memory = model.encode(SOURCE)
    rng = np.random.default_rng(5)
    state = {key: tf.constant(rng.normal(0, 1, value.shape).astype(np.float32))
             for key, value in model.initial_state(memory).items()}  # every layer different
    ids = tf.constant([10, 20])
    y = model.decoder.embedding(ids).numpy()
    _, new_state = model.step(ids, 3, state, memory)

    def first_layer_after(s_query, word):
        x = np.concatenate([additive_context(model, s_query, word, memory), y], axis=1)
        h, _ = model.decoder.cells[0](tf.constant(x, tf.float32), [state["layer_0"]])
        return h.numpy()

    np.testing.assert_allclose(new_state["layer_0"].numpy(),
                               first_layer_after(state["layer_0"].numpy(), y), atol=1e-5)
    # The check can tell the queries apart: another layer's state, the new state or another
    # word give another first-layer state.
    y_other = model.decoder.embedding(tf.constant([30, 31])).numpy()
    for s_query, word in ((state["layer_1"].numpy(), y), (new_state["layer_0"].numpy(), y),
                          (state["layer_0"].numpy(), y_other)):
        assert np.abs(first_layer_after(s_query, word) - new_state["layer_0"].numpy()).max() > 1e-2
