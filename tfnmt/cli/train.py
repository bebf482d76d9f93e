"""tfnmt train: train (or resume) a model; builds the vocabulary first if there is none.

With --distribution=multi_worker every worker runs this same command (TF_CONFIG tells them
apart); the vocabulary must exist before, so that the workers do not race to build it."""

import dataclasses
import os
import shutil

from absl import logging

from tfnmt import model_dir as model_dir_lib
from tfnmt.cli import common, evaluate, hparams as hparam_flags, vocab
from tfnmt.cli.flags import read
from tfnmt.cli.options import ModelDirOptions, ModelOptions, TrainRunOptions
from tfnmt.data import vocab as vocab_lib
from tfnmt.data.options import DataOptions, DataServiceOptions, VocabOptions
from tfnmt.decoding.options import DecodingOptions
from tfnmt.errors import ConfigError, DataError
from tfnmt.models import catalog
from tfnmt.training import checkpoints, distribution
from tfnmt.training.options import TrainOptions
from tfnmt.training.trainer import train


@dataclasses.dataclass(frozen=True)
class NewModel:
    """What a new (or resumed) model directory is made from, as the flags give it."""
    where: ModelDirOptions
    model: ModelOptions
    data: DataOptions
    vocab: VocabOptions
    train: TrainOptions


def new_model_from_flags():
    return NewModel(read(ModelDirOptions), read(ModelOptions), read(DataOptions),
                    read(VocabOptions), read(TrainOptions))


def model_config(new, build_vocab=True, distribution_name="none"):
    """(model config, data spec) from `new` (NewModel) and what its model directory already
    holds.

    A model directory that was trained before keeps its architecture: hyper-parameters not given
    on the command line come from its config.json. The vocabulary is trained if missing.
    """
    model_dir = new.where.model_dir
    common.require(model_dir=model_dir)
    common.check_output_dir(model_dir, "model_dir")
    saved = (model_dir_lib.read_config(model_dir)
             if os.path.isfile(model_dir_lib.config_path(model_dir)) else None)
    model_name = new.model.model or (saved or {}).get("model")
    common.require(model=model_name)
    cls = catalog.get(model_name)
    hparams = hparam_flags.from_flags(cls)
    if saved and not new.model.model:
        given = hparam_flags.set_by_flags(cls)
        hparams = model_dir_lib.renamed(cls, dict(saved["hparams"], **given))
    spec = common.data_spec(new.data, saved)
    try:
        source_vocab, target_vocab = vocab_lib.load_vocabs(model_dir)
    except DataError:
        if not copy_vocab_of_init_from(model_dir, new.train.init_from):
            if not build_vocab:
                raise ConfigError(f"no vocabulary in {model_dir}: with --distribution="
                                  f"{distribution_name}, build it first with `tfnmt vocab` and "
                                  "the same flags") from None
            logging.info("no vocabulary in %s yet: training one", model_dir)
            vocab.build_vocab(model_dir, spec, common.splits(new.data, spec)[0],
                              new.data.train_limit, new.vocab, new.train.seed)
        source_vocab, target_vocab = vocab_lib.load_vocabs(model_dir)
    data = {"data": spec.source, "source_lang": spec.source_lang, "target_lang": spec.target_lang}
    config = model_dir_lib.new_config(model_name, hparams, source_vocab, target_vocab, data)
    return config, spec


def copy_vocab_of_init_from(model_dir, init_from):
    """A warm-started model must read the same subwords as the model it starts from: a new
    model directory takes the vocabulary of --init_from's model directory when there is one."""
    if not init_from:
        return False
    _, source_dir = checkpoints.resolve_init_from(init_from)
    try:
        paths = sorted(set(vocab_lib.vocab_paths(source_dir))) if source_dir else []
    except DataError:
        paths = []
    if not paths:
        return False
    os.makedirs(model_dir, exist_ok=True)
    for path in paths:
        shutil.copyfile(path, os.path.join(model_dir, os.path.basename(path)))
        logging.info("vocabulary of --init_from copied: %s", path)
    return True


def run():
    run_options = read(TrainRunOptions)
    # First: a multi-worker strategy must be set up before TensorFlow runs any op.
    strategy = distribution.make_strategy(run_options.distribution)
    new = new_model_from_flags()
    config, spec = model_config(new, build_vocab=run_options.distribution != "multi_worker",
                                distribution_name=run_options.distribution)
    train_split, valid_split, test_split = common.splits(new.data, spec)
    train(new.where.model_dir, config, spec, (train_split, valid_split),
          (new.data.train_limit, new.data.valid_limit), new.train, read(DecodingOptions),
          strategy, read(DataServiceOptions).data_service)
    if run_options.evaluate_at_end and test_split and distribution.is_chief(strategy):
        evaluate.run()
