"""Optimizers and learning-rate schedules of the papers' training recipes."""

import keras
import tensorflow as tf

from tfnmt.errors import ConfigError


@keras.saving.register_keras_serializable(package="tfnmt")
class InverseSqrtSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak` over `warmup_steps`, then decay with 1/sqrt(step) (Vaswani et al.)."""

    def __init__(self, peak, warmup_steps):
        self.peak = peak
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = tf.cast(step, tf.float32) + 1.0
        warmup = tf.cast(max(self.warmup_steps, 1), tf.float32)
        return self.peak * tf.minimum(step / warmup, tf.sqrt(warmup / step))

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps}


def make_optimizer(options, epsilon=None):
    """The --optimizer of `options` (TrainOptions, which declares the defaults): adam
    (inverse-sqrt warm-up), nag (Nesterov SGD; the lr is shrunk on validation by
    `ShrinkOnValidationRise`), adadelta (DeepLAU: rho 0.95, eps 1e-6, lr 1.0)."""
    name, learning_rate, warmup_steps = (options.optimizer, options.learning_rate,
                                         options.warmup_steps)
    beta_2, momentum, clip_norm = options.adam_beta2, options.momentum, options.clip_norm
    clip = {"global_clipnorm": clip_norm} if clip_norm > 0 else {}
    if name == "adam":
        schedule = InverseSqrtSchedule(learning_rate, warmup_steps) if warmup_steps else learning_rate
        return keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=beta_2,
                                     epsilon=epsilon or 1e-9, **clip)
    if name == "nag":
        return keras.optimizers.SGD(learning_rate, momentum=momentum, nesterov=True, **clip)
    if name == "adadelta":
        return keras.optimizers.Adadelta(learning_rate, rho=0.95, epsilon=epsilon or 1e-6, **clip)
    raise ConfigError(f"unknown optimizer {name!r}: use adam, nag or adadelta")
