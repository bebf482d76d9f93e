"""A replica's share of a training step under tf.distribute, called from the training step
(training/step.py); with one replica every function passes its input through."""

import tensorflow as tf


def multi_worker(strategy):
    """Whether `strategy` spans several hosts (its replicas are not all on this one)."""
    return (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
            and strategy.num_replicas_in_sync > len(strategy.extended.worker_devices))


def _replicas():
    return tf.distribute.get_strategy().num_replicas_in_sync


def replica_loss(loss, num_tokens, extra_loss=None):
    """(this replica's share of the step loss, tokens of the whole step).

    `loss` is the mean over this replica's `num_tokens`; `extra_loss` (auxiliary terms) is a
    per-replica mean too. With one replica both pass through unchanged.
    """
    if _replicas() == 1:
        return (loss if extra_loss is None else loss + extra_loss), num_tokens
    total = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, num_tokens)
    share = loss * num_tokens / tf.maximum(total, 1.0)
    if extra_loss is not None:
        share += extra_loss / _replicas()
    return share, total


def latest_position(position):
    """The newest (epoch, batch) position among the replicas' batches of this step."""
    if _replicas() == 1:
        return position
    positions = tf.distribute.get_replica_context().all_gather(position[tf.newaxis], axis=0)
    order = positions[:, 0] * (1 << 32) + positions[:, 1]
    return positions[tf.argmax(order)]


def step_logs(logs):
    # Keras reduces the replicas' logs of a multi-worker step with strategy.reduce(MEAN, axis=0),
    # which fails on scalars (tensorflow/tensorflow#72388); one-element vectors reduce to scalars.
    if not multi_worker(tf.distribute.get_strategy()):
        return logs
    return {name: tf.reshape(value, [1]) for name, value in logs.items()}
