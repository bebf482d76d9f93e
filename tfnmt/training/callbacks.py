"""Keras callbacks that run the training schedule by absolute step (so resumed runs line up):
logging with throughput, checkpoints, validation (loss, BLEU, best checkpoints, TensorBoard), the
NAG shrink-on-rise schedule, DeepLAU's clip halving, early stopping and the step budget."""

import math
import os
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from tfnmt import json_files, progress
from tfnmt.errors import DivergedError
from tfnmt.decoding.batches import translate_sentences
from tfnmt.evaluation import bleu
from tfnmt.models.base import TOTAL_PREFIX
from tfnmt.training import optimizers
from tfnmt.training.options import BEST_METRICS, SHRINK_MODES


def current_step(model):
    return int(model.optimizer.iterations.numpy())


def current_learning_rate(optimizer):
    lr = optimizer.learning_rate
    return float(lr.numpy() if hasattr(lr, "numpy") else lr)


# Written in the model directory by a run whose loss stopped being finite; the next run of
# `train` there removes it.
DIVERGED_FILE = "diverged.json"


class TrainingSchedule(keras.callbacks.Callback):
    """Everything that happens every N steps, in one place so that the order is explicit:
    log -> validate (may shrink the lr / stop) -> checkpoint -> stop at the step budget.
    `validate_every=None` validates instead after each step that trained an epoch's last batch
    (the train step's `epoch_end` log), and at the end."""

    def __init__(self, checkpoints, writer, *, train_steps, save_every, validate_every, log_every,
                 validator=None, controllers=(), early_stopping=None):
        super().__init__()
        self.checkpoints = checkpoints
        self.writer = writer
        self.train_steps = train_steps
        self.save_every = save_every
        self.validate_every = validate_every
        self.log_every = log_every
        self.validator = validator
        self.controllers = controllers  # each .update(optimizer, validation loss) -> stop?
        self.early_stopping = early_stopping
        self._tokens = 0.0
        self._losses = []
        self._reports = {}  # scalars a model reports (Seq2SeqModel.report): name -> values
        self._clock = time.time()
        self.history = []

    def on_train_batch_end(self, batch, logs=None):
        step = current_step(self.model)
        self._tokens += float(logs["target_tokens"])
        self._losses.append(float(logs["loss"]))
        for name, value in logs.items():
            if name not in ("loss", "target_tokens", "epoch_end"):
                self._reports.setdefault(name, []).append(float(value))
        if not math.isfinite(self._losses[-1]):
            self.model.stop_training = True
            raise self._diverged(step, self._losses[-1])
        if step % self.log_every == 0 or step >= self.train_steps:
            elapsed = max(time.time() - self._clock, 1e-9)
            loss = float(np.mean(self._losses))
            lr = current_learning_rate(self.model.optimizer)
            reports = {}
            for name, values in sorted(self._reports.items()):
                if name.startswith(TOTAL_PREFIX):
                    reports[name[len(TOTAL_PREFIX):]] = float(np.sum(values))
                else:
                    reports[name] = float(np.mean(values))
            # Validation time is not counted: the time left is that of the training steps.
            left = (self.train_steps - step) * elapsed / max(len(self._losses), 1)
            logging.info("step %d  loss %.4f%s  lr %.3g  %.0f target tokens/s  %s left", step, loss,
                         "".join(f"  {name} {value:.4g}" for name, value in reports.items()), lr,
                         self._tokens / elapsed, progress.duration(left))
            with self.writer.as_default(step=step):
                tf.summary.scalar("train/loss", loss)
                tf.summary.scalar("train/learning_rate", lr)
                tf.summary.scalar("train/target_tokens_per_second", self._tokens / elapsed)
                # Per interval, so that a resumed run's sums stay right (`tfnmt experiment`
                # plots against target tokens seen and training time).
                tf.summary.scalar("train/target_tokens", self._tokens)
                tf.summary.scalar("train/seconds", elapsed)
                for name, value in reports.items():
                    tf.summary.scalar(f"train/{name}", value)
            self.history.append(dict(reports, step=step, loss=loss, tokens_per_second=self._tokens / elapsed))
            self._tokens, self._losses, self._reports, self._clock = 0.0, [], {}, time.time()
        if self.validate_every is None:
            due = float(logs["epoch_end"]) > 0  # with replicas: the mean of their flags
        else:
            due = step % self.validate_every == 0
        if self.validator is not None and (due or step >= self.train_steps):
            self._validate(step)
        if step % self.save_every == 0 or step >= self.train_steps or self.model.stop_training:
            path = self.checkpoints.save(step)
            # Each save is detail (--verbosity=1); the last one says where the model is.
            last = step >= self.train_steps or self.model.stop_training
            (logging.info if last else logging.debug)("saved %s", path)
        if step >= self.train_steps:
            self.model.stop_training = True

    def _diverged(self, step, loss):
        """The one line of a run whose loss is no longer finite: no checkpoint of these weights
        is written, the ones before are kept."""
        last = self.checkpoints.last.latest_checkpoint
        where = (f"the last good checkpoint is {last}, which a rerun of the same command resumes "
                 "from" if last else "no checkpoint was written before it")
        if self.checkpoints.chief:  # `tfnmt experiment` reports the run as diverged
            json_files.write(os.path.join(self.checkpoints.model_dir, DIVERGED_FILE),
                             {"step": step, "loss": str(loss), "last_checkpoint": last})
        return DivergedError(
            f"training loss is {loss} at step {step}; {where}; lower --learning_rate, raise "
            "--warmup_steps, set --clip_norm, or train with --precision=float32")

    def _validate(self, step):
        start = time.time()
        results = self.validator(self.model)
        logging.info("validation at step %d: %s (%.1fs)", step,
                     "  ".join(f"{k} {v:.4f}" for k, v in results.items()), time.time() - start)
        with self.writer.as_default(step=step):
            for name, value in results.items():
                tf.summary.scalar(f"validation/{name}", value)
        self.writer.flush()
        if self.checkpoints.offer_best(step, results):
            logging.debug("step %d is among the best by validation %s", step,
                          self.checkpoints.best_metric)
        for controller in self.controllers:
            if controller.update(self.model.optimizer, results["loss"]):
                self.model.stop_training = True
        if self.early_stopping is not None and self.early_stopping.update(results):
            self.model.stop_training = True
        self.history.append(dict(results, step=step))
        self._clock = time.time()  # validation time is not training throughput


