"""The convolutional sentence encoders of paper 004 (encoders/conv_sentence.py): the report's
sizes, padding and the window, gated pooling, and each variant against a numpy reference."""

import numpy as np
import pytest
import tensorflow as tf

from helpers.sentence_models import (ENCODERS, SOURCE, TARGET_IN, TINY, conv_model, make,
                                     random_weights)
from tfnmt.data.vocab import EOS_ID, PAD_ID
from tfnmt.models import catalog


# The report's sizes at k̄ = 32: h_m per sentence, and the first convolution's kernel.
REPORT_SHAPES = [
    (dict(conv_encoder="small_filters"), (12, 4, 32), (3, 3, 1, 32)),  # 100x32 image, 3 pools
    (dict(conv_encoder="ngram_1layer"), (16, 100), (2, 1000, 100)),
    (dict(conv_encoder="ngram"), (4, 500), (2, 1000, 500)),
    (dict(conv_encoder="ngram", gated_pooling=True), (4, 500), (2, 1000, 500)),
    (dict(conv_encoder="ngram", ngram_widths="2,3"), (4, 1000), (2, 1000, 500)),
]


@pytest.mark.parametrize("flags,features,kernel", REPORT_SHAPES,
                         ids=["small_filters", "ngram_1layer", "ngram", "gated", "widths"])
def test_each_encoder_variant_at_the_reports_sizes(flags, features, kernel):
    model = catalog.get("conv_encoder")(40, 40, **flags)
    model.build_with_dummy_batch()
    assert model.source_window == 32
    assert model.encoder.sentence.feature_shape() == features
    assert tuple(model.encoder.sentence.convolutions[0][0].kernel.shape) == kernel
    source = tf.constant([[5] * 31 + [3], [6, 7, 3] + [0] * 29, [8, 3] + [0] * 30])
    encoding = model.encode(source)["encoding"]
    assert encoding.shape == (3, 1000)
    assert model.encoder.sentence.projection.kernel.shape == (int(np.prod(features)), 1000)
    if flags["conv_encoder"] != "small_filters":  # 100-d embeddings up-projected to d = 1000
        assert model.encoder.sentence.upprojection.kernel.shape == (100, 1000)
    assert np.isfinite(encoding.numpy()).all()


@pytest.mark.parametrize("kind", ENCODERS)
def test_the_encoding_does_not_change_when_padding_is_added(kind):
    model = make(kind)
    random_weights(model)  # gated pooling starts as average pooling; make it gate
    alone = model.encode(tf.constant([[9, 10, 11, 3]]))["encoding"].numpy()
    assert np.abs(alone).max() > 1e-3
    for source in ([[9, 10, 11, 3, 0, 0, 0]],
                   [[9, 10, 11, 3, 0, 0, 0], [5, 6, 7, 8, 9, 10, 3]],
                   [[9, 10, 11, 3] + [0] * 36]):  # batch padding past the window of 32
        padded = model.encode(tf.constant(source))["encoding"].numpy()
        np.testing.assert_allclose(padded[0], alone[0], atol=1e-5)
    other = model.encode(tf.constant([[9, 10, 12, 3]]))["encoding"].numpy()
    assert np.abs(other - alone).max() > 1e-4


@pytest.mark.parametrize("kind", sorted(TINY))
def test_every_position_of_the_window_reaches_the_encoding(kind):
    model = conv_model(kind)
    random_weights(model, seed=1)
    for conv in model.encoder.sentence.convolutions:  # no unit dead from the start
        for layer in conv:
            layer.bias.assign(tf.ones_like(layer.bias))
    source = np.full([1, 32], 5, np.int32)
    source[0, -1] = EOS_ID
    base = model.encode(tf.constant(source))["encoding"].numpy()
    for position in (0, 15, 30):
        changed = source.copy()
        changed[0, position] = 17
        assert np.abs(model.encode(tf.constant(changed))["encoding"].numpy() - base).max() > 1e-5


def test_a_source_longer_than_the_window_is_refused_not_cut():
    model = conv_model("ngram")
    with pytest.raises(tf.errors.InvalidArgumentError, match="longer than --source_window=32"):
        model.encode(tf.constant([[5] * 40 + [3]]))


@pytest.mark.parametrize("kind", ["ngram_gated", "small_filters_gated"])
def test_gated_pooling_weights_are_learned(kind):
    model = conv_model(kind)
    target_out = tf.concat([TARGET_IN[:, 1:], tf.fill([2, 1], EOS_ID)], axis=1)
    gates = [w for w in model.trainable_weights if "gated_pool" in w.path]
    assert len(gates) == 2 * 3  # scale and position bias of each of the 3 layers
    with tf.GradientTape() as tape:
        logits = model({"source": SOURCE, "target_in": TARGET_IN}, training=True)
        loss, _ = model.translation_loss(target_out, logits)
    for weight, gradient in zip(gates, tape.gradient(loss, gates)):
        assert gradient is not None and np.abs(gradient.numpy()).max() > 0, weight.path


# The encoders in numpy (paper 004, sec. 4 and 5.2-5.4), from the token ids: the embeddings are
# the columns of a d x k̄ matrix whose columns after the sentence are zero; each layer is
# pooling(ReLU(conv + b)); h_f = W_f h_m + b_f.

def relu(x):
    return np.maximum(x, 0.0)


