"""`tfnmt train`: one trainer for every registered model, built on Keras `fit`.

The training step (training/step.py) records the data position of each batch and takes one
optimizer step per element of the stream (one batch, or --accumulate_steps batches); the
schedule callback saves checkpoints, validates (every --validate_every steps, or at each epoch's
end) and stops by absolute optimizer step. Restarting on an existing model directory restores the
newest checkpoint (model, optimizer, lr-schedule memory, data position) and continues with the
batch after the last one trained.
"""

import dataclasses
import hashlib
import os

import keras
import tensorflow as tf
from absl import logging

from tfnmt import model_dir as model_dir_lib, runtime
from tfnmt.data import pipeline, sources
from tfnmt.data.vocab import load_vocabs
from tfnmt.decoding import precision
from tfnmt.decoding.translator import Translator
from tfnmt.evaluation import bleu
from tfnmt.models import catalog
from tfnmt.data.vocab import vocab_paths
from tfnmt.errors import CheckpointError, DataError
from tfnmt.training import callbacks, distribution, step as training_step
from tfnmt.training.checkpoints import Checkpoints, resolve_init_from, trackables, warm_start
from tfnmt.training.stream_state import SavedStream
from tfnmt.training.optimizers import clip_threshold, make_optimizer


def source_length_limit(model, max_source_length):
    """--max_source_length, lowered to what a model with a source window can encode (its
    window less eos): longer training pairs are dropped, as the convolutional-encoder report
    does; translation splits long sources into chunks instead."""
    window = model.source_window
    if window and max_source_length > window - 1:
        logging.info("model %s reads at most %d source subwords (its source window %d, with "
                     "eos): training pairs with longer sources are dropped", model.registry_name,
                     window - 1, window)
        return window - 1
    return max_source_length


def train(model_dir, config, spec, splits, limits, options, decode_options, strategy=None,
          data_service="", extra_callbacks=()):
    """Trains (or resumes) the model described by `config` in `model_dir`.

    splits: (train, validation) split names; limits: (train, validation) pair caps (0 = all).
    strategy: a tf.distribute strategy (training/distribution.py) or None for one device.
    data_service: a tf.data service dispatcher's address, which then makes the batches.
    extra_callbacks: Keras callbacks of fit beside the schedule (`bench --bench=train` times the steps).
    Returns the schedule callback's history (a list of dicts), for tests and benchmarks.
    """
    if strategy is None:
        return _train(model_dir, config, spec, splits, limits, options, decode_options, None,
                      data_service, extra_callbacks)
    # Variables, datasets and fit all belong to the strategy.
    with strategy.scope():
        return _train(model_dir, config, spec, splits, limits, options, decode_options, strategy,
                      data_service, extra_callbacks)


def compiled_model(config, options):
    """The model of `config`, compiled with the optimizer, precision and seed of `options`: the
    step `train` runs (and `bench --bench=train` times)."""
    keras.mixed_precision.set_global_policy(training_precision(options))
    keras.utils.set_random_seed(options.seed)
    if options.deterministic:
        tf.config.experimental.enable_op_determinism()
    model = catalog.build(config)
    model.label_smoothing = options.label_smoothing
    optimizer = make_optimizer(options)
    training_step.compile(model, optimizer, jit_compile=options.jit_compile)
    model.optimizer.build(model.trainable_variables)
    return model


def training_precision(options):
    """The Keras dtype policy --precision names; `auto`'s choice is logged with its reason."""
    policy, why = runtime.choose_bfloat16(options.precision, "mixed_bfloat16", "float32")
    if options.precision == runtime.AUTO:
        logging.info("--precision=auto: %s (%s)", policy, why)
    return policy


def training_batching(model, options):
    """The batching arguments of the training stream (a source window lowers the length cap)."""
    return dict(batch_tokens=options.batch_tokens, batch_size=options.batch_size,
                max_source_length=source_length_limit(model, options.max_source_length),
                max_target_length=options.max_target_length)


