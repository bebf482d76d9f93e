"""--xla_decoding (decoding/compiled.py): the searches compiled by XLA with every shape fixed
stop, freeze and score as the dynamic searches do, for every family's state."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from contract import tiny_model
from tfnmt.data.vocab import EOS_ID, PAD_ID
from tfnmt.decoding import compiled, searches
from tfnmt.decoding.options import DecodingOptions
from tfnmt.errors import ConfigError

# Limits short enough for untrained models to reach them, long enough for some to end first.
OPTIONS = DecodingOptions(max_length_ratio=1.0, max_length_offset=3, max_decode_length=12)


def _sources(count=6, seed=0):
    """int32 [B, S] source ids ending in eos, of lengths 0 to 8, and their lengths."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 9, size=count)
    lengths[0] = 0
    source = np.full([count, lengths.max() + 1], PAD_ID, np.int32)
    for row, n in enumerate(lengths):
        source[row, :n] = rng.integers(4, 50, size=n)
        source[row, n] = EOS_ID
    return tf.constant(source), tf.constant(lengths, tf.int32)


def _both(model, options, n_best=1):
    """(dynamic ids and scores, compiled ids and scores, the compiled ids' width), in graphs
    as a translator runs them; the ids cut to a common width."""
    source, lengths = _sources()
    dynamic = searches.for_model(model, options)
    xla = searches.for_model(model, dataclasses.replace(options, xla_decoding=True))
    assert isinstance(xla, searches.Compiled)
    ids, scores = tf.function(lambda: dynamic(model, model.encode(source), lengths, n_best))()
    xla_ids, xla_scores = tf.function(
        lambda: xla.encode_and_search(model, source, lengths, n_best))()
    width = ids.shape[-1]
    assert not np.any(xla_ids.numpy()[..., width:])  # nothing past the dynamic search's end
    return ((ids.numpy(), scores.numpy()), (xla_ids.numpy()[..., :width], xla_scores.numpy()),
            xla_ids.shape[-1])


@pytest.mark.slow
@pytest.mark.parametrize("name,beam_size,n_best,min_length", [("deep_transformer", 3, 2, 1),
                                                               ("densenmt", 1, 1, 4)])
def test_compiled_search_is_the_dynamic_search(name, beam_size, n_best, min_length):
    """Beam with n-best over fixed caches (multi-layer attention's lower caches too); greedy
    over a state that never grows (DenseNMT's last kernel_size - 1 inputs of each layer); eos
    held back until --min_decode_length tokens."""
    tf.keras.utils.set_random_seed(1)
    model = tiny_model(name, label_smoothing=None)
    options = dataclasses.replace(OPTIONS, beam_size=beam_size, n_best=n_best,
                                  min_decode_length=min_length)
    (ids, scores), (xla_ids, xla_scores), width = _both(model, options, n_best)
    limits = _sources()[1].numpy() + OPTIONS.max_length_offset  # ratio 1
    for best in (ids[:, 0], xla_ids[:, 0]):
        lengths = (best != PAD_ID).sum(axis=1)
        assert np.all(lengths >= np.minimum(min_length, limits - 1)), (lengths, limits)
    # Compiled: as long as the longest limit of the padded source width (ratio 1, offset 3).
    padded = -(-_sources()[0].shape[1] // compiled.SOURCE_BUCKET) * compiled.SOURCE_BUCKET
    assert width == min(OPTIONS.max_decode_length, padded - 1 + 3) > ids.shape[-1]
    np.testing.assert_array_equal(xla_ids, ids)
    np.testing.assert_allclose(xla_scores, scores, atol=1e-4)


@pytest.mark.slow
def test_a_batch_of_more_hypotheses_takes_the_dynamic_search():
    tf.keras.utils.set_random_seed(3)
    model = tiny_model("transformer", label_smoothing=None)
    options = dataclasses.replace(OPTIONS, beam_size=6)  # 6 sentences x 6 > MAX_ROWS
    assert 6 * 6 > searches.Compiled.MAX_ROWS
    (ids, scores), (xla_ids, xla_scores), width = _both(model, options)
    assert width == ids.shape[-1] < 12  # the dynamic search's own length, not the limit's
    np.testing.assert_array_equal(xla_ids, ids)
    np.testing.assert_array_equal(xla_scores, scores)


@pytest.mark.parametrize("asked", [dict(alignments="hard"), dict(sampling=True),
                                   dict(no_repeat_ngram_size=2)])
def test_what_the_compiled_searches_do_not_carry_is_refused(asked):
    with pytest.raises(ConfigError, match="--xla_decoding: not with --"):
        DecodingOptions(xla_decoding=True, **asked)


def test_a_ctc_model_is_refused():
    with pytest.raises(ConfigError, match="--xla_decoding"):
        searches.for_model(tiny_model("ctc_nat", label_smoothing=None),
                           DecodingOptions(xla_decoding=True))


@pytest.mark.slow
def test_an_export_with_xla_decoding_translates_as_the_checkpoint(trained_model, tmp_path):
    """A batch the compiled search takes and one it leaves to the dynamic search: the SavedModel
    gives the checkpoint's translations and scores exactly, and the Transformer's fixed caches
    the dynamic search's translations."""
    from conftest import run_cli, synthetic_pairs
    from tfnmt.exporters.saved_model import SavedModelTranslator
    from tfnmt.serving.backends import from_checkpoint
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={tmp_path}",
                   "--beam_size=2", "--xla_decoding") == 0
    exported = SavedModelTranslator(str(tmp_path / "transformer" / "1"))
    assert exported.options.xla_decoding
    _, checkpoint = from_checkpoint(trained_model, "", exported.options)
    _, dynamic = from_checkpoint(trained_model, "", dataclasses.replace(exported.options,
                                                                        xla_decoding=False))
    sentences = [p[0] for p in synthetic_pairs(20, seed=5)]
    for batch in (sentences[:12], sentences):  # 24 and 40 hypotheses
        ours, theirs, plain = (t.translate(tf.constant(batch))
                               for t in (checkpoint, exported, dynamic))
        assert ours["translations"].numpy().tolist() == theirs["translations"].numpy().tolist()
        np.testing.assert_array_equal(ours["scores"].numpy(), theirs["scores"].numpy())
        assert ours["translations"].numpy().tolist() == plain["translations"].numpy().tolist()
        np.testing.assert_allclose(ours["scores"].numpy(), plain["scores"].numpy(), atol=1e-4)


def test_tflite_and_ctranslate2_exports_refuse_it(trained_model, tmp_path, capsys):
    from conftest import run_cli
    for export_format in ("tflite", "ctranslate2"):
        assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={tmp_path}",
                       f"--format={export_format}", "--xla_decoding") == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--xla_decoding" in err[0], err
