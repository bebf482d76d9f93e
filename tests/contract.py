"""Checks every model family's tests run against the model contract (models/base.py)."""

import numpy as np
import tensorflow as tf

from tfnmt.models import registry

# Every registered model at a size that builds and trains in a second or two. A model missing
# here fails test_contract.py, so a new model is covered once it is registered and sized.
_RECURRENT = dict(embed_dim=8, hidden_dim=12, dropout=0.0)
_ATTENTIONAL = dict(encoder_layers=2, decoder_layers=2, d_model=16, ffn_dim=32, num_heads=2,
                    dropout=0.0)
TINY = {
    "transformer": _ATTENTIONAL,
    "deep_transformer": dict(_ATTENTIONAL, encoder_aggregation="dense",
                             decoder_aggregation="iterative", multi_layer_attention=2,
                             diversity_weight=0.1),
    "ctc_nat": _ATTENTIONAL,
    "densenmt": dict(encoder_layers=2, decoder_layers=2, embed_dim=16, hidden_dim=12,
                     growth_rate=8, attention_dim=10, attention="dense2", dropout=0.0),
    "convs2s": dict(encoder_layers=2, decoder_layers=2, embed_dim=16, hidden_dim=12, dropout=0.0),
    "deeplau": dict(_RECURRENT, encoder_layers=2, decoder_layers=2, attention_dim=6,
                    output_dropout=0.0),
    "deepgru": dict(_RECURRENT, encoder_layers=2, decoder_layers=2, attention_dim=6,
                    output_dropout=0.0),
    "conv_encoder": dict(_RECURRENT, conv_encoder="ngram", conv_filters=5, conv_input_dim=16,
                         encoding_dim=10, maxout_dim=6),
    "gru_encdec": dict(_RECURRENT, maxout_dim=6),
}


def tiny_model(name, source_vocab_size=50, target_vocab_size=60, **overrides):
    """A built registered model at its TINY size."""
    model = registry.get(name)(source_vocab_size, target_vocab_size, **dict(TINY[name], **overrides))
    model.build_with_dummy_batch()
    return model


def logits_of(output):
    """decode()'s logits: CTC models return them beside their lengths."""
    return output["logits"] if isinstance(output, dict) else output


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
    return state
