"""tfnmt bench --bench=data: the training input pipeline alone, as `train` builds it, with no
model: how its costs grow with the corpus (issue 36's table in docs/benchmarks.md).

Measured, in this order, in one process:
  vocab_seconds             training the vocabulary, when --model_dir has none yet (as `tfnmt
                            vocab` does), and that step's peak memory
  first_batch_seconds       from nothing to the first training batch: opening the corpus
                            (text:DIR scans each file once), the check that a pair fits the
                            length limits, the shuffle buffer's fill and the first tokenization
  target_tokens_per_second  one whole epoch of batches (epoch 0), tokenized, filtered,
                            bucketed, over its wall time; with its batches and sentences
  remake_seconds            from nothing to batch --bench_resume_at x (an epoch's batches):
                            what re-making them costs a resume without the stream's state
  resume_seconds            from nothing to the next batch, the stream restored from its state
                            saved there (training/stream_state.py), as `train` resumes; with
                            the state's size and its save time
  peak_rss_mb               the process's peak memory over the pipeline measurements
                            (the vocabulary's peak is cleared first, where Linux allows)
A model's source window (conv_encoder) would lower the source length limit; the bench uses the
flags' limits as they are.
With --bench_tfds_mock=N (and --data=tfds:NAME), all of it runs on TFDS's mock data: N random
examples per split, made as they are read by TFDS's generator of mock examples (`mock_tfds`), no
files and no network; the generator's Python cost is part of the figures.
"""

import glob
import os
import resource
import tempfile
import time

from tfnmt.data import pipeline, vocab
from tfnmt.errors import ConfigError, DataError, UserError
from tfnmt.training.checkpoints import Checkpoints
from tfnmt.training.stream_state import SavedStream

BATCHING = ("batch_tokens", "batch_size", "max_source_length", "max_target_length")
# --bench_tfds_mock's examples made at a time.
_MOCK_BLOCK = 256


def _peak_rss_mb():
    """The process's peak resident memory since start or since `_clear_peak_rss`."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _clear_peak_rss():
    """Resets VmHWM to the current memory (Linux >= 4.0); False where that is not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def epoch_batches(stream):
    """(batches, sentences, target tokens) of a finite dataset of training batches."""
    batches = sentences = tokens = 0
    for features, labels in stream:
        batches += 1
        sentences += int(labels.shape[0])
        tokens += int((labels.numpy() != 0).sum())
    return batches, sentences, tokens


def bench_data(bench, spec, split, limit, model_dir, options, make_vocab):
    """The figures of the training stream `train` would build from `split` of `spec` (at most
    `limit` pairs) with `model_dir`'s vocabulary and TrainOptions `options`; `make_vocab()`
    trains that vocabulary first where the directory has none (as `tfnmt vocab` would)."""
    if not bench.bench_tfds_mock:
        return _measure(bench, spec, split, limit, model_dir, options, make_vocab)
    if spec.kind != "tfds":
        raise ConfigError(f"--bench_tfds_mock mocks a tfds:NAME source, not {spec.source}")
    with mock_tfds(bench.bench_tfds_mock):
        return _measure(bench, spec, split, limit, model_dir, options, make_vocab)


def mock_tfds(examples):
    """tfds.testing.mock_data with `examples` random examples per split, made as they are read
    (no files, no network) by TFDS's own generator of mock examples, read by index."""
    import tensorflow as tf
    import tensorflow_datasets as tfds
    from tensorflow_datasets.testing import mocking

    # The mock's own dataset is a Python generator, whose iterator a checkpoint cannot save
    # (UnimplementedError): the resume could not be timed once a split outgrows what the
    # pipeline reads ahead. A range of indices can be saved, as TFDS's reader of files can.
    def as_dataset(builder, split, decoders=None, read_config=None, shuffle_files=False):
        features = builder.info.features
        specs = tf.nest.map_structure(lambda info: info.to_tensor_spec(),
                                      features.get_tensor_info())
        flat = tf.nest.flatten(specs)
        made = mocking.RandomFakeGenerator(features, examples)

        def block(indices):
            values = tf.py_function(
                lambda chunk: [list(leaves) for leaves in zip(*(
                    tf.nest.flatten(made[int(i)]) for i in chunk.numpy()))],
                [indices], [spec.dtype for spec in flat])
            return tf.nest.pack_sequence_as(specs, [
                tf.ensure_shape(value, [None, *spec.shape]) for value, spec in zip(values, flat)])
        # Made a block at a time: a call of Python from tf.data costs more than an example.
        return tf.data.Dataset.range(examples).batch(_MOCK_BLOCK).map(block).unbatch()
    return tfds.testing.mock_data(num_examples=examples, as_dataset_fn=as_dataset)


