"""The Keras training step of every translation model: what `fit` and `evaluate` run.

`compile(model, optimizer, **keras_args)` is how a model (models/base.py) is made trainable: it
compiles it as Keras' `compile` does and sets the model's `train_step` and `test_step` (the
methods Keras' `fit` and `evaluate` call) to the functions here, bound to it. The model classes
hold the contract (encode, decode, translation_loss, report, ...) and the state a checkpoint or
Keras' metrics need (`data_position`, `loss_tracker`), not how a step trains them.

A step's loss is the mean over all its target tokens: with several replicas each computes its
share (training/replicas.py); with --accumulate_steps one optimizer step runs over several
batches, each batch's gradient weighted by its share of the step's tokens.
"""

import types

import tensorflow as tf

from tfnmt.models.base import TOTAL_PREFIX
from tfnmt.training import replicas


def compile(model, optimizer, **keras_args):  # noqa: A001 (model.compile, with this step)
    """Compiles `model` (keras.Model.compile's arguments but `loss`: the model's own
    `translation_loss` is the loss) so that `fit` and `evaluate` run this module's steps."""
    model.compile(optimizer=optimizer, **keras_args)
    # Set past Keras' attribute tracking: bound functions, no state.
    object.__setattr__(model, "train_step", types.MethodType(train_step, model))
    object.__setattr__(model, "test_step", types.MethodType(test_step, model))
    return model


def training_loss(model, labels, logits):
    """(this replica's share of the step loss, the step's target tokens): the model's
    translation loss plus its auxiliary losses (`model.losses`); with auxiliary losses the
    translation loss alone is reported as translation_loss."""
    loss, num_tokens = model.translation_loss(labels, logits)
    extra = tf.add_n([tf.cast(l, tf.float32) for l in model.losses]) if model.losses else None
    if extra is not None:
        model.report("translation_loss", loss)
    # With several replicas: this replica's share of the mean over the step's tokens.
    return replicas.replica_loss(loss, num_tokens, extra)


def train_step(model, data):
    """One optimizer step on a batch (features, labels), or on a tuple of batches
    (--accumulate_steps; data/pipeline.group). The loss of a step is the mean over all its
    target tokens, as if one batch held them all: each batch's gradient (of its per-token
    mean) is weighted by its share of the step's tokens. Batch i+1 runs once batch i's
    gradient exists, so only one batch's activations are alive at a time."""
    batches = (data,) if isinstance(data[0], dict) else tuple(data)
    gradients, tokens, losses, reports, ends, sentences = None, [], [], [], [], 0
    for features, labels in batches:
        features = dict(features)
        position = features.pop("position", None)
        if position is not None:
            model.data_position.assign(replicas.latest_position(position))
        ends.append(tf.cast(features.pop("epoch_end", False), tf.float32))
        if gradients is not None:
            with tf.control_dependencies(_dense_parts(gradients)):
                features = {k: tf.identity(v) for k, v in features.items()}
        model.take_reports()  # what earlier calls left
        with tf.GradientTape() as tape:
            logits = model(features, training=True)
            loss, num_tokens = training_loss(model, labels, logits)
            scaled = model.optimizer.scale_loss(loss)
        batch_gradients = tape.gradient(scaled, model.trainable_weights)
        tokens.append(num_tokens)
        losses.append(loss)
        reports.append(model.take_reports())
        sentences += tf.shape(features["source"])[0]
        if len(batches) == 1:
            gradients = batch_gradients
        else:
            # Summed as tokens x gradient, divided by the step's tokens at the end.
            weighted = [_scaled(g, tokens[-1]) for g in batch_gradients]
            gradients = weighted if gradients is None else [
                _summed(a, b) for a, b in zip(gradients, weighted)]
    total = tf.add_n(tokens)
    if len(batches) == 1:
        weights = [1.0]
    else:
        gradients = [_scaled(g, 1.0 / tf.maximum(total, 1.0)) for g in gradients]
        weights = [n / tf.maximum(total, 1.0) for n in tokens]
    step_loss = tf.add_n([w * l for w, l in zip(weights, losses)])
    # As Keras' own train_step: the tracked loss is per replica, not its share of the step.
    num_replicas = tf.distribute.get_strategy().num_replicas_in_sync
    model.loss_tracker.update_state(step_loss * num_replicas, sample_weight=sentences)
    model.optimizer.apply_gradients(zip(gradients, model.trainable_weights))
    logs = model.compute_metrics(features, labels, logits)
    logs["target_tokens"] = total
    logs["epoch_end"] = tf.reduce_max(ends)
    logs.update(_step_reports(reports, weights))
    return replicas.step_logs(logs)


def _step_reports(reports, weights):
    """The step's value of each reported scalar: over its batches, the sum of a total (a count),
    else the mean weighted as the loss is."""
    logs = {}
    for name in reports[0]:
        values = [r[name] for r in reports]
        logs[name] = (tf.add_n(values) if name.startswith(TOTAL_PREFIX)
                      else tf.add_n([w * v for w, v in zip(weights, values)]))
    return logs


def test_step(model, data):
    features, labels = data
    features = {k: v for k, v in features.items() if k != "position"}
    logits = model(features, training=False)
    loss, _ = training_loss(model, labels, logits)
    num_replicas = tf.distribute.get_strategy().num_replicas_in_sync
    model.loss_tracker.update_state(loss * num_replicas,
                                    sample_weight=tf.shape(features["source"])[0])
    return model.compute_metrics(features, labels, logits)


# --- gradient accumulation: embedding gradients are IndexedSlices ---------------------------
def _scaled(gradient, factor):
    if gradient is None:
        return None
    if isinstance(gradient, tf.IndexedSlices):
        values = gradient.values * tf.cast(factor, gradient.values.dtype)
        return tf.IndexedSlices(values, gradient.indices, gradient.dense_shape)
    return gradient * tf.cast(factor, gradient.dtype)


def _summed(a, b):
    if a is None:
        return b
    if isinstance(a, tf.IndexedSlices) and isinstance(b, tf.IndexedSlices):
        # The rows of both batches, as one batch's gradient would list them.
        return tf.IndexedSlices(tf.concat([a.values, b.values], 0),
                                tf.concat([a.indices, b.indices], 0), a.dense_shape)
    return tf.convert_to_tensor(a) + tf.convert_to_tensor(b)


def _dense_parts(gradients):
    return [g.values if isinstance(g, tf.IndexedSlices) else g for g in gradients if g is not None]
