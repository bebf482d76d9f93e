"""The CTC non-autoregressive model at a tiny size (tests/models/test_ctc_nat.py,
tests/decoders/test_ctc_decoder.py)."""

import tensorflow as tf

from tfnmt.models import catalog

SOURCE = tf.constant([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]])
TINY = dict(encoder_layers=2, decoder_layers=2, d_model=16, ffn_dim=32, num_heads=2, dropout=0.0)


def make(variant="encoder_decoder_pos", **overrides):
    settings = dict(TINY, ctc_variant=variant, **overrides)
    if variant == "deep_encoder":
        settings["decoder_layers"] = 0
    model = catalog.get("ctc_nat")(50, 60, **settings)
    model.build_with_dummy_batch()
    return model
