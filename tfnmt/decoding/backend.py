"""What every translation backend offers, wherever the model runs: a checkpoint in-process
(`decoding/translator.Translator`), a SavedModel (`exporters/saved_model.SavedModelTranslator`), a
TFLite flatbuffer (`exporters/tflite.TFLiteTranslator`) or a served model
(`serving/client.RemoteTranslator`). `serving/backends.open_backend` is the one place that picks
and opens one; `tfnmt.Translator` (api.py) wraps it for `tfnmt translate`, `evaluate`, `score`
and `distill`, and `bench` times it bare: they see only this interface.
"""

from tfnmt.errors import ConfigError


class Backend:
    # The beam its translations come from, where known (bench and distill record it).
    beam_size = None

    def translate(self, text):
        """string [B] -> {"translations": string [B], "scores": float32 [B]}."""
        raise NotImplementedError

    def translate_n_best(self, text, n):
        """string [B] -> {"translations": string [B, n], "scores": float32 [B, n]}, best first."""
        raise ConfigError(f"--n_best={n}: {type(self).__name__} gives one translation per "
                          "sentence; use a checkpoint or a SavedModel exported with --n_best")

    def translate_alignments(self, text):
        """string [B] -> the `alignments` signature's outputs (Translator.alignments_signature)."""
        raise ConfigError(f"--alignments: {type(self).__name__} gives no alignments; use a "
                          "checkpoint or a SavedModel exported with --alignments=hard|soft")

    def check_prefix(self):
        """Refuses target prefixes, before any is translated, where the backend takes none."""
        raise ConfigError(f"target prefix: {type(self).__name__} translates without one; use a "
                          "checkpoint or a SavedModel exported with --prefix")

    def translate_prefix(self, text, prefix):
        """string [B], string [B] -> {"translations": string [B], "scores": float32 [B]}: the
        best translations that start with `prefix` (Translator.prefix_signature). A backend
        that takes prefixes overrides both; here `check_prefix` refuses."""
        self.check_prefix()

    def prepare(self, sentences, where, first_line=1):
        """Before `sentences` (str, read from `where`, the first of them its line `first_line`)
        are translated: whatever the backend can tell about them beforehand is said (as
        WHERE:LINE) or refused here."""


def no_score_signature(where):
    """The refusal of an export or a served model (`where`) made without --score."""
    return ConfigError(f"score: {where} has no `score` signature; export it with --score, or "
                       "score from the model directory")