def _train(model_dir, config, spec, splits, limits, options, decode_options, strategy,
           data_service, extra_callbacks):
    if splits[1] and options.bleu_sentences > 0:
        bleu.metric(target_lang=spec.target_lang, tokenize=options.bleu_tokenize)
    if os.path.isfile(model_dir_lib.config_path(model_dir)):
        model_dir_lib.check_compatible(model_dir_lib.read_config(model_dir), config)
    chief = distribution.is_chief(strategy)
    if chief:
        model_dir_lib.write_config(model_dir, config)
        _forget_divergence(model_dir)
    model = compiled_model(config, options)
    # A --decode_dtype the model cannot be built in is refused now, not once the test sets are
    # decoded after training.
    precision.decoding_model(model, decode_options.decode_dtype)
    vocabs = load_vocabs(model_dir)
    batching = training_batching(model, options)
    # One input pipeline (no tf.distribute, no tf.data service): its state is saved in every
    # checkpoint, so that a resumed run goes on at once where it stopped.
    saved = (SavedStream(training_stream(spec, splits[0], limits[0], vocabs, (0, -1), batching,
                                          options))
             if strategy is None and not data_service else None)
    checkpoints, controllers, early_stopping = _checkpointed_state(model, model_dir, options,
                                                                   chief, saved)
    start = _resume(model, model_dir, checkpoints, early_stopping, options)
    if start is None:
        return []
    step, position = start
    if saved is not None and (step == 0 or checkpoints.restored_stream):
        saved.start(step)
        stream = saved.dataset()
    else:
        # Checkpoints written without the iterator's state (or several input pipelines): the
        # stream skips to the position, re-making the batches before it.
        stream = training_stream(spec, splits[0], limits[0], vocabs, position, batching, options,
                                  (data_service, _job_name(model_dir, step) if data_service else ""))
    stream = distribution.distribute(stream, strategy, served=bool(data_service))
    validator = None
    if splits[1]:
        validator = _validator(model, spec, splits[1], limits[1], vocabs, batching, options,
                               decode_options)
        validator = distribution.agreed(validator, strategy)

    writer = distribution.summary_writer(model_dir, strategy)
    schedule = callbacks.TrainingSchedule(
        checkpoints, writer, train_steps=options.train_steps, save_every=options.save_every,
        validate_every=None if options.validate_per_epoch else options.validate_every,
        log_every=options.log_every, validator=validator,
        controllers=controllers, early_stopping=early_stopping)
    # The one header of a run; then the schedule logs progress (TensorBoard keeps the detail).
    logging.info("training %s: %s parameters; data %s %s-%s %s%s; steps %d to %d; %s",
                 config["model"], f"{model.count_params():,}", spec.source, spec.source_lang,
                 spec.target_lang, splits[0], f" (first {limits[0]:,} pairs)" if limits[0] else "",
                 step, options.train_steps, distribution.describe(strategy))
    _fit(model, stream, [schedule, *extra_callbacks], options, strategy)
    writer.close()
    if strategy is not None:
        logging.info("finished at step %d; weights fingerprint %s", callbacks.current_step(model),
                     distribution.weights_fingerprint(model))
    return schedule.history


def _forget_divergence(model_dir):
    """A new attempt: whether it diverges again is its own record."""
    path = os.path.join(model_dir, callbacks.DIVERGED_FILE)
    if os.path.exists(path):
        os.remove(path)


def _checkpointed_state(model, model_dir, options, chief, stream=None):
    """(the run's Checkpoints, what runs at each validation (the NAG lr controller, DeepLAU's
    clip halving), its early stopping or None): they keep state in the checkpoints, and so does
    `stream` (SavedStream), if given."""
    controllers, extra = [], {}
    if options.optimizer == "nag":
        controllers.append(callbacks.ShrinkOnValidationRise(
            options.lr_shrink, options.lr_floor, mode=options.lr_shrink_mode,
            initial_learning_rate=options.learning_rate))
        extra["previous_validation_loss"] = controllers[-1].previous
    early_stopping = (callbacks.EarlyStopping(options.early_stopping_patience, options.best_metric)
                      if options.early_stopping_patience else None)
    optional = early_stopping.variables() if early_stopping else {}
    if options.clip_halving:
        controllers.append(callbacks.ClipHalving())
        optional["clip_norm"] = clip_threshold(model.optimizer)
    checkpoints = Checkpoints(model_dir, trackables(model, model.optimizer, **extra, **optional),
                              options.keep_checkpoints, options.keep_best, options.best_metric,
                              chief=chief, optional=tuple(optional), stream=stream)
    return checkpoints, controllers, early_stopping


def _resume(model, model_dir, checkpoints, early_stopping, options):
    """Restores the newest checkpoint (or warm-starts from --init_from): (the step training
    starts from, the data position (epoch, batch) it resumes after), or None when there is
    nothing left to train."""
    restored = checkpoints.restore_latest()
    step = callbacks.current_step(model)
    epoch, index = (int(v) for v in model.data_position.numpy())
    if restored:
        logging.info("resuming from %s at step %d (epoch %d, after batch %d)", restored, step, epoch, index)
        if options.init_from:
            logging.info("--init_from=%s ignored: resuming this model directory's own training",
                         options.init_from)
    elif options.init_from:
        init_from(model, model_dir, options.init_from)
    if step >= options.train_steps:
        logging.info("already trained for %d steps (--train_steps=%d): nothing to do", step,
                     options.train_steps)
        return None
    if early_stopping is not None and early_stopping.stopped:
        logging.info("stopped early at step %d: validation %s did not improve for %d "
                     "validations (--early_stopping_patience=%d): nothing to do", step,
                     options.best_metric, int(early_stopping.waited.numpy()),
                     options.early_stopping_patience)
        return None
    return step, (epoch, index)


