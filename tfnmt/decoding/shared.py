"""The decoding memory's one entry that is not per sentence (the model contract,
models/base.py): `memory[SHARED]` holds what is the same for every sentence (the transposed
output matrix), which the searches neither tile nor gather and hand to every `step` as it is."""

SHARED = "shared"


def split_shared(memory):
    """(the memory's per-sentence rows, its SHARED entry or None)."""
    if isinstance(memory, dict) and SHARED in memory:
        rows = dict(memory)
        return rows, rows.pop(SHARED)
    return memory, None


def with_shared(rows, shared):
    """The memory `step` reads: the rows a search carries and the SHARED entry."""
    return rows if shared is None else dict(rows, **{SHARED: shared})
