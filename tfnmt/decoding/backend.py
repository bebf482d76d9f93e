"""What every translation backend offers, wherever the model runs: a checkpoint in-process
(`decoding/translator.Translator`), a SavedModel (`export/saved_model.SavedModelTranslator`), a
TFLite flatbuffer (`export/tflite.TFLiteTranslator`) or a served model
(`serving/client.RemoteTranslator`). `serving/backends.open_backend` picks one from paths and
flags; `tfnmt translate`, `evaluate`, `distill` and `bench` see only this protocol.
"""

from typing import Optional, Protocol


class Backend(Protocol):
    # The model's config.json as the backend knows it, else None (a served model).
    config: Optional[dict]
    # The beam its translations come from, where known.
    beam_size: Optional[int]

    def translate(self, text):
        """string [B] -> {"translations": string [B], "scores": float32 [B]}."""

    def translate_n_best(self, text, n):
        """string [B] -> {"translations": string [B, n], "scores": float32 [B, n]}, best first."""