def _job_name(model_dir, step):
    """The tf.data service job this run's training workers share: one per model directory and
    start step, so that another run, or this one resumed, gets batches of its own."""
    digest = hashlib.sha1(os.path.abspath(model_dir).encode("utf-8")).hexdigest()[:12]
    return f"tfnmt-{digest}-{step}"


def training_stream(spec, split, limit, vocabs, position, batching, options, service=("", "")):
    """The endless training batches from the one after `position` (epoch, batch index, the
    last trained) on, made by the tf.data service `service` (address, job name) if given; a
    DataError if no training pair is within the length limits."""
    source_vocab, target_vocab = vocabs
    epoch, index = position
    train_pairs = sources.pairs(spec, split, limit)
    # An endless stream of empty epochs would hang fit(); fail instead. (Every pair within the
    # limits makes a batch: the first one found, unshuffled, is enough.)
    limits = batching["max_source_length"], batching["max_target_length"]
    within = (train_pairs.apply(pipeline.tokenize(source_vocab, target_vocab))
              .apply(pipeline.filter_length(*limits)))
    if not any(True for _ in within.take(1)):
        raise DataError(f"no training pair of {spec.source} {split} is within "
                        f"--max_source_length={limits[0]} and --max_target_length={limits[1]} "
                        "subwords")
    stream = pipeline.training_stream(train_pairs, source_vocab, target_vocab,
                                    start_epoch=max(epoch, 0), skip_batches=index + 1,
                                    accumulate_steps=options.accumulate_steps,
                                    data_service=service[0], job_name=service[1],
                                    seed=options.seed, shuffle_buffer=options.shuffle_buffer,
                                    **batching)
    return stream


def _validator(model, spec, split, limit, vocabs, batching, options, decode_options):
    """Validation loss on `split`, and BLEU on its first --bleu_sentences sentences."""
    source_vocab, target_vocab = vocabs
    valid_pairs = sources.pairs(spec, split, limit)
    valid_batches = pipeline.evaluation_batches(valid_pairs, source_vocab, target_vocab, **batching)
    translator, valid_sources, valid_references = None, [], []
    if options.bleu_sentences > 0:
        valid_sources, valid_references = sources.references(spec, split, options.bleu_sentences)
        # The weights being trained, never a copy in --decode_dtype made once (it would not
        # follow training); the test sets are decoded from the checkpoint as asked.
        translator = Translator(model, source_vocab, target_vocab,
                                dataclasses.replace(decode_options, decode_dtype="float32"))
    return callbacks.Validator(valid_batches, translator, valid_sources, valid_references,
                               scoring={"target_lang": spec.target_lang,
                                        "tokenize": options.bleu_tokenize})


def _fit(model, stream, fit_callbacks, options, strategy):
    if strategy is not None:
        # Keras would pull a batch to build the (already built) model and average it across
        # replicas, which fails for bucketed batches of different shapes; fit then takes the
        # strategy from the enclosing scope instead.
        model._distribute_strategy = None
    # Keras epochs are only a bookkeeping unit here: the schedule stops at --train_steps.
    with distribution.worker_failures(strategy):
        model.fit(stream, epochs=1 << 40, steps_per_epoch=options.log_every, verbose=0,
                  shuffle=False, callbacks=fit_callbacks)


def _parameters(model, names):
    sizes = {v.path.split("/", 1)[-1]: int(v.numpy().size) for v in model.weights}
    return sum(sizes[n] for n in names)


def _vocab_bytes(model_dir):
    try:
        paths = vocab_paths(model_dir)
    except DataError:
        return None
    contents = []
    for path in paths:
        with open(path, "rb") as f:
            contents.append(f.read())
    return contents


def init_from(model, model_dir, source):
    """Warm start of a fresh run (the deep-representation paper's procedure): the weights of
    `source` (a model directory or checkpoint) that match by path and shape, fresh ones for the
    rest; the optimizer starts afresh. Logs what was loaded and what is new."""
    path, source_dir = resolve_init_from(source)
    if source_dir is not None:
        theirs = _vocab_bytes(source_dir)
        if theirs is not None and theirs != _vocab_bytes(model_dir):
            raise CheckpointError(f"--init_from={source}: {source_dir} has another vocabulary than "
                                  f"{model_dir}; start from a copy of its spm*.model files")
    report = warm_start(model, path)
    logging.info("--init_from: loaded %d weights (%d parameters) from %s", len(report["loaded"]),
                 _parameters(model, report["loaded"]), path)
    logging.info("--init_from: %d new weights (%d parameters), freshly initialised: %s",
                 len(report["new"]), _parameters(model, report["new"]),
                 ", ".join(report["new"]) or "none")
    for entry in report["mismatched"]:
        logging.warning("--init_from: shape differs, freshly initialised: %s", entry)
    if report["unused"]:
        logging.info("--init_from: %d weights of the checkpoint have no place in this model: %s",
                     len(report["unused"]), ", ".join(report["unused"]))
    return report