def _measure(bench, spec, split, limit, model_dir, options, make_vocab):
    from tfnmt.data import sources
    from tfnmt.training.trainer import training_stream

    result = {"bench": "data", "data": spec.source, "tfds_mock": bench.bench_tfds_mock,
              "split": split, "batch_tokens": options.batch_tokens,
              "batch_size": options.batch_size, "shuffle_buffer": options.shuffle_buffer}
    try:
        vocab.vocab_paths(model_dir)
    except DataError:  # none yet
        start = time.perf_counter()
        make_vocab()
        result["vocab_seconds"] = round(time.perf_counter() - start, 2)
        result["vocab_peak_rss_mb"] = _peak_rss_mb()
    vocabs = vocab.load_vocabs(model_dir)
    result["peak_rss_cleared"] = _clear_peak_rss()
    batching = {name: getattr(options, name) for name in BATCHING}

    start = time.perf_counter()
    stream = training_stream(spec, split, limit, vocabs, (0, -1), batching, options)
    next(iter(stream))
    result["first_batch_seconds"] = round(time.perf_counter() - start, 2)

    start = time.perf_counter()
    epoch = pipeline.training_epoch(sources.pairs(spec, split, limit), *vocabs, epoch=0,
                                    seed=options.seed, shuffle_buffer=options.shuffle_buffer,
                                    **batching)
    batches, sentences, tokens = epoch_batches(epoch)
    seconds = time.perf_counter() - start
    result.update(epoch_batches=batches, epoch_sentences=sentences, epoch_target_tokens=tokens,
                  epoch_seconds=round(seconds, 2),
                  target_tokens_per_second=round(tokens / seconds, 1))

    result.update(_resume(bench.bench_resume_at, batches, lambda: SavedStream(training_stream(
        spec, split, limit, vocabs, (0, -1), batching, options))))
    result["peak_rss_mb"] = _peak_rss_mb()
    return result


def _resume(share, batches, new_stream):
    """The resume figures after `share` of an epoch of `batches` batches; `new_stream()` makes
    the training stream (a SavedStream) from the start."""
    # A run stopped after `after + 1` batches: making them again is what resuming cost before
    # the stream's state was saved (and still costs without it); restoring that state is what
    # `train` does now.
    result = {}
    after = max(int(share * batches) - 1, 0)
    start = time.perf_counter()
    saved = new_stream()
    saved.start(0)
    pulled = iter(saved.dataset())
    for _ in range(after + 1):
        next(pulled)
    result["remake_seconds"] = round(time.perf_counter() - start, 2)
    with tempfile.TemporaryDirectory() as directory:
        start = time.perf_counter()
        path = Checkpoints(directory, {}, stream=saved).save(after + 1)
        result["state_save_seconds"] = round(time.perf_counter() - start, 2)
        result["state_bytes"] = sum(os.path.getsize(name) for name in glob.glob(path + ".*"))
        start = time.perf_counter()
        resumed = new_stream()
        if not Checkpoints(directory, {}, stream=resumed).restore_latest():
            raise UserError("the saved training stream could not be restored")
        resumed.start(after + 1)
        features, _ = next(iter(resumed.dataset()))
        result["resume_seconds"] = round(time.perf_counter() - start, 2)
    result["resumed_after_batch"] = after
    result["resumed_position"] = [int(v) for v in features["position"].numpy()]
    return result
