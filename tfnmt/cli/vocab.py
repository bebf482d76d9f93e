"""tfnmt vocab: train the SentencePiece model(s) into the model directory."""

import os

from absl import logging

from tfnmt.cli import common, console
from tfnmt.cli.flags import read, read_fields
from tfnmt.cli.options import ModelDirOptions
from tfnmt.data import sources, vocab
from tfnmt.data.options import DataOptions, VocabOptions
from tfnmt.training.options import TrainOptions


def _train(sentences, path, what, options):
    """Trains one SentencePiece model; a bar (progress lines in a log file) counts the sentences
    read and then says that SentencePiece is training."""
    bar = console.progress_bar(unit="sent", desc=f"{what}: reading")

    def counted():
        read = shown = 0
        for read, sentence in enumerate(sentences, start=1):
            yield sentence
            # A bar's update costs more than a sentence's reading: the first sentence shows
            # that reading has started, then every 4,096th.
            if read == 1 or read - shown >= 4096:
                bar.update(read - shown)
                shown = read
        bar.update(read - shown)
        bar.set_description(f"{what}: training SentencePiece")

    try:
        size = vocab.train_sentencepiece(counted(), path, **options)
    finally:
        bar.close()
    logging.info("%s of %d pieces: %s", what, size, path)


def build_vocab(model_dir, spec, split, limit, chosen, seed):
    """Trains the vocabulary `chosen` (VocabOptions) with `seed` (--seed) into model_dir."""
    os.makedirs(model_dir, exist_ok=True)
    options = dict(vocab_size=chosen.vocab_size, model_type=chosen.vocab_type,
                   max_sentences=chosen.vocab_max_sentences, seed=seed)
    if chosen.joint_vocab:
        _train(sources.sentences(spec, split, limit), os.path.join(model_dir, vocab.JOINT_FILE),
               "joint vocabulary", options)
        return
    for side, name in (("source", vocab.SOURCE_FILE), ("target", vocab.TARGET_FILE)):
        _train(sources.sentences(spec, split, limit, sides=(side,)), os.path.join(model_dir, name),
               f"{side} vocabulary", options)


def run():
    model_dir, data = read(ModelDirOptions).model_dir, read(DataOptions)
    common.require(model_dir=model_dir)
    common.check_output_dir(model_dir, "model_dir")
    spec = common.data_spec(data)
    build_vocab(model_dir, spec, common.splits(data, spec)[0], data.train_limit,
                read(VocabOptions), read_fields(TrainOptions, ("seed",))["seed"])
