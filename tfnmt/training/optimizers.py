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


@keras.saving.register_keras_serializable(package="tfnmt")
class LinearDecaySchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak` over `warmup_steps`, then a straight line down to 0 at
    `total_steps`: the run ends annealed instead of averaging its way there."""

    def __init__(self, peak, warmup_steps, total_steps):
        self.peak = peak
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps

    def __call__(self, step):
        # `step` counts the updates made: the last one (total - 1) still moves the weights.
        step = tf.cast(step, tf.float32)
        total = float(max(self.total_steps, self.warmup_steps + 1))
        decay = (total - step) / (total - self.warmup_steps)
        return self.peak * tf.maximum(0.0, tf.minimum((step + 1.0) / max(self.warmup_steps, 1),
                                                      decay))

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps,
                "total_steps": self.total_steps}


def make_optimizer(options, epsilon=None):
    """The --optimizer of `options` (TrainOptions, which declares the defaults): adam
    (warm-up, then --lr_decay), nag (Nesterov SGD; the lr is shrunk on validation by
    `ShrinkOnValidationRise`), adadelta (DeepLAU: rho 0.95, eps 1e-6, lr 1.0); with
    --clip_norm, gradients clipped to a global norm that `clip_threshold` gives."""
    name, learning_rate, warmup_steps = (options.optimizer, options.learning_rate,
                                         options.warmup_steps)
    beta_2, momentum = options.adam_beta2, options.momentum
    if name == "adam":
        if options.lr_decay == "linear":
            schedule = LinearDecaySchedule(learning_rate, warmup_steps, options.train_steps)
        elif warmup_steps:
            schedule = InverseSqrtSchedule(learning_rate, warmup_steps)
        else:
            schedule = learning_rate
        optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=beta_2,
                                          epsilon=epsilon or 1e-9)
    elif name == "nag":
        optimizer = keras.optimizers.SGD(learning_rate, momentum=momentum, nesterov=True)
    elif name == "adadelta":
        optimizer = keras.optimizers.Adadelta(learning_rate, rho=0.95, epsilon=epsilon or 1e-6)
    else:
        raise ConfigError(f"unknown optimizer {name!r}: use adam, nag or adadelta")
    if options.clip_norm > 0:
        _clip_to(optimizer, tf.Variable(float(options.clip_norm), trainable=False,
                                        dtype=tf.float32, name="clip_norm"))
    return optimizer


def _clip_to(optimizer, threshold):
    """Clips as Keras' own `global_clipnorm` does, where it does (the unscaled gradients, before
    the update), but to a variable: Keras reads its threshold as a constant when it traces the
    step, so `ClipHalving` could not lower it. Set past Keras' and TensorFlow's attribute
    tracking, which would add the threshold to the optimizer's variables and so change the
    checkpoint keys older checkpoints are read by; the trainer checkpoints it by name."""
    def clip(grads):
        # Dense, as Keras' clipping returns them: Adam and Adadelta square sparse embedding
        # gradients row by row, so rows of a repeated token would add up differently.
        return [g if g is None else tf.convert_to_tensor(g)
                for g in tf.clip_by_global_norm(grads, threshold)[0]]

    object.__setattr__(optimizer, "_clip_gradients", clip)
    object.__setattr__(optimizer, "tfnmt_clip_norm", threshold)


def clip_threshold(optimizer):
    """The variable `optimizer` (or the one a LossScaleOptimizer wraps) clips gradients to (a
    global norm), or None."""
    return getattr(getattr(optimizer, "inner_optimizer", optimizer), "tfnmt_clip_norm", None)
