"""Target prefixes (decoding/beam_search.py `step_log_probs`, Translator.prefix_signature): the
prefix's tokens are forced, the search continues from them, and the text starts with the prefix
as given."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from contract import tiny_model
from tfnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from tfnmt.decoding import searches
from tfnmt.decoding.beam_search import length_penalty, max_lengths
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.shared import split_shared, with_shared
from tfnmt.errors import ConfigError
from tfnmt.exporters import saved_model

# Limits short enough for untrained models to reach them, long enough for some to end first.
OPTIONS = DecodingOptions(beam_size=1, max_length_ratio=1.0, max_length_offset=3,
                          max_decode_length=12)
SOURCE = [[5, 9, 11, 7, EOS_ID], [6, EOS_ID, PAD_ID, PAD_ID, PAD_ID], [8, 8, 12, EOS_ID, PAD_ID]]
# Per sentence, of different lengths in one batch: none, two tokens, five (past the source's
# own limit of 1 + 3: the limit counts after the prefix).
PREFIX = [[], [14, 20], [30, 31, 32, 33, 34]]


def _padded(rows):
    width = max(map(len, rows))
    return tf.constant([row + [PAD_ID] * (width - len(row)) for row in rows], tf.int32)


def teacher_forced_greedy(model, source, lengths, prefixes, options):
    """By hand, one sentence at a time through the model's `step`: the prefix's tokens fed,
    then the most likely token until eos or the limit (the prefix's length plus the source's
    limit). [(ids, log-probability of ids and eos)] per sentence."""
    memory, shared = split_shared(model.decoding_memory(model.encode(source, training=False)))
    results = []
    for row, prefix in enumerate(prefixes):
        rows = with_shared(tf.nest.map_structure(lambda t: t[row:row + 1], memory), shared)
        state = model.initial_state(rows)
        limit = len(prefix) + int(max_lengths(lengths[row:row + 1], options.max_length_ratio,
                                              options.max_length_offset,
                                              options.max_decode_length)[0])
        last, ids, log_prob = BOS_ID, [], 0.0
        for time in range(limit):
            logits, state = model.step(tf.constant([last]), tf.constant(time), state, rows)
            log_probs = tf.nn.log_softmax(tf.cast(logits[0], tf.float32)).numpy()
            if time < len(prefix):
                token = prefix[time]
            elif time + 1 >= limit:
                token = EOS_ID
            else:
                log_probs[[PAD_ID, BOS_ID]] = -np.inf
                if time < min(options.min_decode_length, limit - 1):
                    log_probs[EOS_ID] = -np.inf
                token = int(np.argmax(log_probs))
            log_prob += float(log_probs[token])
            if token == EOS_ID:
                break
            ids.append(token)
            last = token
        results.append((ids, log_prob))
    return results


def _search(model, options, prefixes=PREFIX, n_best=1):
    source = tf.constant(SOURCE, tf.int32)
    lengths = tf.reduce_sum(tf.cast(source > EOS_ID, tf.int32), axis=1)
    searcher = searches.for_model(model, options)
    if getattr(searcher, "compiled", False):
        ids, scores = searcher.encode_and_search(model, source, lengths, n_best,
                                                 prefix=_padded(prefixes))
    else:
        ids, scores = searcher(model, model.encode(source, training=False), lengths, n_best,
                               prefix=_padded(prefixes))
    return source, lengths, ids.numpy(), scores.numpy()


def _real(row):
    return [int(t) for t in row if t != PAD_ID]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["transformer", "densenmt", "deeplau"])
def test_the_continuation_is_teacher_forced_greedy_decoding(name):
    """K/V caches, a convolution's window of inputs, a recurrent state: each continues from the
    prefix it was fed. The score counts the prefix's tokens, as `score` of the whole text does."""
    tf.keras.utils.set_random_seed(2)
    model = tiny_model(name, label_smoothing=None)
    source, lengths, ids, scores = _search(model, OPTIONS)
    expected = teacher_forced_greedy(model, source, lengths, PREFIX, OPTIONS)
    for row, (want, log_prob) in enumerate(expected):
        assert _real(ids[row, 0]) == want, row
        assert want[:len(PREFIX[row])] == PREFIX[row]
        penalty = length_penalty(len(want) + 1, OPTIONS.length_penalty,
                                 OPTIONS.length_penalty_mode).numpy()
        assert scores[row, 0] == pytest.approx(log_prob / penalty, abs=1e-4)
    # No prefix at all decodes as before.
    plain = _search(model, OPTIONS, prefixes=[[], [], []])[2]
    unforced = searches.for_model(model, OPTIONS)(model, model.encode(source, training=False),
                                                  lengths)[0].numpy()
    np.testing.assert_array_equal(plain[..., :unforced.shape[-1]], unforced)


