"""Ensembles (decoding/ensemble.py): several models with one vocabulary decoded as one, their
step log-probabilities averaged. The members are tiny untrained models with seeded weights, so
that their distributions are peaked and differ."""

import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import run_cli
from contract import tiny_model
from tfnmt import Translator
from tfnmt import model_dir as model_dir_lib
from tfnmt.data.vocab import (BOS_ID, EOS_ID, JOINT_FILE, PAD_ID, load_vocabs,
                              train_sentencepiece)
from tfnmt.decoding.beam_search import max_lengths
from tfnmt.decoding.shared import split_shared, with_shared
from tfnmt.exporters import saved_model
from tfnmt.serving import backends
from tfnmt.training.checkpoints import Checkpoints, trackables

SOURCES = ["the red dog sees a bird", "a cat", "big house", "", "a small green car sees the woman"]


def _write_model_dir(directory, name, vocab_file, seed, std=None):
    """A model directory as `tfnmt train` leaves one: `name` at its TINY size, with seeded
    initial weights or, with `std`, weights drawn from a normal (wide: peaked distributions)."""
    os.makedirs(directory)
    shutil.copy(vocab_file, os.path.join(directory, JOINT_FILE))
    size = load_vocabs(directory)[0].size
    keras.utils.set_random_seed(seed)
    model = tiny_model(name, size, size)
    model.build_with_dummy_batch()
    rng = np.random.default_rng(seed)
    for variable in sorted(model.weights, key=lambda v: v.path):
        if variable.trainable and std:
            variable.assign(rng.normal(0.0, std, variable.shape).astype(variable.dtype))
    model_dir_lib.write_config(directory, {
        "model": name, "hparams": model.hparams, "source_vocab_size": size,
        "target_vocab_size": size,
        "data": "text:none"})
    Checkpoints(directory, trackables(model)).save(1)
    return directory


@pytest.fixture(scope="module")
def dirs(corpus, tmp_path_factory):
    """{role: model directory}: two members of different families (a, b), a CTC model and a
    Transformer with another vocabulary. An untrained Transformer says one word whatever the
    source; b, a DeepLAU, does not."""
    base = tmp_path_factory.mktemp("ensemble")
    lines = []
    for lang in ("en", "de"):
        with open(os.path.join(corpus, f"train.{lang}"), encoding="utf-8") as f:
            lines += f.read().splitlines()
    vocab, other = str(base / "spm.model"), str(base / "other.model")
    train_sentencepiece(lines, vocab, 60, model_type="word")
    train_sentencepiece(lines, other, 40, model_type="word")
    return {"a": _write_model_dir(str(base / "a"), "transformer", vocab, 1, std=0.5),
            "b": _write_model_dir(str(base / "b"), "deeplau", vocab, 2),
            "ctc": _write_model_dir(str(base / "ctc"), "ctc_nat", vocab, 3),
            "other_vocab": _write_model_dir(str(base / "other"), "transformer", other, 4)}


def _pairs(results):
    return [(t.text, t.score) for r in results for t in (r if isinstance(r, list) else [r])]


def _assert_same(mine, theirs, atol=1e-5):
    assert [text for text, _ in theirs] == [text for text, _ in mine]
    assert [score for _, score in theirs] == pytest.approx([s for _, s in mine], abs=atol)


# Random members decode to the length limit: a low one keeps the tests short.
DECODING = dict(beam_size=3, max_decode_length=8)


@pytest.fixture(scope="module")
def pair(dirs):
    """The ensemble of a and b, in process."""
    return Translator.from_model_dir([dirs["a"], dirs["b"]], **DECODING)


