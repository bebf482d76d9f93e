"""tf.data transformations from string pairs to padded, bucketed training batches.

Each function returns a `dataset -> dataset` callable for `dataset.apply`, so pipelines read
top to bottom. Element shapes are given in the docstrings.
"""

import tensorflow as tf

from tfnmt.data.vocab import BOS_ID, EOS_ID

_TOKENIZE_CHUNK = 512


def tokenize(source_vocab, target_vocab):
    """(str, str) -> {"source": int32 [S] ending in eos, "target": int32 [T] without bos/eos}."""
    source_tokenizer = source_vocab.tokenizer()
    target_tokenizer = source_tokenizer if target_vocab is source_vocab else target_vocab.tokenizer()

    def _tokenize(source, target):
        # Tokenizing chunks of sentences is far faster than one sentence per call.
        source_ids = source_tokenizer.tokenize(source)
        target_ids = target_tokenizer.tokenize(target)
        eos = tf.fill([source_ids.nrows(), 1], EOS_ID)
        source_ids = tf.concat([source_ids, tf.RaggedTensor.from_tensor(eos)], axis=1)
        return {"source": source_ids, "target": target_ids}

    def apply(dataset):
        return (dataset.batch(_TOKENIZE_CHUNK)
                .map(_tokenize, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
                .unbatch())
    return apply


def filter_length(max_source_length, max_target_length):
    """Drops pairs with an empty side or a side over its maximum length (in subwords)."""
    def keep(example):
        source_length = tf.shape(example["source"])[0] - 1  # without eos
        target_length = tf.shape(example["target"])[0]
        return tf.logical_and(
            tf.logical_and(source_length > 0, target_length > 0),
            tf.logical_and(source_length <= max_source_length, target_length <= max_target_length))
    return lambda dataset: dataset.filter(keep)


def teacher_forcing():
    """{"source", "target"} -> ({"source": [S], "target_in": bos y}, target_out: y eos)."""
    def split(example):
        target = example["target"]
        features = {"source": example["source"],
                    "target_in": tf.concat([[BOS_ID], target], axis=0)}
        return features, tf.concat([target, [EOS_ID]], axis=0)
    return lambda dataset: dataset.map(split, num_parallel_calls=tf.data.AUTOTUNE)


def _length(features, labels):
    return tf.maximum(tf.shape(features["source"])[0], tf.shape(labels)[0])


def bucket_by_tokens(batch_tokens, max_length, num_buckets=8):
    """Batches pairs of similar length so that each batch holds about `batch_tokens` tokens.

    The token count of a batch is (sentences x longest side, padding included), the quantity that
    bounds memory. Batches are padded with 0 (pad).
    """
    step = max(1, -(-max_length // num_buckets))
    boundaries = list(range(step + 1, max_length + 2, step))
    if not boundaries or boundaries[-1] < max_length + 2:
        boundaries.append(max_length + 2)
    batch_sizes = [max(1, batch_tokens // (b - 1)) for b in boundaries] + [max(1, batch_tokens // (max_length + 2))]
    return lambda dataset: dataset.bucket_by_sequence_length(
        _length, bucket_boundaries=boundaries, bucket_batch_sizes=batch_sizes,
        pad_to_bucket_boundary=False, drop_remainder=False)


def batch_sentences(batch_size):
    """Padded batches of a fixed number of sentences (the papers that count batches in sentences)."""
    return lambda dataset: dataset.padded_batch(batch_size)


def training_epoch(pairs, source_vocab, target_vocab, *, epoch, **kwargs):
    """One epoch of training batches, reproducible from (seed, epoch): batch for batch the epoch
    `training_stream` makes (see `_epoch` for the arguments).

    Elements are (features, labels): features {"source": [B, S], "target_in": [B, T],
    "position": [2] (epoch, batch index in the epoch), "epoch_end": bool (the epoch's last
    batch)}, labels [B, T]. The position lets the trainer checkpoint exactly where it is and
    resume at the next batch; epoch_end lets it validate per epoch.
    """
    # Built inside a dataset function, as the stream builds each epoch: TensorFlow derives
    # shuffle seeds differently eagerly and in a function when the global seed is 0.
    return (tf.data.Dataset.from_tensors(tf.constant(epoch, tf.int64))
            .flat_map(lambda e: _epoch(pairs, source_vocab, target_vocab, epoch=e, **kwargs)))


def _epoch(pairs, source_vocab, target_vocab, *, epoch, seed, batch_tokens=0, batch_size=0,
           max_source_length=100, max_target_length=100, shuffle_buffer=100_000):
    graph = tf.compat.v1.get_default_graph()
    if graph.seed is not None and graph.seed % (2**31 - 1) == 0:
        # TensorFlow compares (global seed, op seed) with (0, 0) in Python, which fails on a
        # tensor op seed (the epoch's) when the global seed is 0 (`--seed=0`): the function
        # takes TensorFlow's seed for "none set" instead.
        graph.seed = None
    dataset = (pairs.shuffle(shuffle_buffer, seed=seed + epoch, reshuffle_each_iteration=False)
               .apply(tokenize(source_vocab, target_vocab))
               .apply(filter_length(max_source_length, max_target_length))
               .apply(teacher_forcing()))
    if batch_tokens:
        dataset = dataset.apply(bucket_by_tokens(batch_tokens, max(max_source_length + 1, max_target_length + 1)))
        # Bucketing emits batches in an order that depends on lengths; shuffle the batches too.
        dataset = dataset.shuffle(64, seed=seed + epoch, reshuffle_each_iteration=False)
    else:
        dataset = dataset.apply(batch_sentences(batch_size))

    def add_position(index, batch):
        features, labels = batch
        features = dict(features, position=tf.stack([tf.cast(epoch, tf.int64), index]))
        return features, labels
    return dataset.enumerate().map(add_position).apply(mark_last())


def _empty_like(element_spec):
    """An element of `element_spec` with every unknown dimension 0 (a placeholder)."""
    return tf.nest.map_structure(
        lambda spec: tf.zeros([0 if d is None else d for d in spec.shape], spec.dtype), element_spec)


def mark_last():
    """Adds features["epoch_end"]: whether the batch is the dataset's last. The size of an epoch
    is unknown until it ends, so each batch is held back until the next one (or the end) comes:
    a scan over the batches and an end marker, cheaper than a tf.data window."""
    def apply(dataset):
        empty = _empty_like(dataset.element_spec)
        marked = (dataset.map(lambda *batch: (batch, False))
                  .concatenate(tf.data.Dataset.from_tensors((empty, True))))

        def delay(state, element):
            (held, holding), (batch, end) = state, element
            return (batch, True), (held, end, holding)
        return (marked.scan((empty, False), delay)
                .filter(lambda batch, last, real: real)
                .map(lambda batch, last, real: (dict(batch[0], epoch_end=last), batch[1])))
    return apply


def group(n):
    """Every n consecutive batches as one element, a tuple of n (features, labels), for one
    optimizer step over all of them (gradient accumulation; training/step.py). Each
    batch keeps its own shape. n = 1 leaves the batches as they are."""
    if n == 1:
        return lambda dataset: dataset

    def apply(dataset):
        empty = _empty_like(dataset.element_spec)

        def collect(state, batch):
            # The state holds the last n-1 batches; every n-th batch completes a group.
            count, held = state
            return (count + 1, held[1:] + (batch,)), (held + (batch,), count % n == n - 1)
        start = (tf.constant(0, tf.int64), (empty,) * (n - 1))
        return (dataset.scan(start, collect)
                .filter(lambda batches, complete: complete)
                .map(lambda batches, complete: batches))
    return apply


def training_stream(pairs, source_vocab, target_vocab, *, start_epoch=0, skip_batches=0,
                    accumulate_steps=1, data_service="", job_name="", **kwargs):
    """Endless training batches from epoch `start_epoch`, skipping its first `skip_batches`;
    grouped by `accumulate_steps` (see `group`). Groups run on across epoch ends. With
    `data_service`, the batches are made by that tf.data service (`served`)."""
    def epoch_dataset(epoch):
        dataset = _epoch(pairs, source_vocab, target_vocab, epoch=epoch, **kwargs)
        return dataset.skip(tf.where(epoch == start_epoch, tf.cast(skip_batches, tf.int64), 0))
    stream = tf.data.Dataset.range(start_epoch, 1 << 62).flat_map(epoch_dataset)
    if data_service:
        stream = stream.apply(served(data_service, job_name))
    options = tf.data.Options()
    # An iterator of the stream is saved in checkpoints (training/trainer.py); the one state it
    # cannot hold, the tokenizers' SentencePiece models, is the vocabulary's, made again.
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return (stream.apply(group(accumulate_steps)).prefetch(tf.data.AUTOTUNE)
            .with_options(options))


def served(address, job_name):
    """The batches of an epoch stream made by the tf.data service whose dispatcher is at
    `address`: the dispatcher hands each epoch to one of its workers, so W workers make W
    epochs at once, and every consumer of the job `job_name` (each training worker of one run)
    gets a share of the batches, none twice. Batches of one epoch arrive in order; epochs made
    at once interleave."""
    return tf.data.experimental.service.distribute(
        processing_mode="distributed_epoch", service=address, job_name=job_name)


def evaluation_batches(pairs, source_vocab, target_vocab, *, batch_tokens=0, batch_size=0,
                       max_source_length=100, max_target_length=100):
    """Validation batches in a fixed order (no shuffling), same element spec minus position."""
    dataset = (pairs.apply(tokenize(source_vocab, target_vocab))
               .apply(filter_length(max_source_length, max_target_length))
               .apply(teacher_forcing()))
    if batch_tokens:
        dataset = dataset.apply(bucket_by_tokens(batch_tokens, max(max_source_length + 1, max_target_length + 1)))
    else:
        dataset = dataset.apply(batch_sentences(batch_size))
    return dataset.prefetch(tf.data.AUTOTUNE)
