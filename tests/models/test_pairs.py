"""The hybrid of every encoder x decoder pair the part registries allow (contract.PAIRS) decodes
within its length limit, and its SavedModel translates in a fresh process as it does in process:
a newly registered part is exported behind every encoder, or before every decoder, with no other
edit. (The rest of the contract runs over the pairs in test_contract.py; this check has a file
of its own so that the test workers share its time.)"""

from contract import PAIRS, decode_within_the_limit_and_compare_exports, untrained_models


def test_every_pair_decodes_within_the_length_limit_and_its_export_translates_alike_in_a_fresh_process(
        trained_model, tmp_path):
    decode_within_the_limit_and_compare_exports(*untrained_models(trained_model, PAIRS), tmp_path)