@pytest.mark.slow
def test_an_ensemble_of_a_model_with_itself_is_the_model(dirs):
    b = dirs["b"]
    single = Translator.from_model_dir(b, n_best=2, **DECODING)
    # Two checkpoints of one directory: '' and "last" are both its latest.
    twice = Translator.from_model_dir(b, checkpoint=["", "last"], n_best=2, **DECODING)
    expected = _pairs(single.translate(SOURCES))
    assert len({text for text, _ in expected}) > 3  # the translations differ between sources
    _assert_same(expected, _pairs(twice.translate(SOURCES)))


def _members_and_ensemble(dirs, **decoding):
    from tfnmt.decoding.options import DecodingOptions
    options = DecodingOptions(**decoding)
    members = [backends.from_checkpoint(dirs[role], "", options)[1] for role in ("a", "b")]
    ensemble = backends.from_checkpoint([dirs["a"], dirs["b"]], "", options)[1]
    return members, ensemble


# The greedy test's decoding. The step test reads only the models (their steps do not depend on
# the search's options), so both share one set of members and ensemble.
GREEDY = dict(beam_size=1, length_penalty=0.0, min_decode_length=0, max_decode_length=8)


@pytest.fixture(scope="module")
def greedy_members(dirs):
    """(the members a and b, their ensemble), each loaded from its checkpoint once."""
    return _members_and_ensemble(dirs, **GREEDY)


def _start(model, source):
    memory, shared = split_shared(model.decoding_memory(model.encode(source)))
    return model.initial_state(with_shared(memory, shared)), with_shared(memory, shared)


def _step_log_probs(model, last, time, state, memory):
    logits, state = model.step(tf.constant(last, tf.int32), tf.constant(time), state, memory)
    return tf.nn.log_softmax(tf.cast(logits, tf.float32)).numpy().astype(np.float64), state


@pytest.mark.slow
def test_the_ensembles_step_is_the_mean_of_its_members_step_log_probabilities(greedy_members):
    members, ensemble = greedy_members
    source, _ = ensemble.tokenize(tf.constant(SOURCES[:3]))
    # Teacher-forced through a few tokens, every row the same ones.
    tokens = [BOS_ID, 7, 12, 9, 20]
    states = [_start(m.model, source) for m in members]
    state, memory = _start(ensemble.model, source)
    for time, last in enumerate(tokens):
        last = [last] * 3
        expected = []
        for i, member in enumerate(members):
            log_probs, member_state = _step_log_probs(member.model, last, time, *states[i])
            states[i] = (member_state, states[i][1])
            expected.append(log_probs)
        got, state = ensemble.model.step(tf.constant(last, tf.int32), tf.constant(time), state,
                                         memory)
        np.testing.assert_allclose(got.numpy(), (expected[0] + expected[1]) / 2, atol=1e-5)
        # Not one member's, nor renormalised: the mean of log-probabilities sums to less than 1.
        assert np.abs(expected[0] - expected[1]).max() > 0.5
        assert np.exp(got.numpy()).sum(-1).max() < 0.999


def _hand_rolled_greedy(members, source, limit):
    """Greedy search over the mean of the members' step log-probabilities, one sentence."""
    states = [_start(m.model, source) for m in members]
    ids, score, last = [], 0.0, BOS_ID
    for time in range(limit):
        mean = 0.0
        for i, member in enumerate(members):
            log_probs, member_state = _step_log_probs(member.model, [last], time, *states[i])
            states[i] = (member_state, states[i][1])
            mean = mean + log_probs[0] / len(members)
        mean[[PAD_ID, BOS_ID]] = -np.inf
        if time + 1 >= limit:  # eos is forced at the limit
            mean[np.arange(len(mean)) != EOS_ID] = -np.inf
        last = int(np.argmax(mean))
        score += mean[last]
        if last == EOS_ID:
            break
        ids.append(last)
    return ids, score


