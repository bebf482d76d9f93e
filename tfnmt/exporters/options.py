"""What `tfnmt export` writes and where: declared once, the flags generated from these fields
(cli/flags.py); the settings that exclude each other are refused when the options are built."""

import dataclasses

from tfnmt.errors import ConfigError
from tfnmt.options import check, option

# TFLite weights (exporters/tflite.py convert).
QUANTIZATIONS = ("none", "dynamic", "float16")


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    format: str = option(
        "saved_model", "Export format: a TF Serving SavedModel (text in, text out), a TFLite "
        "flatbuffer for phones (ids in, ids out; SentencePiece model beside it), or a "
        "CTranslate2 model of a plain transformer (SentencePiece model beside it; pip install "
        "-e \".[ctranslate2]\").", choices=("saved_model", "tflite", "ctranslate2"))
    quantize: str = option("none", "TFLite weights: float32, dynamic-range int8, or float16.",
                           choices=QUANTIZATIONS)
    export_dir: str = option(None, "Export base directory; the model goes to DIR/NAME/VERSION.")
    export_name: str = option("", "Served model name (default: the model's registry name).")
    export_version: int = option(
        0, "Version directory (0 = one more than the newest there).", bounds=">= 0")
    score: bool = option(
        False, "SavedModel: add the `score` signature (text, target -> log_prob, normalized, "
        "target_tokens), the teacher-forced score of given translations under the export's "
        "length penalty, which `tfnmt.Translator.from_export(...).score` reads. Autoregressive "
        "models without a source window.")
    prefix: bool = option(
        False, "SavedModel: add the `prefix` signature (text, prefix -> translations, scores), "
        "translations that start with a given target prefix, which `tfnmt translate "
        "--target_prefix`, `tfnmt.Translator.translate(..., target_prefix=...)` and the demo "
        "page of `tfnmt serve` read. Autoregressive models.")

    def __post_init__(self):
        check(self)  # each value in its range before the checks across values
        if self.format == "ctranslate2" and self.quantize != "none":
            raise ConfigError("--quantize does not apply to --format=ctranslate2: CTranslate2 "
                              "chooses it when it translates (README: CTranslate2)")
        if self.quantize != "none" and self.format != "tflite":
            raise ConfigError("--quantize applies to --format=tflite only")
        for name in ("score", "prefix"):
            if getattr(self, name) and self.format != "saved_model":
                raise ConfigError(f"--{name} adds a SavedModel signature: not with "
                                  f"--format={self.format}")
