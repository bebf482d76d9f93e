"""The hybrid of every encoder x decoder pair the part registries allow (contract.PAIRS) decodes
within its length limit, and the SavedModels of the pairs that cover the parts no registered
model carries (test_contract.py exports those models) translate in a fresh process as they do in
process: a newly registered part decodes behind every encoder, or before every decoder, and is
exported in a hybrid, with no other edit. Exporting is a part's own concern (its variables and
ops saved, its graph loaded alone), which one model or pair shows; where two parts meet, the
memory they pass, decoding in process shows for every pair. (The rest of the contract runs over
the pairs in test_contract.py; this check has a file of its own so that the test workers share
its time.)"""

import pytest

from contract import (PAIRS, carried_parts, covering, decode_within_the_limit_and_compare_exports,
                      untrained_models)


def test_covering_pairs_are_few_and_name_every_part():
    chosen = covering(PAIRS)
    parts = [pair[len("hybrid:"):].split("+") for pair in PAIRS]
    named = [pair[len("hybrid:"):].split("+") for pair in chosen]
    assert {e for e, _ in named} == {e for e, _ in parts}
    assert {d for _, d in named} == {d for _, d in parts}
    assert len(chosen) <= max(len({e for e, _ in parts}), len({d for _, d in parts})) + 1


def _parts(pairs):
    return {(side, part) for pair in pairs
            for side, part in zip(("encoder", "decoder"), pair[len("hybrid:"):].split("+"))}


def test_the_exported_pairs_name_every_part_no_registered_model_carries():
    carried = carried_parts()
    assert {("encoder", "transformer"), ("decoder", "recurrent")} <= carried
    assert ("decoder", "luong") not in carried  # a hybrid's part only (tests/decoders/test_luong.py)
    chosen = covering(PAIRS, carried)
    assert _parts(PAIRS) - carried <= _parts(chosen) and len(chosen) <= len(_parts(PAIRS) - carried)
    # With every part carried, one pair still exports the hybrid itself.
    assert len(covering(PAIRS, _parts(PAIRS))) == 1


@pytest.mark.slow
def test_every_pair_decodes_within_the_length_limit_and_a_covering_set_exports_alike_in_a_fresh_process(
        trained_model, tmp_path):
    decode_within_the_limit_and_compare_exports(*untrained_models(trained_model, PAIRS), tmp_path,
                                                exported=set(covering(PAIRS, carried_parts())))
