"""What `tfnmt export` writes and where: declared once, the flags generated from these fields
(cli/flags.py)."""

import dataclasses

from tfnmt.options import option


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    format: str = option(
        "saved_model", "Export format: a TF Serving SavedModel (text in, text out), a TFLite "
        "flatbuffer for phones (ids in, ids out; SentencePiece model beside it), or a "
        "CTranslate2 model of a plain transformer (SentencePiece model beside it; pip install "
        "-e \".[ctranslate2]\").", choices=("saved_model", "tflite", "ctranslate2"))
    quantize: str = option("none", "TFLite weights: float32, dynamic-range int8, or float16.",
                           choices=("none", "dynamic", "float16"))
    export_dir: str = option(None, "Export base directory; the model goes to DIR/NAME/VERSION.")
    export_name: str = option("", "Served model name (default: the model's registry name).")
    export_version: int = option(
        0, "Version directory (0 = one more than the newest there).", bounds=">= 0")
