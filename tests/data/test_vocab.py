import sentencepiece as spm
import pytest
import tensorflow as tf

from conftest import synthetic_pairs
from tfnmt.data import vocab
from tfnmt.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def spm_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("vocab") / "spm.model")
    sentences = [s for pair in synthetic_pairs(300) for s in pair]
    size = vocab.train_sentencepiece(sentences, path, vocab_size=80, model_type="bpe")
    assert size == 80
    return path


def test_reserved_ids_and_in_graph_tokenizer_match_python(spm_path):
    v = vocab.Vocab.from_file(spm_path)
    assert v._processor.id_to_piece(0) == "<pad>" and v._processor.eos_id() == vocab.EOS_ID
    text = ["the red dog sees a bird", "Katze läuft"]
    ragged = v.tokenizer().tokenize(tf.constant(text))
    assert ragged.to_list() == [v.encode(t) for t in text]
    assert v.tokenizer().detokenize(ragged).numpy().tolist() == [t.encode() for t in text]


def test_soft_limit_on_tiny_corpus(tmp_path):
    path = str(tmp_path / "spm.model")
    size = vocab.train_sentencepiece(["a b c", "b c d"] * 5, path, vocab_size=5000)
    assert 4 < size < 5000


def test_foreign_sentencepiece_model_is_rejected(tmp_path):
    prefix = str(tmp_path / "foreign")
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["a b c d e f"] * 20), model_prefix=prefix,
                                   vocab_size=10, minloglevel=2)
    with pytest.raises(ConfigError, match="pad=0 unk=1 bos=2 eos=3"):
        vocab.Vocab.from_file(prefix + ".model")


def test_missing_and_garbage_files(tmp_path):
    with pytest.raises(DataError, match="vocabulary not found"):
        vocab.Vocab.from_file(str(tmp_path / "none.model"))
    (tmp_path / "bad.model").write_bytes(b"not a model")
    with pytest.raises(DataError, match="not a SentencePiece model"):
        vocab.Vocab.from_file(str(tmp_path / "bad.model"))
    with pytest.raises(DataError, match="run `tfnmt vocab"):
        vocab.load_vocabs(str(tmp_path))
