"""The decoding memory's one entry that is not per sentence (the model contract,
models/base.py): `memory[SHARED]` holds what is the same for every sentence (the transposed
output matrix), which the searches neither tile nor gather and hand to every `step` as it is."""

import tensorflow as tf

SHARED = "shared"


def with_output_kernel(memory, matrix):
    """`memory` with a tied output matrix [V, d] transposed once per batch as its SHARED
    "output_kernel": a MatMul with transpose_b re-transposes its matrix at every step, which
    costs more than this once-per-batch copy (docs/benchmarks.md, "Decoding speed against
    CTranslate2", where the copy's own cost at batch 1 is measured too)."""
    return dict(memory, **{SHARED: {"output_kernel": tf.transpose(matrix)}})


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
