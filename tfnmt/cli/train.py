"""tfnmt train: train (or resume) a model; builds the vocabulary first if there is none.

With --distribution=multi_worker every worker runs this same command (TF_CONFIG tells them
apart); the vocabulary must exist before, so that the workers do not race to build it."""

import os
import shutil

from absl import logging

from tfnmt import model_dir as model_dir_lib
from tfnmt.cli import common, evaluate, hparams as hparam_flags, vocab
from tfnmt.cli.flags import FLAGS
from tfnmt.data import vocab as vocab_lib
from tfnmt.errors import ConfigError, DataError
from tfnmt.models import catalog
from tfnmt.training import checkpoints, distribution
from tfnmt.training.trainer import train


def config_from_flags(build_vocab=True):
    """(model config, data spec) from the flags and what --model_dir already holds.

    A model directory that was trained before keeps its architecture: hyper-parameters not given
    on the command line come from its config.json. The vocabulary is trained if missing.
    """
    common.require("model_dir")
    saved = (model_dir_lib.read_config(FLAGS.model_dir)
             if os.path.isfile(model_dir_lib.config_path(FLAGS.model_dir)) else None)
    model_name = FLAGS.model or (saved or {}).get("model")
    if not model_name:
        common.require("model")
    cls = catalog.get(model_name)
    hparams = hparam_flags.from_flags(cls)
    if saved and not FLAGS.model:
        hparams = dict(saved["hparams"], **{k: v for k, v in hparams.items() if FLAGS[k].present})
    spec = common.data_spec(saved)
    try:
        source_vocab, target_vocab = vocab_lib.load_vocabs(FLAGS.model_dir)
    except DataError:
        if not copy_vocab_of_init_from():
            if not build_vocab:
                raise ConfigError(f"no vocabulary in {FLAGS.model_dir}: with --distribution="
                                  f"{FLAGS.distribution}, build it first with `tfnmt vocab` and "
                                  "the same flags") from None
            logging.info("no vocabulary in %s yet: training one", FLAGS.model_dir)
            vocab.build_vocab(FLAGS.model_dir, spec, common.splits(spec)[0], FLAGS.train_limit)
        source_vocab, target_vocab = vocab_lib.load_vocabs(FLAGS.model_dir)
    data = {"data": spec.source, "source_lang": spec.source_lang, "target_lang": spec.target_lang}
    config = model_dir_lib.new_config(model_name, hparams, source_vocab, target_vocab,
                                      FLAGS.label_smoothing, data)
    return config, spec


def copy_vocab_of_init_from():
    """A warm-started model must read the same subwords as the model it starts from: a new
    model directory takes the vocabulary of --init_from's model directory when there is one."""
    if not FLAGS.init_from:
        return False
    _, source_dir = checkpoints.resolve_init_from(FLAGS.init_from)
    try:
        paths = sorted(set(vocab_lib.vocab_paths(source_dir))) if source_dir else []
    except DataError:
        paths = []
    if not paths:
        return False
    os.makedirs(FLAGS.model_dir, exist_ok=True)
    for path in paths:
        shutil.copyfile(path, os.path.join(FLAGS.model_dir, os.path.basename(path)))
        logging.info("vocabulary of --init_from copied: %s", path)
    return True


def run():
    # First: a multi-worker strategy must be set up before TensorFlow runs any op.
    strategy = distribution.make_strategy(FLAGS.distribution)
    config, spec = config_from_flags(build_vocab=FLAGS.distribution != "multi_worker")
    train_split, valid_split, test_split = common.splits(spec)
    options = common.train_options()
    train(FLAGS.model_dir, config, spec, (train_split, valid_split),
          (FLAGS.train_limit, FLAGS.valid_limit), options, common.decode_options(), strategy)
    if FLAGS.evaluate_at_end and test_split and distribution.is_chief(strategy):
        evaluate.run()