@pytest.mark.slow
def test_every_beam_hypothesis_sampling_and_the_compiled_search_keep_the_prefix():
    tf.keras.utils.set_random_seed(4)
    model = tiny_model("transformer", label_smoothing=None)
    beam = dataclasses.replace(OPTIONS, beam_size=3, n_best=3)
    _, _, ids, scores = _search(model, beam, n_best=3)
    for row, prefix in enumerate(PREFIX):
        for hypothesis in ids[row]:
            assert _real(hypothesis)[:len(prefix)] == prefix
        assert scores[row, 0] >= scores[row, 1] >= scores[row, 2] > -1e3
    sampled = _search(model, dataclasses.replace(OPTIONS, sampling=True, sampling_seed=3))[2]
    assert all(_real(sampled[row, 0])[:len(p)] == p for row, p in enumerate(PREFIX))
    # The compiled greedy search (its beam forces through the same `step_log_probs`), over a
    # model that XLA compiles in half the Transformer's time.
    model = tiny_model("deeplau", label_smoothing=None)
    dynamic = _search(model, OPTIONS)
    xla = _search(model, dataclasses.replace(OPTIONS, xla_decoding=True))
    np.testing.assert_array_equal(xla[2][..., :dynamic[2].shape[-1]], dynamic[2])
    np.testing.assert_allclose(xla[3], dynamic[3], atol=1e-4)


@pytest.mark.slow
def test_a_ctc_model_refuses_a_prefix_in_one_line(trained_model):
    """Its labels are chosen all at once: the search, the translator (so the CLI, which says
    `tfnmt translate: error: ` and the line), the API and the export refuse."""
    from tfnmt import Translator, UnsupportedError
    from tfnmt import model_dir as model_dir_lib
    from tfnmt.decoding.translator import Translator as DecodingTranslator
    model = tiny_model("ctc_nat", label_smoothing=None)
    refusal = ("target prefix: not for model 'ctc_nat', whose labels are chosen all at once "
               "rather than each after the ones before")
    with pytest.raises(ConfigError, match=refusal):
        _search(model, OPTIONS)
    _, _, source_vocab, target_vocab = model_dir_lib.load(trained_model)
    inner = DecodingTranslator(model, source_vocab, target_vocab)
    with pytest.raises(UnsupportedError, match=refusal):
        Translator(inner, options=inner.options).translate(["a cat"], target_prefix=["Katze"])
    with pytest.raises(ConfigError, match=refusal):
        saved_model.signatures(inner, prefix=True)

SOURCES = ["the red dog sees a bird", "a cat", "the old man runs", "big house", ""]
# A word of the vocabulary; one with two trailing spaces; an unknown word (SentencePiece's
# piece for it detokenizes as " ⁇ "); none; a prefix of an empty source.
PREFIXES = ["Vogel", "Katze  ", "Zebra Mann", "", "Haus"]


@pytest.mark.slow
def test_the_prefix_is_kept_verbatim_and_the_rest_is_teacher_forced_greedy(trained_model):
    from tfnmt import Translator
    from tfnmt.serving.backends import from_checkpoint
    config, inner = from_checkpoint(trained_model, "", DecodingOptions(beam_size=1))
    translator = Translator(inner, config, inner.options)
    out = translator.translate(SOURCES, target_prefix=PREFIXES, batch_size=3)
    plain = translator.translate(SOURCES)
    source, lengths = inner.tokenize(tf.constant(SOURCES))
    pieces = inner.target_tokenizer.tokenize(tf.constant(PREFIXES)).to_list()
    expected = teacher_forced_greedy(inner.model, source, lengths, pieces, inner.options)
    detokenize = inner.target_tokenizer.detokenize
    for i, (prefix, (ids, log_prob)) in enumerate(zip(PREFIXES, expected)):
        if not SOURCES[i]:
            assert (out[i].text, out[i].score) == (prefix, 0.0)
            continue
        assert out[i].text.startswith(prefix)
        whole = detokenize(tf.constant([ids])).numpy()[0].decode()
        forced = detokenize(tf.constant([pieces[i]], tf.int32)).numpy()[0].decode() if prefix else ""
        rest = whole[len(forced):]
        if prefix[-1:].isspace():
            rest = rest.removeprefix(" ")
        assert out[i].text == prefix + rest, i
        penalty = length_penalty(len(ids) + 1, inner.options.length_penalty,
                                 inner.options.length_penalty_mode).numpy()
        assert out[i].score == pytest.approx(log_prob / penalty, abs=1e-4)
    assert out[1].text.startswith("Katze  ") and out[1].text[7] != " "
    assert out[2].text.startswith("Zebra Mann") and "⁇" not in out[2].text
    assert (out[3].text, out[3].score) == pytest.approx((plain[3].text, plain[3].score), abs=1e-5)
