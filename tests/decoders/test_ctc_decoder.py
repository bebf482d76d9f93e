"""The CTC model's non-autoregressive decoder (decoders/ctc.py): it attends to every position,
and its positional variant tells identical split states apart."""

import numpy as np
import tensorflow as tf

from helpers.ctc import make
from tfnmt.layers.attention import causal_mask, key_mask
from tfnmt.layers.transformer_layers import TransformerDecoderLayer


def test_non_causal_decoder_sees_future_positions_and_the_autoregressive_one_does_not():
    x = tf.random.stateless_normal([1, 6, 16], seed=[3, 4])
    changed = tf.concat([x[:, :5], x[:, 5:] + 1.0], axis=1)
    memory = tf.random.stateless_normal([1, 4, 16], seed=[5, 6])
    memory_allowed = key_mask(tf.ones([1, 4], tf.bool))
    layer = TransformerDecoderLayer(num_heads=2, ffn_dim=32, dropout=0.0)
    causal = [layer(v, memory, causal_mask(6), memory_allowed).numpy() for v in (x, changed)]
    np.testing.assert_allclose(causal[0][:, :5], causal[1][:, :5], atol=1e-6)
    # The CTC decoder: the same layers with only the padding mask on self-attention.
    model = make("encoder_decoder")
    memory = model.encode(tf.constant([[5, 6, 3]]))
    mask = tf.ones([1, 6], tf.bool)
    a, b = (model.label(v, mask, memory).numpy() for v in (x, changed))
    assert np.abs(a[0, 0] - b[0, 0]).max() > 1e-4  # position 0 sees position 5
    # Without a decoder the labeller is position-wise.
    model = make("deep_encoder")
    memory = model.encode(tf.constant([[5, 6, 3]]))
    a, b = (model.label(v, mask, memory).numpy() for v in (x, changed))
    np.testing.assert_allclose(a[:, :5], b[:, :5], atol=1e-6)


def test_positional_variant_tells_identical_split_states_apart():
    states = tf.tile(tf.random.stateless_normal([1, 1, 16], seed=[7, 8]), [1, 6, 1])
    mask = tf.ones([1, 6], tf.bool)
    for variant, distinct in (("encoder_decoder", False), ("encoder_decoder_pos", True)):
        model = make(variant)
        logits = model.label(states, mask, model.encode(tf.constant([[5, 6, 3]]))).numpy()[0]
        assert (np.abs(logits - logits[0]).max() > 1e-4) == distinct, variant
