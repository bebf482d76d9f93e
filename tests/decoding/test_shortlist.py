"""The vocabulary shortlist (decoding/shortlist.py): the table keeps the pieces a source's
training pairs hold, a batch's candidates keep pad/unk/bos/eos at their ids, and a search over
candidates that hold what the whole vocabulary's search chose decodes the same."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from conftest import run_cli
from tfnmt.decoding import shortlist
from tfnmt.decoding.options import DecodingOptions
from tfnmt.errors import ConfigError
from tfnmt.serving import backends

SOURCES = ["the red dog sees a bird", "a cat", "the old man runs", "big house", "a dog sees"]


def test_the_table_ranks_a_source_pieces_partners_and_keeps_every_reference_piece():
    # Source 5 shares target 9 with it in three pairs, 8 in two, 7 in one; 10 is everywhere.
    source = [[5, 6], [5], [5, 6], [6], [5]]
    target = [[9, 8, 10], [9, 10], [9, 8, 7, 10], [11, 10], [10]]
    table = shortlist.build(source, target, 12, 12, same_piece=np.arange(12) - 1)
    frequent = shortlist.FREQUENT
    assert table.shape == (12, frequent + shortlist.MAX_PER_SOURCE + 1)
    # The most frequent target pieces first (10 in five pairs, 9 in three, ...), every row alike.
    assert table[5, :5].tolist() == [10, 9, 8, 7, 11] and (table[:, :5] == table[5, :5]).all()
    assert table[5, -1] == 4 and table[0, -1] == -1  # the same piece's id (-1: none)
    # Every target piece of every pair is in its source pieces' rows.
    for s_ids, t_ids in zip(source, target):
        for s in s_ids:
            assert set(t_ids) <= set(shortlist.limit(table, 1)[s].tolist())


def test_beyond_the_frequent_pieces_a_row_ranks_by_shared_pairs(monkeypatch):
    monkeypatch.setattr(shortlist, "FREQUENT", 1)
    source = [[5], [5], [5], [6]]
    target = [[4, 9, 8], [4, 9, 7], [4, 9], [4, 11]]
    table = shortlist.build(source, target, 12, 12)
    assert table[5, :4].tolist() == [4, 9, 7, 8]  # 4 frequent; 9 in 3 pairs; 7, 8 by id
    assert table[6, :2].tolist() == [4, 11] and table[7, 1] == -1
    assert shortlist.limit(table, 2)[5].tolist() == [4, 9, 7, -1]


def test_a_batchs_candidates_are_sorted_and_start_with_pad_unk_bos_eos():
    table = tf.constant([[-1, -1], [-1, -1], [-1, -1], [-1, -1], [9, 7], [7, 12]], tf.int32)
    ids = shortlist.candidates(tf.constant([[4, 5, 0], [4, 0, 0]]), table, 10)
    assert ids.numpy().tolist() == [0, 1, 2, 3, 7, 9]  # 12 is no target id: left out


@pytest.fixture(scope="module")
def translators(trained_model):
    options = DecodingOptions(beam_size=1, length_penalty=0.0)
    _, full = backends.from_checkpoint(trained_model, options=options)
    return options, full


def _ids(translator, sentences):
    source, lengths = translator.tokenize(tf.constant(sentences))
    ids, _ = translator.search(source, lengths)
    return source, ids.numpy()


def _table(source_size, ids):
    """A table (build's layout) whose every row holds `ids`."""
    table = np.full((source_size, shortlist.FREQUENT + shortlist.MAX_PER_SOURCE + 1), -1,
                    np.int32)
    table[:, :len(ids)] = ids
    return table


def test_candidates_that_hold_the_full_searchs_choices_decode_the_same(translators):
    options, full = translators
    _, chosen = _ids(full, SOURCES)
    used = sorted(set(chosen.ravel().tolist()) - {0})
    table = _table(full.source_vocab.size, used)
    translator = type(full)(full.model, full.source_vocab, full.target_vocab,
                            dataclasses.replace(options, shortlist=1), table)
    source, restricted = _ids(translator, SOURCES)
    size = int(translator.model.candidates(source).shape[0])
    assert size < full.target_vocab.size  # a real restriction
    assert np.array_equal(restricted, chosen)


@pytest.mark.slow
def test_beam_search_over_every_piece_equals_the_whole_vocabulary(translators):
    options, full = translators
    beam = dataclasses.replace(options, beam_size=3, length_penalty=0.6)
    whole = full.with_options(beam)
    everything = _table(full.source_vocab.size, list(range(full.target_vocab.size)))
    translator = type(full)(full.model, full.source_vocab, full.target_vocab,
                            dataclasses.replace(beam, shortlist=1), everything)
    expected = whole.translate(tf.constant(SOURCES))
    got = translator.translate(tf.constant(SOURCES))
    assert got["translations"].numpy().tolist() == expected["translations"].numpy().tolist()
    np.testing.assert_allclose(got["scores"].numpy(), expected["scores"].numpy(), atol=1e-5)


@pytest.mark.slow
def test_the_table_comes_from_the_training_pairs_and_the_export_decodes_as_in_process(
        trained_model, tmp_path):
    options = DecodingOptions(beam_size=2, shortlist=5)
    _, translator = backends.from_checkpoint(trained_model, options=options)
    import os
    assert os.path.isfile(os.path.join(trained_model, shortlist.CACHE_FILE))
    expected = translator.translate(tf.constant(SOURCES))["translations"].numpy().tolist()
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={tmp_path}",
                   "--beam_size=2", "--shortlist=5", "--export_name=s") == 0
    from tfnmt.exporters.saved_model import SavedModelTranslator
    exported = SavedModelTranslator(str(tmp_path / "s" / "1"))
    assert exported.translate(tf.constant(SOURCES))["translations"].numpy().tolist() == expected


def test_refusals_are_one_line():
    with pytest.raises(ConfigError, match="--xla_decoding: not with --shortlist"):
        DecodingOptions(xla_decoding=True, shortlist=5)
