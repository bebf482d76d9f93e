"""Data-parallel training on tf.distribute: one replica per device, one worker per host.

    --distribution=none          the default strategy (one device; no tf.distribute code runs)
    --distribution=mirrored      MirroredStrategy: every GPU of this host (the CPU if none)
    --distribution=multi_worker  MultiWorkerMirroredStrategy over the hosts listed in TF_CONFIG

Every replica trains on its own batches of --batch_tokens (per replica: the global batch is
num_replicas x --batch_tokens). The batches come from ONE global stream, the one a
single-device run would see: worker w of W keeps the stream's batches w, w+W, ... and hands
them to its replicas in turn, so each step trains the next num_replicas batches of the stream.
The checkpointed data position is the newest of them, so a resumed job (with any number of
replicas) continues right after the last batch trained.

The loss is the mean over ALL target tokens of the step: each replica contributes
sum(its token losses) / (tokens of all replicas), and Keras sums the replicas' gradients.

Only the chief writes to --model_dir (checkpoints, best checkpoints, TensorBoard, config). The
other workers take part in every save (saving may need collective ops) but write to a scratch
directory that is deleted right away. A job whose worker dies fails on the other workers within
seconds (MultiWorkerMirroredStrategy's health check); restarting every worker with the same
command resumes from the chief's newest checkpoint.
"""

import contextlib
import hashlib
import json
import os

import numpy as np
import tensorflow as tf

from tfnmt.errors import ConfigError, UserError
from tfnmt.training.replicas import multi_worker as _multi_worker

CHOICES = ("none", "mirrored", "multi_worker")


def make_strategy(name):
    """The tf.distribute strategy for --distribution, or None for `none`.

    MultiWorkerMirroredStrategy configures collective ops in TensorFlow's runtime, which is only
    possible before the first op runs: call this first thing in the process.
    """
    if name == "none":
        return None
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        config = os.environ.get("TF_CONFIG")
        if not config:
            raise ConfigError("--distribution=multi_worker needs TF_CONFIG (the cluster and this "
                              "worker's task); see docs/training.md, 'Multi-worker training'")
        try:
            cluster = json.loads(config)["cluster"]
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"TF_CONFIG is not valid: {e}") from None
        if not isinstance(cluster, dict) or not cluster.get("worker") and not cluster.get("chief"):
            raise ConfigError("TF_CONFIG lists no worker under cluster")
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ConfigError(f"--distribution must be one of {', '.join(CHOICES)}, not {name!r}")


def _resolver(strategy):
    return getattr(strategy, "cluster_resolver", None) if strategy is not None else None


def is_chief(strategy):
    """Whether this process writes the model directory: the `chief` task, or worker 0 when the
    cluster has no chief (TensorFlow's convention)."""
    resolver = _resolver(strategy)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    return (resolver.task_type == "worker" and resolver.task_id == 0
            and "chief" not in resolver.cluster_spec().as_dict())


def describe(strategy):
    if strategy is None:
        return "one device"
    resolver = _resolver(strategy)
    where = ""
    if resolver is not None and resolver.task_type:
        where = f"; this is {resolver.task_type} {resolver.task_id}{' (chief)' if is_chief(strategy) else ''}"
    kind = "multi_worker" if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) else "mirrored"
    return f"{strategy.num_replicas_in_sync} replica(s) ({kind}{where})"




def distribute(stream, strategy, served=False):
    """The global batch stream split between workers and replicas (see the module docstring).
    `served`: the stream is a tf.data service job's, which gives each worker batches of its own
    already (data/pipeline.py `served`)."""
    if strategy is None:
        return stream

    def per_worker(context):
        if served:
            return stream
        return stream.shard(context.num_input_pipelines, context.input_pipeline_id)
    return strategy.distribute_datasets_from_function(per_worker)


# --- around fit ---------------------------------------------------------------------------------

class AgreedValidation:
    """Every worker validates (the same model on the same data); their results are averaged so
    that decisions taken on them (best checkpoints, the NAG lr shrink, stopping) cannot differ
    between workers by a rounding difference."""

    def __init__(self, validator, strategy):
        self.validator = validator
        self.strategy = strategy

    def __call__(self, model):
        results = self.validator(model)
        names = sorted(results)
        values = tf.constant([results[n] for n in names], tf.float64)
        agreed = self.strategy.reduce(tf.distribute.ReduceOp.MEAN, values, axis=None).numpy()
        return {name: float(value) for name, value in zip(names, agreed)}


def agreed(validator, strategy):
    return AgreedValidation(validator, strategy) if _multi_worker(strategy) and validator else validator


def summary_writer(model_dir, strategy):
    if is_chief(strategy):
        return tf.summary.create_file_writer(os.path.join(model_dir, "logs"))
    return tf.summary.create_noop_writer()


@contextlib.contextmanager
def worker_failures(strategy):
    """A peer's death reaches this worker as an error of a collective op; say what to do."""
    if not _multi_worker(strategy):
        yield
        return
    try:
        yield
    except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.DeadlineExceededError,
            tf.errors.CancelledError, tf.errors.InternalError) as e:
        detail = " ".join(str(e).split("\n\n")[-1].split())[:400]
        raise UserError(
            f"a worker of the multi-worker job failed ({type(e).__name__}: {detail}); restart "
            "every worker with the same command: training resumes from the chief's newest "
            "checkpoint") from None


def weights_fingerprint(model):
    """sha256 of every weight's bytes: equal on all replicas and workers of a synchronous job."""
    digest = hashlib.sha256()
    for variable in model.weights:
        digest.update(variable.path.encode())
        digest.update(np.ascontiguousarray(variable.numpy()).tobytes())
    return digest.hexdigest()[:16]
