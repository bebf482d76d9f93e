#!/usr/bin/env python3
"""Translate with a tfnmt TFLite export using only what a device-side app has: the LiteRT
interpreter, SentencePiece and numpy (no TensorFlow, no tfnmt). Mirror this in the app.

    python translate_tflite.py EXPORT_DIR/NAME/VERSION < source.txt > translations.txt
"""

import json
import os
import sys

import numpy as np
import sentencepiece as spm
from ai_edge_litert.interpreter import Interpreter


def load(path):
    with open(os.path.join(path, "tflite_export.json")) as f:
        info = json.load(f)
    source = spm.SentencePieceProcessor(model_file=os.path.join(path, info["source_vocab"]))
    target = spm.SentencePieceProcessor(model_file=os.path.join(path, info["target_vocab"]))
    interpreter = Interpreter(model_path=os.path.join(path, "model.tflite"))
    return info, source, target, interpreter


def translate(line, info, source, target, interpreter):
    ids = source.encode(line)[: info["input"]["max_ids"] - 1]
    if not ids:
        return ""
    ids.append(info["input"]["append_id"])
    index = interpreter.get_input_details()[0]["index"]
    interpreter.resize_tensor_input(index, [1, len(ids)])
    interpreter.allocate_tensors()
    interpreter.set_tensor(index, np.array([ids], np.int32))
    interpreter.invoke()
    # The outputs are unnamed; the int32 one holds the translation's ids.
    out = next(d for d in interpreter.get_output_details() if d["dtype"] == np.int32)
    pad = info["outputs"]["ids"]["padding_id"]
    return target.decode([int(i) for i in interpreter.get_tensor(out["index"])[0] if i != pad])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    model = load(sys.argv[1])
    for line in sys.stdin:
        print(translate(line.rstrip("\n"), *model), flush=True)


if __name__ == "__main__":
    main()