class ClipHalving:
    """DeepLAU's clipping (--clip_halving): the gradient-norm threshold halves after every
    validation. The threshold is the variable the optimizer clips to (optimizers.clip_threshold),
    which the trainer checkpoints, so a resumed run keeps the halvings."""

    def update(self, optimizer, loss):
        """Never stops training (the stopping rule does); `loss` is not read."""
        threshold = optimizers.clip_threshold(optimizer)
        threshold.assign(threshold * 0.5)
        logging.info("gradient clipping threshold -> %.3g", float(threshold.numpy()))
        return False


class ShrinkOnValidationRise:
    """The NAG schedules of DenseNMT (and ConvS2S): lr x `factor` at a validation, stop once the
    lr is below `floor`. mode `on_rise` shrinks each time the validation loss rises (DenseNMT on
    IWSLT14); `after_first_rise` shrinks at every validation once it has risen (DenseNMT and
    ConvS2S on WMT14, validating per epoch). Its memory is checkpointed: the previous validation
    loss in a variable, and whether it has risen yet in the lr itself (below
    `initial_learning_rate` only after a shrink)."""

    def __init__(self, factor, floor, mode, initial_learning_rate=None):
        """factor, floor, mode: --lr_shrink, --lr_floor and --lr_shrink_mode (TrainOptions,
        which declares their defaults and the modes)."""
        if mode not in SHRINK_MODES:
            raise ValueError(f"unknown lr shrink mode {mode!r}")
        self.factor = factor
        self.floor = floor
        self.mode = mode
        self.initial_learning_rate = initial_learning_rate
        self.previous = tf.Variable(float("inf"), trainable=False, name="previous_validation_loss")

    def update(self, optimizer, loss):
        """Returns True when training should stop."""
        lr = current_learning_rate(optimizer)
        rose = loss > float(self.previous.numpy())
        # The lr variable is float32: compare with the initial lr as float32 stores it.
        annealing = (self.mode == "after_first_rise"
                     and lr < float(np.float32(self.initial_learning_rate)))
        if rose or annealing:
            new_lr = lr * self.factor
            optimizer.learning_rate.assign(new_lr)
            if rose:
                logging.info("validation loss rose (%.4f > %.4f): learning rate -> %.3g", loss,
                             float(self.previous.numpy()), new_lr)
            else:
                logging.info("annealing since the validation loss first rose: learning rate -> %.3g",
                             new_lr)
            if new_lr < self.floor:
                logging.info("learning rate below %.3g: stopping", self.floor)
                return True
        self.previous.assign(loss)
        return False


