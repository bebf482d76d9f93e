"""The decoding memory's two entries that are not per hypothesis (the model contract,
models/base.py): `memory[SHARED]` holds what is the same for every sentence (the transposed
output matrix, the self-attentions' fused projections, the feed-forward blocks' parts), which
the searches neither tile nor gather and hand to every `step` as it is; `memory[BY_SENTENCE]`
(at any depth: an ensemble's members each have theirs) holds one row per sentence where the
rest has one per hypothesis, which a beam search does not tile and gathers by sentence."""

import contextlib
import threading

import keras
import tensorflow as tf

from tfnmt.parts import in_parts

SHARED = "shared"
BY_SENTENCE = "by_sentence"

# .made, in `stored_derivations`: {(id(owner), name): (owner, its variables)}.
_stored = threading.local()


def derived(owner, name, make):
    """`make()`: a nest of tensors that decoding derives from `owner`'s weights and reads at
    every step (a transpose, a concatenation), made once per batch; inside
    `stored_derivations`, a nest of variables made once from them."""
    made = getattr(_stored, "made", None)
    if made is None:
        return make()
    key = (id(owner), name)
    if key not in made:
        with tf.init_scope():  # made from the weights as they are now, outside any trace
            made[key] = (owner, tf.nest.map_structure(
                lambda value: tf.Variable(value, trainable=False, name=name), make()))
    return made[key][1]


def with_shared(rows, shared):
    """The memory `step` reads: the rows a search carries and the SHARED entry."""
    return rows if shared is None else dict(rows, **{SHARED: shared})


def add_shared(memory, **entries):
    """`memory` with `entries` added to its SHARED entry."""
    return dict(memory, **{SHARED: dict(memory.get(SHARED, {}), **entries)})


def with_output_kernel(memory, matrix):
    """`memory` with a tied output matrix [V, d] transposed, in column blocks (`in_parts`), as
    its SHARED "output_kernel": a MatMul with transpose_b re-transposes its matrix at every
    step, which costs more than this once-per-batch copy (docs/benchmarks.md, "Decoding speed
    against CTranslate2", and "A better-trained Transformer, and where batch 1 spends its
    time", where its cost is measured)."""
    return add_shared(memory, output_kernel=derived(
        matrix, "output_kernel", lambda: in_parts(tf.transpose(matrix))))


@contextlib.contextmanager
def stored_derivations():
    """Within it, functions traced read what `derived` makes from variables made once, not
    per call. Yields a list that holds those variables once the block ends (a SavedModel must
    track them).

    Only for an export, whose weights never change: a function traced here would keep
    decoding with what was derived from the weights it was traced with. At batch 1 the
    transposed output matrix alone cost about a tenth of a sentence's decoding time
    (docs/benchmarks.md)."""
    made = {}
    _stored.made = made
    variables = []
    try:
        yield variables
    finally:
        _stored.made = None
        variables.extend(variable for _, nest in made.values()
                         for variable in tf.nest.flatten(nest))


def output_kernel(memory):
    """The memory's transposed output matrix in column blocks (`with_output_kernel`), None
    outside a search."""
    return memory.get(SHARED, {}).get("output_kernel")


def split_shared(memory):
    """(the memory's per-sentence rows, its SHARED entry or None)."""
    if isinstance(memory, dict) and SHARED in memory:
        rows = dict(memory)
        return rows, rows.pop(SHARED)
    return memory, None


def map_rows(memory, hypotheses, sentences):
    """`memory` (without its SHARED entry) with `hypotheses` applied to every tensor, but
    `sentences` to those under a BY_SENTENCE entry."""
    return keras.tree.pack_sequence_as(memory, [
        (sentences if BY_SENTENCE in path else hypotheses)(tensor)
        for path, tensor in keras.tree.flatten_with_path(memory)])


def tile_hypotheses(memory, beams):
    """The memory a beam search carries: each row `beams` times (row b * beams + k), but one
    row per sentence under BY_SENTENCE."""
    return map_rows(memory, lambda t: tf.repeat(t, beams, axis=0), lambda t: t)
