"""A vocabulary shortlist (CTranslate2's vmap, Marian's lexical shortlist): each decoding batch's
output layer and softmax over the target pieces its sources make likely, not the whole
vocabulary.

The table (`build`): for every source piece, the PER_SOURCE target pieces that most often share
a training pair with it, by p(target piece in the pair | source piece in the pair), after the
FREQUENT most frequent target pieces, which every batch gets anyway, and the piece itself where
the target vocabulary has it (names and numbers are copied). A batch's candidates
(`candidates`) are the union of its source pieces' rows, the frequent pieces and eos and unk.

`Shortlisted` wraps a model for the searches, which then search among the candidates as if they
were the vocabulary: its decoding memory carries the output matrix's columns of the candidates
only, so each step's product is [N, d] x [d, C] instead of [d, V], and the softmax, the top-k
and every [N, V] pass of the search shrink to [N, C]. A search's token is a candidate's index;
`step` gives the model the real id, and the translator turns the search's indices back into ids
(`to_ids`). The candidates always start with pad, unk, bos and eos, so those four keep their
ids as indices and the searches' rules on them hold as they are. The softmax is over the
candidates (renormalised, as CTranslate2 and Marian do): where a step's best pieces are
candidates, greedy search chooses as over the whole vocabulary. Teacher forcing (`decode`,
scoring), alignments and target prefixes use the whole vocabulary.
"""

import numpy as np
import tensorflow as tf

from tfnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from tfnmt.decoding.shared import SHARED, add_shared, output_kernel
from tfnmt.errors import ConfigError
from tfnmt.parts import in_parts

FREQUENT = 100
# Ranked pieces per source piece a table keeps; --shortlist takes up to this many.
MAX_PER_SOURCE = 200
# Training pairs read to build a table: enough for the co-occurrences of a large corpus.
MAX_PAIRS = 200_000
# Where a model directory keeps its table.
CACHE_FILE = "shortlist.npy"
_IDS = "shortlist_ids"


def build(source_ids, target_ids, source_size, target_size, same_piece=None):
    """The ranked co-occurrences of the pairs (`source_ids`, `target_ids`: lists of id lists)
    as the table int32 [source_size, FREQUENT + MAX_PER_SOURCE + 1]: row s holds the FREQUENT
    most frequent target pieces, then the others ranked by how many pairs they share with s
    (p(t|s) with one c(s) per row; ties by id), then `same_piece[s]` (the target id of the same
    piece, or -1); -1 where there are fewer. `limit` cuts it to a --shortlist."""
    source_count = np.zeros(source_size, np.int64)
    target_count = np.zeros(target_size, np.int64)
    codes = []
    for source, target in zip(source_ids, target_ids):
        s, t = np.unique(source), np.unique(target)
        source_count[s] += 1
        target_count[t] += 1
        codes.append((s[:, None].astype(np.int64) * target_size + t[None, :]).ravel())
    special = [PAD_ID, EOS_ID, UNK_ID]
    frequent = [int(i) for i in np.argsort(-target_count, kind="stable")
                if i not in special][:FREQUENT]
    table = np.full((source_size, FREQUENT + MAX_PER_SOURCE + 1), -1, np.int32)
    table[:, :len(frequent)] = frequent
    if codes:
        pairs, counts = np.unique(np.concatenate(codes), return_counts=True)
        sources, targets = pairs // target_size, pairs % target_size
        keep = ~np.isin(targets, frequent + special)
        sources, targets, counts = sources[keep], targets[keep], counts[keep]
        order = np.lexsort((targets, -counts, sources))
        sources, targets = sources[order], targets[order]
        starts = np.searchsorted(sources, np.arange(source_size))
        ends = np.searchsorted(sources, np.arange(source_size), side="right")
        for s in np.nonzero(ends > starts)[0]:
            row = targets[starts[s]:min(ends[s], starts[s] + MAX_PER_SOURCE)]
            table[s, FREQUENT:FREQUENT + len(row)] = row
    if same_piece is not None:
        table[:, -1] = same_piece
    return table


