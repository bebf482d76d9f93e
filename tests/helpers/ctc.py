"""The CTC non-autoregressive model at a tiny size (tests/models/test_ctc_nat.py,
tests/decoders/test_ctc_decoder.py)."""

from helpers.families import SOURCE  # noqa: F401  (the batch its tests read)
from tfnmt.models import catalog

TINY = dict(encoder_layers=2, decoder_layers=2, d_model=16, ffn_dim=32, num_heads=2, dropout=0.0)


def make(variant="encoder_decoder_pos", **overrides):
    settings = dict(TINY, ctc_variant=variant, **overrides)
    if variant == "deep_encoder":
        settings["decoder_layers"] = 0
    model = catalog.get("ctc_nat")(50, 60, **settings)
    model.build_with_dummy_batch()
    return model