class EarlyStopping:
    """Stops training after `patience` validations in a row that do not improve on the best
    `metric` ("loss" or "bleu") so far. Its memory (the best value, the validations since) is
    checkpointed, so that a resumed run goes on counting."""

    def __init__(self, patience, metric):
        self.patience = patience
        self.metric = metric
        self.higher = BEST_METRICS[metric]
        self.best = tf.Variable(float("-inf") if self.higher else float("inf"), trainable=False,
                                name="early_stopping_best")
        self.waited = tf.Variable(0, dtype=tf.int64, trainable=False, name="early_stopping_waited")

    def variables(self):
        """The checkpoint entries that carry its memory."""
        return {"early_stopping_best": self.best, "early_stopping_waited": self.waited}

    @property
    def stopped(self):
        return int(self.waited.numpy()) >= self.patience

    def update(self, results):
        """Returns True when training should stop."""
        value, best = results[self.metric], float(self.best.numpy())
        if value > best if self.higher else value < best:
            self.best.assign(value)
            self.waited.assign(0)
            return False
        self.waited.assign_add(1)
        if self.stopped:
            logging.info("early stopping: validation %s has not improved on %.4f for %d "
                         "validations (--early_stopping_patience=%d)", self.metric, best,
                         int(self.waited.numpy()), self.patience)
        return self.stopped


class Validator:
    """Validation loss (the training objective, averaged over target tokens) and BLEU on a sample."""

    def __init__(self, dataset, translator=None, sources=None, references=None, batch_size=64,
                 scoring=None):
        self.dataset = dataset
        self.scoring = scoring or {}  # bleu.score's target_lang / tokenize
        self._signed = False
        self.translator = translator
        self.sources = sources or []
        self.references = references or []
        self.batch_size = batch_size
        self._loss_fn = None

    def _sums(self, model):
        if self._loss_fn is None:
            # Every batch shape in one trace (the batches' lengths differ: without a signature,
            # a second trace at the second batch).
            features, labels = self.dataset.element_spec

            def relax(spec):
                rank = spec.shape.rank
                return tf.TensorSpec(None if rank is None else [None] * rank, spec.dtype)
            relaxed = tf.nest.map_structure(
                relax, ({k: v for k, v in features.items() if k != "position"}, labels))

            @tf.function(input_signature=relaxed, autograph=False)
            def sums(features, labels):
                logits = model(features, training=False)
                loss, tokens = model.translation_loss(labels, logits)
                return loss * tokens, tokens
            self._loss_fn = sums
        return self._loss_fn

    def __call__(self, model):
        total, tokens = 0.0, 0.0
        fn = self._sums(model)
        for features, labels in self.dataset:
            features = {k: v for k, v in features.items() if k != "position"}
            loss_sum, count = fn(features, labels)
            total += float(loss_sum)
            tokens += float(count)
        results = {"loss": total / max(tokens, 1.0)}
        if self.translator is not None and self.sources:
            hypotheses = translate_sentences(self.translator, self.sources, self.batch_size)
            scores = bleu.score(hypotheses, self.references, **self.scoring)
            if not self._signed:
                logging.info("validation BLEU on %d sentences: %s", len(hypotheses),
                             scores["bleu_signature"])
                self._signed = True
            results["bleu"] = scores["bleu"]
        return results
