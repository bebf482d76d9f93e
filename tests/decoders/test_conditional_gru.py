"""Cho et al.'s conditional GRU decoder (decoders/conditional_gru.py) behind either sentence
encoder: incremental steps equal teacher forcing, and one step against the equations of each
--decoder_gru_form in numpy."""

import numpy as np
import pytest
import tensorflow as tf

from contract import assert_incremental_equals_teacher_forcing
from helpers.sentence_models import (ENCODERS, SOURCE, TARGET_IN, gru_model, make,
                                     random_weights, sigmoid)


@pytest.mark.parametrize("kind", ENCODERS)
def test_incremental_decoding_equals_teacher_forcing(kind):
    model = make(kind)
    state = assert_incremental_equals_teacher_forcing(model, SOURCE, TARGET_IN, atol=1e-5)
    # The state after decoding is the teacher-forced GRU's last state (keras.layers.RNN over the
    # whole target, not the stepped cell).
    encoding = model.encode(SOURCE)["encoding"]
    y = model.decoder.embedding(TARGET_IN)
    c = tf.broadcast_to(encoding[:, None], [2, TARGET_IN.shape[1], encoding.shape[-1]])
    states = model.decoder.gru.rnn(tf.concat([y, c], axis=-1),
                                   initial_state=[model.decoder.gru.initial_state(encoding)])
    np.testing.assert_allclose(state["state"].numpy(), states[:, -1].numpy(), atol=1e-5)
    paths = [v.path for v in model.weights]
    assert len(set(paths)) == len(paths) and all(p.startswith(f"{model.name}/") for p in paths)


CANDIDATES = {
    # Cho et al. 2014, appendix A.1.2 as printed: the reset gate over U s and C c.
    "appendix": lambda y, s, c, r, W, U, C, b: np.tanh(y @ W + r * (s @ U + c @ C) + b),
    # GroundHog, which paper 004 ran: c beside the input, the reset gate on s before U.
    "groundhog": lambda y, s, c, r, W, U, C, b: np.tanh(y @ W + c @ C + (r * s) @ U + b),
}


@pytest.mark.parametrize("form", sorted(CANDIDATES))
def test_decoder_is_cho_et_al_with_c_in_the_gates_and_the_candidate_of_its_form(form):
    model = gru_model(decoder_gru_form=form)
    random_weights(model, seed=2)
    memory = model.encode(SOURCE)
    c = memory["encoding"].numpy()
    d = model.decoder.gru
    s0 = np.tanh(c @ d.init.kernel.numpy() + d.init.bias.numpy())
    np.testing.assert_allclose(model.initial_state(memory)["state"].numpy(), s0, atol=1e-5)
    ids = tf.constant([10, 20])
    y = model.decoder.embedding(ids).numpy()
    (Wz, Wr, W), (Cz, Cr, C), (Uz, Ur, U) = (
        np.split(w.numpy(), 3, axis=1) for w in (d.cell.kernel, d.cell.context_kernel, d.cell.recurrent_kernel))
    bz, br, bh = np.split(d.cell.bias.numpy(), 3)
    z = sigmoid(y @ Wz + s0 @ Uz + c @ Cz + bz)
    r = sigmoid(y @ Wr + s0 @ Ur + c @ Cr + br)
    candidate = CANDIDATES[form](y, s0, c, r, W, U, C, bh)
    s1 = z * s0 + (1 - z) * candidate
    pieces = np.concatenate([s1, y, c], axis=1) @ d.readout.kernel.numpy() + d.readout.bias.numpy()
    o = pieces.reshape(2, 6, 2).max(axis=-1)  # maxout over pairs
    output = model.decoder
    logits = o @ output.output_bottleneck.kernel.numpy() @ output.output_projection.kernel.numpy() \
        + output.output_projection.bias.numpy()
    step_logits, state = model.step(ids, 0, model.initial_state(memory), memory)
    np.testing.assert_allclose(state["state"].numpy(), s1, atol=1e-5)
    np.testing.assert_allclose(step_logits.numpy(), logits, atol=1e-4)


def test_the_two_decoder_forms_differ_on_the_same_weights_and_groundhog_is_the_default():
    appendix, groundhog = gru_model(decoder_gru_form="appendix"), gru_model()
    assert groundhog.hparams["decoder_gru_form"] == "groundhog"
    random_weights(appendix, seed=4)
    groundhog.set_weights(appendix.get_weights())
    inputs = {"source": SOURCE, "target_in": TARGET_IN}
    difference = np.abs(appendix(inputs).numpy() - groundhog(inputs).numpy()).max()
    assert difference > 1e-2, difference
