"""The decoding memory's one entry that is not per sentence (the model contract,
models/base.py): `memory[SHARED]` holds what is the same for every sentence (the transposed
output matrix), which the searches neither tile nor gather and hand to every `step` as it is."""

import contextlib
import threading

import tensorflow as tf

SHARED = "shared"

_stored = threading.local()  # .kernels: {id(matrix): (matrix, its transpose)} in `stored_transposes`


def with_output_kernel(memory, matrix):
    """`memory` with a tied output matrix [V, d] transposed as its SHARED "output_kernel": a
    MatMul with transpose_b re-transposes its matrix at every step, which costs more than this
    once-per-batch copy; inside `stored_transposes`, the copy is a variable made once
    (docs/benchmarks.md, "Decoding speed against CTranslate2", and "A better-trained
    Transformer, and where batch 1 spends its time", where the copy's cost is measured)."""
    kernels = getattr(_stored, "kernels", None)
    if kernels is None:
        return dict(memory, **{SHARED: {"output_kernel": tf.transpose(matrix)}})
    if id(matrix) not in kernels:
        with tf.init_scope():  # made from the weights as they are now, outside any trace
            kernels[id(matrix)] = (matrix, tf.Variable(tf.transpose(matrix), trainable=False,
                                                       name="output_kernel"))
    return dict(memory, **{SHARED: {"output_kernel": kernels[id(matrix)][1]}})


@contextlib.contextmanager
def stored_transposes():
    """Within it, functions traced read each tied output matrix's transpose from a variable
    made once, not transposed per call. Yields a list that holds those variables once the
    block ends (a SavedModel must track them).

    Only for an export, whose weights never change: a function traced here would keep
    decoding with the transpose of the weights it was traced with. At batch 1 the per-call
    copy is about a tenth of a sentence's decoding time (docs/benchmarks.md)."""
    kernels = {}
    _stored.kernels = kernels
    made = []
    try:
        yield made
    finally:
        _stored.kernels = None
        made.extend(variable for _, variable in kernels.values())


def output_kernel(memory):
    """The memory's transposed output matrix (`with_output_kernel`), None outside a search."""
    return memory.get(SHARED, {}).get("output_kernel")


def split_shared(memory):
    """(the memory's per-sentence rows, its SHARED entry or None)."""
    if isinstance(memory, dict) and SHARED in memory:
        rows = dict(memory)
        return rows, rows.pop(SHARED)
    return memory, None


def with_shared(rows, shared):
    """The memory `step` reads: the rows a search carries and the SHARED entry."""
    return rows if shared is None else dict(rows, **{SHARED: shared})
