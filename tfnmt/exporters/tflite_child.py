"""Converts frozen graphs to TFLite flatbuffers, each in a process of its own (exporters/tflite.py
runs it): the converter leaves functions in the process's TensorFlow context under names the
next conversion may generate again with another body, and that conversion then fails
("Attempting to add a duplicate function with name: while_cond_function_0").

    python tflite_child.py

imports TensorFlow once, then reads requests from stdin, one a line: `DIR QUANTIZE`. Each is
converted in a child forked for it, which starts from the state of a process that has imported
TensorFlow and converted nothing: a conversion costs no import (about 4 s of CPU a time). DIR
holds frozen.pb (a GraphDef) and tensors.json ({"inputs": [...], "outputs": [...]}: tensor
names); the child writes DIR/model.tflite, or on failure DIR/error.txt (the exception's type, a
newline, its message), and DIR/output.txt (the converter's own output). Each request is answered
with one line: the child's exit status, or `signal N` where a signal ended it. Ends at the end
of stdin. Imports nothing of tfnmt, so it runs from any working directory.
"""

import json
import os
import sys


def convert(directory, quantize):
    import tensorflow as tf

    with open(os.path.join(directory, "frozen.pb"), "rb") as f:
        graph_def = tf.compat.v1.GraphDef.FromString(f.read())
    with open(os.path.join(directory, "tensors.json")) as f:
        tensors = json.load(f)
    wrapped = tf.compat.v1.wrap_function(
        lambda: tf.graph_util.import_graph_def(graph_def, name=""), [])
    function = wrapped.prune(
        feeds=[wrapped.graph.get_tensor_by_name(name) for name in tensors["inputs"]],
        fetches=[wrapped.graph.get_tensor_by_name(name) for name in tensors["outputs"]])
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], wrapped)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantize != "none":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]  # dynamic-range int8 weights
        # One scale per matrix for fully connected layers (convolutions keep one per output
        # channel): an embedding table that is also the output layer (--tie_output) then has
        # one int8 form, where a scale per output row made the converter store a second copy
        # (docs/benchmarks.md "TFLite export of DenseNMT-4L-2": the same BLEU, 0.8 MB less).
        converter._experimental_disable_per_channel_quantization_for_dense_layers = True
    if quantize == "float16":
        converter.target_spec.supported_types = [tf.float16]
    return converter.convert()


def main(directory, quantize):
    try:
        flatbuffer = convert(directory, quantize)
    except Exception as error:  # the converter raises ConverterError and assorted others
        with open(os.path.join(directory, "error.txt"), "w") as f:
            f.write(f"{type(error).__name__}\n{error}")
        return 1
    with open(os.path.join(directory, "model.tflite"), "wb") as f:
        f.write(flatbuffer)
    return 0


def _convert_in_child(directory, quantize):
    """Forks a child that converts `directory` with stdout and stderr in DIR/output.txt; the
    answer line for its end."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            output = os.open(os.path.join(directory, "output.txt"),
                             os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(output, 1)
            os.dup2(output, 2)
            status = main(directory, quantize)
        finally:
            os._exit(status)  # neither the server's loop nor its exit handlers
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return str(os.WEXITSTATUS(status))


def serve(requests, answers):
    __import__("tensorflow")  # the import each child then has already
    for line in requests:
        directory, quantize = line.rstrip("\n").rsplit(" ", 1)
        answers.write(_convert_in_child(directory, quantize) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
