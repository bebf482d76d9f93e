"""tf.data transformations from string pairs to padded training batches of similar lengths.

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


# Pairs sorted by length together: a window leaves at most one partial batch.
SORT_WINDOW = 10_000


def token_batches(batch_tokens, window=SORT_WINDOW):
    """Batches of about `batch_tokens` tokens, cut from windows of `window` pairs sorted by
    length, as fairseq batches: each batch takes the next pairs of its window while (sentences x
    longest side, padding included: the quantity that bounds memory) stays within the budget, so
    pairs of similar length share a batch. A scheme of length buckets leaves one partial batch per
    bucket and window, many small batches on a small corpus; this leaves one per window. Batches
    are padded with 0 (pad) and come out shortest first: shuffle them."""
    def with_lengths(features, labels):
        lengths = {name: tf.shape(value, out_type=tf.int64)[0] for name, value in features.items()}
        return features, labels, dict(lengths, labels=tf.shape(labels, out_type=tf.int64)[0])

    def cut(features, labels, lengths):
        longest = tf.maximum(lengths["source"], lengths["labels"])
        order = tf.argsort(longest, stable=True)

        def fill(state, length):  # state: (batch index, its sentences); lengths ascending
            batch, count = state
            fits = (count == 0) | ((count + 1) * length <= batch_tokens)
            return tf.where(fits, batch, batch + 1), tf.where(fits, count + 1, 1)
        batch_of, _ = tf.scan(fill, tf.gather(longest, order),
                              initializer=(tf.constant(0, tf.int64), tf.constant(0, tf.int64)))
        starts = tf.concat([[0], tf.where(batch_of[1:] != batch_of[:-1])[:, 0] + 1], 0)
        ends = tf.concat([starts[1:], tf.shape(order, out_type=tf.int64)], 0)
        features, labels, lengths = tf.nest.map_structure(lambda t: tf.gather(t, order),
                                                          (features, labels, lengths))

        def batch(a, b):  # each tensor cut to the longest of its rows in the batch
            return ({name: value[a:b, :tf.reduce_max(lengths[name][a:b])]
                     for name, value in features.items()},
                    labels[a:b, :tf.reduce_max(lengths["labels"][a:b])])
        return tf.data.Dataset.from_tensor_slices((starts, ends)).map(batch)
    # Padded, not ragged, windows: tf.data's ragged_batch costs in proportion to the window's
    # capacity, not to the pairs it holds, which a small corpus paid at every batch
    # (docs/benchmarks.md, "Windows of a small corpus").
    return lambda dataset: dataset.map(with_lengths).padded_batch(window).flat_map(cut)


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
        dataset = dataset.apply(token_batches(batch_tokens))
        # Sorted windows emit their batches shortest first; shuffle the batches too.
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
    # tf.data's autotuning thread sleeps between rounds, and the iterator's destructor waits for
    # it: training's process hung after its last line, and the throughput gained nothing from it
    # (docs/benchmarks.md, "The slow exit"). Parallel maps then take one call per core.
    options.autotune.enabled = False
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
        dataset = dataset.apply(token_batches(batch_tokens))
    else:
        dataset = dataset.apply(batch_sentences(batch_size))
    return dataset.prefetch(tf.data.AUTOTUNE)