@pytest.mark.slow
def test_a_greedy_ensemble_follows_the_argmax_of_the_averaged_log_probabilities(greedy_members):
    members, ensemble = greedy_members
    for sentence in SOURCES[:2]:
        source, lengths = ensemble.tokenize(tf.constant([sentence]))
        o = ensemble.options
        limit = int(max_lengths(lengths, o.max_length_ratio, o.max_length_offset,
                                o.max_decode_length)[0])
        expected_ids, expected_score = _hand_rolled_greedy(members, source, limit)
        ids, score = ensemble.translate_ids(source, lengths)
        assert [i for i in ids.numpy()[0].tolist() if i != PAD_ID] == expected_ids
        assert float(score[0]) == pytest.approx(expected_score, abs=1e-4)


@pytest.mark.slow
def test_an_ensembles_score_is_the_mean_of_its_members(dirs, pair):
    a, b = dirs["a"], dirs["b"]
    sources = ["a cat", "big house", "the dog", "a bird"]
    targets = ["Katze Hund", "Haus", "", "rot blau Vogel"]
    members = [[s.log_prob for s in Translator.from_model_dir(path).score(sources, targets)]
               for path in (a, b)]
    assert [s.log_prob for s in pair.score(sources, targets)] == pytest.approx(
        list((np.array(members[0]) + members[1]) / 2), abs=1e-4)


@pytest.mark.slow
def test_an_exported_ensemble_translates_as_in_process(dirs, pair, tmp_path, capsys):
    a, b = dirs["a"], dirs["b"]
    assert run_cli("export", f"--model_dir={a},{b}", f"--export_dir={tmp_path}", "--score",
                   *(f"--{k}={v}" for k, v in DECODING.items())) == 0
    path = capsys.readouterr().out.strip().splitlines()[-1]
    assert path == os.path.join(str(tmp_path), "ensemble", "1")
    members = saved_model.read_export_info(path)["config"]["members"]
    assert [m["model_dir"] for m in members] == [a, b]
    assert [m["config"]["model"] for m in members] == ["transformer", "deeplau"]
    exported = Translator.from_export(path)
    expected = _pairs(pair.translate(SOURCES))
    _assert_same(expected, _pairs(exported.translate(SOURCES)), 1e-4)
    # As TF Serving's loader reads it: a graph-mode Session (`tfnmt serve` loads it as
    # from_export does).
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        signature = tf.compat.v1.saved_model.load(session, ["serve"], path).signature_def[
            "serving_default"]
        out = session.run({k: v.name for k, v in signature.outputs.items()},
                          {signature.inputs["text"].name: SOURCES})
    _assert_same(expected, list(zip([t.decode() for t in out["translations"]],
                                    out["scores"].tolist())), 1e-4)
    targets = [t.text for t in pair.translate(SOURCES)]
    assert [s.log_prob for s in exported.score(SOURCES, targets)] == pytest.approx(
        [s.log_prob for s in pair.score(SOURCES, targets)], abs=1e-4)


@pytest.mark.parametrize("verb, members, flags, message", [
    ("translate", ("a", "other_vocab"), (), "vocabularies differ from those of"),
    ("translate", ("a", "ctc"), (), "model 'ctc_nat' cannot join an ensemble"),
    ("translate", ("a", "b"), ("--alignments=hard",), "--alignments: not for an ensemble"),
    ("translate", ("a", "b"), ("--checkpoint=,,",), "3 checkpoints for 2 model directories"),
    ("export", ("a", "b"), ("--format=tflite",), "--format=tflite: not for an ensemble"),
    ("export", ("a", "b"), ("--format=ctranslate2",), "--format=ctranslate2: not for an "
                                                      "ensemble"),
])
def test_what_cannot_be_an_ensemble_is_one_line(dirs, tmp_path, capsys, verb, members, flags,
                                                message):
    where = f"--model_dir={','.join(dirs[m] for m in members)}"
    extra = (f"--export_dir={tmp_path}",) if verb == "export" else ()
    assert run_cli(verb, where, *extra, *flags) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    assert err[-1].startswith(f"tfnmt {verb}: error: ") and message in err[-1]