def from_data(spec, split, source_vocab, target_vocab, cache_path):
    """The table (`build`) of the first MAX_PAIRS training pairs of `spec` (data/sources.py
    DataSpec) `split`, kept at `cache_path` (.npy) for the next call; where the path cannot be
    written, built each time."""
    import os

    from absl import logging

    from tfnmt.data import sources
    if os.path.isfile(cache_path):
        return np.load(cache_path)
    source_lines, target_lines = sources.references(spec, split, MAX_PAIRS)
    target_id = {piece: i for i, piece in enumerate(target_vocab.pieces())}
    same = np.array([target_id.get(piece, -1) for piece in source_vocab.pieces()], np.int32)
    table = build([source_vocab.encode(line) for line in source_lines],
                  [target_vocab.encode(line) for line in target_lines],
                  source_vocab.size, target_vocab.size, same)
    logging.info("vocabulary shortlist built from %d training pairs", len(source_lines))
    try:
        with open(cache_path + ".tmp", "wb") as f:
            np.save(f, table)
        os.replace(cache_path + ".tmp", cache_path)
    except OSError:
        pass
    return table


def limit(table, per_source):
    """`table` (build) with `per_source` ranked pieces per source piece."""
    return np.concatenate([table[:, :FREQUENT + per_source], table[:, -1:]], 1)


def candidates(source, table, vocab_size):
    """The sorted target ids [C] a batch of sources (int32 [B, S], PAD_ID padding) may be
    translated into: pad, unk, bos and eos (ids 0-3, so at indices 0-3), and its pieces' rows of
    `table`."""
    rows = tf.gather(table, tf.boolean_mask(source, tf.not_equal(source, PAD_ID)))
    ids = tf.concat([tf.reshape(rows, [-1]), [PAD_ID, UNK_ID, BOS_ID, EOS_ID]], 0)
    ids = tf.boolean_mask(ids, (ids >= 0) & (ids < vocab_size))
    present = tf.scatter_nd(ids[:, None], tf.ones_like(ids), [vocab_size]) > 0
    return tf.cast(tf.where(present)[:, 0], tf.int32)


def with_candidates(memory, ids):
    """The encoder's `memory` with the batch's candidate ids (`candidates`) for the search."""
    return add_shared(memory, **{_IDS: ids})


def to_ids(indices, ids):
    """A search's tokens (indices into the candidates `ids`) as vocabulary ids."""
    return tf.gather(ids, indices)


class Shortlisted:
    """`model` (the decoding contract, models/base.py) decoding over each batch's candidates
    (module docstring). Only for a model whose decoding memory holds its output matrix (a tied
    output layer: `decoding/shared.output_kernel`)."""

    def __init__(self, model, table):
        self.model = model
        self.table = tf.constant(table, tf.int32)

    def __getattr__(self, name):
        return getattr(self.model, name)

    def candidates(self, source):
        return candidates(source, self.table, self.model.target_vocab_size)

    def decoding_memory(self, memory):
        memory = self.model.decoding_memory(memory)
        ids = memory.get(SHARED, {}).get(_IDS)
        if ids is None:  # a search not given candidates: the whole vocabulary
            return memory
        kernel = output_kernel(memory)
        if kernel is None:
            raise ConfigError(f"--shortlist: not for {self.model.registry_name}: only for a model "
                              "whose output layer shares the target embedding (--tie_output)")
        return add_shared(memory, output_kernel=in_parts(tf.gather(tf.concat(kernel, 1), ids,
                                                                   axis=1)))

    def step(self, ids, time, state, memory):
        chosen = memory.get(SHARED, {}).get(_IDS)
        return self.model.step(ids if chosen is None else tf.gather(chosen, ids), time, state,
                               memory)
