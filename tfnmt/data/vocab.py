"""SentencePiece vocabularies: trained with `sentencepiece`, applied in-graph with tensorflow-text.

Reserved ids are the same for every model: pad 0, unk 1, bos 2, eos 3.
"""

import io
import os

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text

from tfnmt.errors import DataError, ConfigError
from tfnmt.data.options import VocabOptions

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
JOINT_FILE = "spm.model"
SOURCE_FILE = "spm.source.model"
TARGET_FILE = "spm.target.model"


def train_sentencepiece(sentences, path, vocab_size, model_type=VocabOptions.vocab_type,
                        character_coverage=1.0, max_sentences=VocabOptions.vocab_max_sentences,
                        seed=1234):
    """Trains a SentencePiece model on an iterable of str and writes it to `path`.

    The vocabulary size is a soft limit so that tiny corpora (tests, slices) still train;
    the size actually reached is returned.
    """
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
            input_sentence_size=max_sentences,
            shuffle_input_sentence=True,
            hard_vocab_limit=False,
            num_threads=os.cpu_count() or 1,
            minloglevel=2,
        )
    except RuntimeError as e:
        raise DataError(f"SentencePiece training failed: {str(e).strip().splitlines()[-1]}") from None
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(model.getvalue())
    os.replace(tmp, path)
    return Vocab.from_file(path).size


class Vocab:
    """A SentencePiece model usable in Python and inside a TF graph."""

    def __init__(self, proto):
        self.proto = proto
        self._processor = spm.SentencePieceProcessor(model_proto=proto)
        if (self._processor.pad_id(), self._processor.unk_id(), self._processor.bos_id(),
                self._processor.eos_id()) != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise ConfigError("SentencePiece model must reserve pad=0 unk=1 bos=2 eos=3 "
                              "(train it with `tfnmt vocab`)")
        self.size = self._processor.get_piece_size()

    @classmethod
    def from_file(cls, path):
        if not os.path.isfile(path):
            raise DataError(f"vocabulary not found: {path} (run `tfnmt vocab` first)")
        with open(path, "rb") as f:
            proto = f.read()
        try:
            return cls(proto)
        except RuntimeError:
            raise DataError(f"not a SentencePiece model: {path}") from None

    def tokenizer(self):
        """A fresh in-graph tokenizer (a trackable resource: create one per tf.Module)."""
        return tf_text.SentencepieceTokenizer(model=self.proto, out_type=tf.int32)

    def encode(self, text):
        return self._processor.encode(text)

    def decode(self, ids):
        return self._processor.decode(ids)

    def pieces(self):
        """Every piece, in id order."""
        return [self._processor.id_to_piece(i) for i in range(self.size)]


def vocab_paths(model_dir):
    """(source path, target path) of the model's vocabularies; equal for a joint vocabulary."""
    joint = os.path.join(model_dir, JOINT_FILE)
    if os.path.isfile(joint):
        return joint, joint
    source, target = os.path.join(model_dir, SOURCE_FILE), os.path.join(model_dir, TARGET_FILE)
    if os.path.isfile(source) and os.path.isfile(target):
        return source, target
    raise DataError(f"no vocabulary in {model_dir}: run `tfnmt vocab --model_dir={model_dir}` first")


def load_vocabs(model_dir):
    source_path, target_path = vocab_paths(model_dir)
    source = Vocab.from_file(source_path)
    return source, (source if target_path == source_path else Vocab.from_file(target_path))
