"""Checks every model family's tests run against the model contract (models/base.py)."""

import numpy as np
import tensorflow as tf


def assert_incremental_equals_teacher_forcing(model, source, target_in, atol=1e-4):
    """Decoding one position at a time through initial_state/step gives decode()'s logits.
    Returns the state after the last step, for family-specific checks."""
    logits = model({"source": source, "target_in": target_in})
    assert logits.shape == (*target_in.shape, model.target_vocab_size)
    memory = model.encode(source)
    state = model.initial_state(memory)
    steps = []
    for t in range(target_in.shape[1]):
        step_logits, state = model.step(target_in[:, t], t, state, memory)
        steps.append(step_logits)
    np.testing.assert_allclose(tf.stack(steps, 1).numpy(), logits.numpy(), atol=atol)
    return model.initial_state(memory)
