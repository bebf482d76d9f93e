"""Chunked translation of sources longer than the encoder's window (tfnmt/decoding/chunking.py)."""

import numpy as np
import pytest
import tensorflow as tf

from conftest import _WORDS
from tfnmt.data.vocab import EOS_ID, PAD_ID, Vocab, train_sentencepiece
from tfnmt.decoding import chunking
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.batches import translate_sentences
from tfnmt.decoding.translator import Translator
from tfnmt.errors import DataError
from tfnmt.models.base import Seq2SeqModel


def test_chunks_are_balanced_eos_terminated_and_cover_the_source():
    lengths = tf.constant([70, 5, 0, 31, 32])
    source = np.zeros([5, 71], np.int32)
    for row, n in enumerate(lengths.numpy()):
        source[row, :n] = 100 * row + np.arange(4, 4 + n)
        source[row, n] = EOS_ID
    chunks, chunk_lengths, sentence = chunking.split(tf.constant(source), lengths, 32)
    assert chunks.shape[1] == 32
    assert chunk_lengths.numpy().tolist() == [24, 24, 22, 5, 0, 31, 16, 16]
    assert sentence.numpy().tolist() == [0, 0, 0, 1, 2, 3, 4, 4]
    for row, n in zip(chunks.numpy(), chunk_lengths.numpy()):
        assert row[n] == EOS_ID and (row[n + 1:] == PAD_ID).all()
    # Joining the chunks' tokens gives back every source exactly.
    tokens = tf.where(tf.equal(chunks, EOS_ID), PAD_ID, chunks)
    joined, scores = chunking.join(tokens, tf.ones([8]), sentence, 5)
    for row, n in enumerate(lengths.numpy()):
        assert joined[row].numpy()[:n].tolist() == source[row, :n].tolist()
        assert (joined[row].numpy()[n:] == PAD_ID).all()
    assert scores.numpy().tolist() == [3, 1, 1, 1, 2]


class EchoModel(Seq2SeqModel):
    """Translates a source into itself: proves that every chunk reaches the output, in order."""
    source_window = 32

    def encode(self, source, training=False):
        tf.debugging.assert_less_equal(tf.shape(source)[1], self.source_window)
        return {"source": source}

    def initial_state(self, memory):
        return {"position": tf.zeros([tf.shape(memory["source"])[0]], tf.int32)}

    def step(self, ids, time, state, memory):
        position = state["position"]
        token = tf.gather(memory["source"], position, batch_dims=1)
        logits = tf.one_hot(token, self.target_vocab_size, on_value=10.0, off_value=-10.0)
        return logits, {"position": position + 1}


@pytest.fixture(scope="module")
def word_vocab(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("vocab") / "spm.model")
    train_sentencepiece([" ".join(_WORDS)] * 20, path, 30, model_type="word")
    return Vocab.from_file(path)


def test_chunked_translation_of_a_70_token_source_covers_all_of_it(word_vocab):
    rng = np.random.default_rng(0)
    long = " ".join(rng.choice(_WORDS, 70))
    sentences = [long, "the red cat", "", " ".join(rng.choice(_WORDS, 40))]
    model = EchoModel(word_vocab.size, word_vocab.size)
    translator = Translator(model, word_vocab, word_vocab, DecodingOptions(beam_size=2))
    assert len(word_vocab.encode(long)) == 70
    out = translator.translate(tf.constant(sentences))
    assert [t.decode() for t in out["translations"].numpy()] == sentences
    source, lengths = translator.tokenize(tf.constant(sentences[:2]))
    chunks, _, sentence = chunking.split(source, lengths, 32)
    assert sentence.numpy().tolist() == [0, 0, 0, 1]
    assert translate_sentences(translator, sentences, batch_size=3) == sentences


def test_long_input_error_refuses_instead_of_chunking(word_vocab):
    model = EchoModel(word_vocab.size, word_vocab.size)
    translator = Translator(model, word_vocab, word_vocab, DecodingOptions(beam_size=2, long_input="error"))
    assert translate_sentences(translator, ["the red cat"], 4) == ["the red cat"]
    with pytest.raises(DataError, match="longer than the source window of the model"):
        translate_sentences(translator, ["the red cat", " ".join(["dog"] * 40)], 4)
