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


def test_vocab_reads_each_line_once_in_one_pass_and_samples_vocab_max_sentences(tmp_path,
                                                                               monkeypatch):
    """`tfnmt vocab` streams the corpus once, every line of both sides in order (more pairs
    than tfnmt pulls from tf.data at a time), and SentencePiece keeps a shuffled sample of
    --vocab_max_sentences of them (its reservoir), not the whole corpus."""
    from conftest import run_cli, write_corpus
    from tfnmt.data import sources
    corpus = write_corpus(str(tmp_path / "c"), splits=(("train", 5000),))
    read, train = [], spm.SentencePieceTrainer.train

    def recording(**kwargs):
        read.append(kwargs["input_sentence_size"])
        read.append(kwargs["shuffle_input_sentence"])

        def counted(sentences):
            for sentence in sentences:
                read.append(sentence)
                yield sentence
        return train(**dict(kwargs, sentence_iterator=counted(kwargs["sentence_iterator"])))
    monkeypatch.setattr(spm.SentencePieceTrainer, "train", recording)
    assert sources._PULLED < 5000
    assert run_cli("vocab", f"--model_dir={tmp_path / 'm'}", f"--data=text:{corpus}",
                   "--source_lang=en", "--target_lang=de", "--vocab_size=40",
                   "--vocab_type=word", "--vocab_max_sentences=300") == 0
    en = open(f"{corpus}/train.en", encoding="utf-8").read().splitlines()
    de = open(f"{corpus}/train.de", encoding="utf-8").read().splitlines()
    assert read[:2] == [300, True]
    assert read[2:] == [s for pair in zip(en, de) for s in pair]
    assert vocab.Vocab.from_file(str(tmp_path / "m" / vocab.JOINT_FILE)).size > 4
