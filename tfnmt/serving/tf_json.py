"""JSON as TF Serving writes it (util/json_tensor.cc): its float format, rapidjson's pretty
layout, predictions by rows or columns, `{"error": ...}` bodies."""

import base64
import json
import math

import numpy as np


class _Number:
    """A number token written verbatim."""
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text


def format_float(value, float32=True):
    """TF Serving's WriteDecimal: six significant digits ("%g") when that reads back as the same
    number, else full precision (9 digits for float32, 17 for float64); ".0" on whole numbers;
    NaN and +-Infinity as bare tokens."""
    value = np.float32(value) if float32 else np.float64(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "-Infinity" if value < 0 else "Infinity"
    text = "%g" % value
    if (np.float32(text) if float32 else np.float64(text)) != value:
        text = "%.*g" % (9 if float32 else 17, value)
    if "." not in text and "e" not in text:
        text += ".0"
    return text


def dumps(value, level=0):
    # rapidjson's PrettyWriter layout (4-space indent), which TF Serving uses for predictions.
    pad, end = "    " * (level + 1), "    " * level
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = ",\n".join(f"{pad}{json.dumps(k, ensure_ascii=False)}: {dumps(v, level + 1)}"
                           for k, v in value.items())
        return "{\n" + items + "\n" + end + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(pad + dumps(v, level + 1) for v in value) + "\n" + end + "]"
    if isinstance(value, _Number):
        return value.text
    return json.dumps(value, ensure_ascii=False)


def error_body(message):
    return dumps({"error": message})


def _column(name, array):
    """An output vector as JSON values (strings decoded; "*_bytes" outputs as {"b64": ...});
    a matrix (the `n_best` signature's) as a list of rows."""
    if array.ndim > 1:
        return [_column(name, row) for row in array]
    if array.dtype.kind in ("S", "O"):
        if name.endswith("_bytes"):
            return [{"b64": base64.b64encode(v).decode("ascii")} for v in array]
        return [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else str(v) for v in array]
    if array.dtype.kind == "f":
        return [_Number(format_float(v, array.dtype == np.float32)) for v in array]
    if array.dtype.kind == "b":
        return [bool(v) for v in array]
    return [int(v) for v in array]


def predict_response(outputs, row_format):
    """TF Serving's response: rows {"predictions": [...]} or columns {"outputs": ...}; with one
    output, its values stand alone instead of inside {name: value} objects."""
    columns = {name: _column(name, outputs[name]) for name in sorted(outputs)}
    if not row_format:
        return {"outputs": columns if len(columns) > 1 else next(iter(columns.values()))}
    if len(columns) == 1:
        return {"predictions": next(iter(columns.values()))}
    size = len(next(iter(columns.values())))
    return {"predictions": [{name: values[i] for name, values in columns.items()} for i in range(size)]}
