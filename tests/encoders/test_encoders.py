"""Every registered encoder part (tfnmt/encoders/, PART_SIZES in contract.py), each at its tiny
size behind a decoder that reads anything: the widths it declares before any tensor exists,
its mask, its summary, and what a sentence's encoding may not depend on."""

import numpy as np
import pytest
import tensorflow as tf

from contract import PART_SIZES, tiny_model
from tfnmt.data.vocab import EOS_ID, PAD_ID
from tfnmt.layers.part import ENCODERS, summary_of

NAMES = sorted(PART_SIZES["encoder"])
SOURCE = tf.constant([[5, 6, 7, 3, 0, 0], [8, 9, 3, 0, 0, 0]])


def encoder_of(name):
    return tiny_model(f"hybrid:{name}+conditional_gru").encoder


@pytest.mark.parametrize("name", NAMES)
def test_every_encoder_gives_the_widths_it_declares_and_masks_padding(name):
    # A decoder builds its layers from the declared widths before any tensor exists.
    encoder = encoder_of(name)
    encoded = encoder.encode(SOURCE)
    summary = summary_of(encoded)
    assert summary.shape == (2, encoder.summary_width)
    if ENCODERS[name].GIVES_SEQUENCE:
        assert encoded.width == encoder.output_width == encoder.summary_width
        np.testing.assert_array_equal(encoded.mask.numpy(), SOURCE.numpy() != PAD_ID)
        # The summary of a sequence is the mean over its real tokens.
        keep = (SOURCE.numpy() != PAD_ID)[:, :, None]
        expected = (encoded.outputs.numpy() * keep).sum(1) / keep.sum(1)
        np.testing.assert_allclose(summary.numpy(), expected, rtol=1e-5, atol=1e-6)
    else:
        assert encoded.outputs is None and encoded.width is encoder.output_width is None


@pytest.mark.parametrize("name", NAMES)
def test_a_sentence_encodes_alike_alone_and_padded_beside_a_longer_one(name):
    """Padding and batch-mates change nothing a decoder reads of a sentence: its outputs at its
    real positions and its summary (a convolution must not read padding as words, a recurrent
    layer of the opposite direction must start at the sentence's own last token)."""
    encoder = encoder_of(name)
    sentence = [11, 12, 13, 14, EOS_ID]
    alone = encoder.encode(tf.constant([sentence]))
    longer = [21, 22, 23, 24, 25, 26, 27, 28, 29, EOS_ID]
    batch = encoder.encode(tf.constant([sentence + [PAD_ID] * 7, longer + [PAD_ID] * 2]))
    np.testing.assert_allclose(summary_of(batch).numpy()[0], summary_of(alone).numpy()[0],
                               rtol=1e-5, atol=1e-5)
    if ENCODERS[name].GIVES_SEQUENCE:
        np.testing.assert_allclose(batch.outputs.numpy()[0, :len(sentence)],
                                   alone.outputs.numpy()[0], rtol=1e-5, atol=1e-5)
        # The check can fail: another sentence in the same place encodes otherwise.
        other = encoder.encode(tf.constant([[11, 12, 31, 14, EOS_ID]]))
        assert not np.allclose(other.outputs.numpy(), alone.outputs.numpy(), atol=1e-5)