def ngram_conv(x, kernel, bias):
    """[B, T, d] -> [B, T, F]: d x n filters, n - 1 zero columns appended after the sentence."""
    n = kernel.shape[0]
    padded = np.pad(x, [(0, 0), (0, n - 1), (0, 0)])
    return sum(padded[:, j:j + x.shape[1]] @ kernel[j] for j in range(n)) + bias


def small_conv(image, kernel, bias):
    """[B, H, W, C] -> [B, H, W, F]: a 2-D convolution keeping the size, zeros around."""
    kh, kw = kernel.shape[:2]
    padded = np.pad(image, [(0, 0), ((kh - 1) // 2, kh // 2), ((kw - 1) // 2, kw // 2), (0, 0)])
    h, w = image.shape[1:3]
    return sum(padded[:, a:a + h, b:b + w] @ kernel[a, b] for a in range(kh) for b in range(kw)) + bias


def windows(x, size):
    """Non-overlapping pooling windows, a trailing remainder dropped: [..., p (* q), C]."""
    if len(size) == 1:
        (p,) = size
        t = x.shape[1] // p
        return x[:, :t * p].reshape(x.shape[0], t, p, x.shape[-1])
    p, q = size
    h, w = x.shape[1] // p, x.shape[2] // q
    blocks = x[:, :h * p, :w * q].reshape(x.shape[0], h, p, w, q, x.shape[-1])
    return blocks.transpose(0, 1, 3, 2, 4, 5).reshape(x.shape[0], h, w, p * q, x.shape[-1])


def reference_encoding(model, source):
    encoder, window = model.encoder.sentence, model.source_window
    table = model.encoder.embedding.embeddings.numpy().astype(np.float64)
    rows = np.zeros([len(source), window, table.shape[1]])
    for b, ids in enumerate(source):
        real = [i for i in ids if i != PAD_ID]
        rows[b, :len(real)] = table[real]  # zero columns after the sentence
    if encoder.upprojection is not None:  # linear, no bias: zero columns stay zero
        rows = rows @ encoder.upprojection.kernel.numpy()
    gated = encoder.gated_pooling
    if encoder.variant == "small_filters":
        x, size = rows.transpose(0, 2, 1)[..., None], (2, 2)  # the d x k̄ image, one channel
    else:
        x, size = rows, (2,)
    for convolutions, pooling in zip(encoder.convolutions, encoder.poolings):
        conv = small_conv if encoder.variant == "small_filters" else ngram_conv
        # Several n-gram widths: each its own filters, outputs concatenated in --ngram_widths order.
        x = np.concatenate([relu(conv(x, c.kernel.numpy(), c.bias.numpy())) for c in convolutions],
                           axis=-1)
        pieces = windows(x, size)
        if gated:
            scores = pieces * pooling.scale.numpy() + pooling.position_bias.numpy()
            weights = np.exp(scores - scores.max(axis=-2, keepdims=True))
            x = (weights / weights.sum(axis=-2, keepdims=True) * pieces).sum(axis=-2)
        elif encoder.variant == "small_filters":
            x = pieces.mean(axis=-2)  # 2x2 average pooling, stride 2 (sec. 5.2)
        else:
            x = pieces.max(axis=-2)  # max pooling of width 2, stride 2 over time (sec. 5.4)
    h_m = x.reshape(len(source), -1)
    return h_m @ encoder.projection.kernel.numpy() + encoder.projection.bias.numpy()


REFERENCE_CASES = dict(
    {kind: {} for kind in TINY},
    # Odd sizes: trailing rows / columns / positions dropped by the pooling, an up-projection
    # before the small filters, a non-square filter.
    small_filters_odd=dict(conv_input_dim=9, source_window=13, small_filter_size="5x3"),
    ngram_odd=dict(source_window=11, ngram_widths="3,2"),
)


@pytest.mark.parametrize("case", sorted(REFERENCE_CASES))
def test_each_encoder_variant_equals_a_numpy_reference(case):
    kind = case.replace("_odd", "")
    model = conv_model(kind, **REFERENCE_CASES[case])
    random_weights(model, seed=4)  # every weight, the gates' and biases' included
    for convolutions in model.encoder.sentence.convolutions:  # few units dead from the start
        for conv in convolutions:
            conv.bias.assign(np.abs(conv.bias.numpy()) + 0.2)
    window = model.source_window
    source = np.zeros([3, window], np.int32)
    source[0, :window - 1], source[0, -1] = np.arange(5, 5 + window - 1) % 45 + 5, EOS_ID  # full
    source[1, :4] = [9, 10, 11, EOS_ID]
    source[2, :2] = [12, EOS_ID]
    expected = reference_encoding(model, source.tolist())
    encoding = model.encode(tf.constant(source))["encoding"].numpy()
    atol = 1e-5 * np.abs(expected).max()
    # The sentences' encodings differ by far more than the tolerance (the small filters' averages
    # the least: by 1e-2).
    pairs = ((0, 1), (0, 2), (1, 2))
    assert min(np.abs(expected[a] - expected[b]).max() for a, b in pairs) > 100 * atol
    np.testing.assert_allclose(encoding, expected, rtol=1e-4, atol=atol)
    # A batch narrower than the window is zero-filled after the sentences to k̄ columns.
    narrow = model.encode(tf.constant(source[1:, :4]))["encoding"].numpy()
    np.testing.assert_allclose(narrow, expected[1:], rtol=1e-4, atol=atol)
