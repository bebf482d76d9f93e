"""tfnmt vocab: train the SentencePiece model(s) into the model directory."""

import os

from absl import logging

from tfnmt.cli import common
from tfnmt.cli.flags import FLAGS
from tfnmt.data import sources, vocab


def build_vocab(model_dir, spec, split, limit):
    os.makedirs(model_dir, exist_ok=True)
    options = dict(vocab_size=FLAGS.vocab_size, model_type=FLAGS.vocab_type,
                   max_sentences=FLAGS.vocab_max_sentences, seed=FLAGS.seed)
    if FLAGS.joint_vocab:
        path = os.path.join(model_dir, vocab.JOINT_FILE)
        size = vocab.train_sentencepiece(sources.sentences(spec, split, limit), path, **options)
        logging.info("joint vocabulary of %d pieces: %s", size, path)
        return
    for side, name in (("source", vocab.SOURCE_FILE), ("target", vocab.TARGET_FILE)):
        path = os.path.join(model_dir, name)
        size = vocab.train_sentencepiece(sources.sentences(spec, split, limit, sides=(side,)), path, **options)
        logging.info("%s vocabulary of %d pieces: %s", side, size, path)


def run():
    common.require("model_dir")
    spec = common.data_spec()
    build_vocab(FLAGS.model_dir, spec, common.splits(spec)[0], FLAGS.train_limit)
