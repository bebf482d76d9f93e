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


def training_epoch(pairs, source_vocab, target_vocab, *, epoch, seed, batch_tokens=0,
                   batch_size=0, max_source_length=100, max_target_length=100,
                   shuffle_buffer=100_000):
    """One epoch of training batches, reproducible from (seed, epoch).

    Elements are (features, labels): features {"source": [B, S], "target_in": [B, T],
    "position": [2] (epoch, batch index in the epoch)}, labels [B, T]. The position lets the
    trainer checkpoint exactly where it is and resume at the next batch.
    """
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
    return dataset.enumerate().map(add_position)


def training_stream(pairs, source_vocab, target_vocab, *, start_epoch=0, skip_batches=0, **kwargs):
    """Endless training batches from epoch `start_epoch`, skipping its first `skip_batches`."""
    def epoch_dataset(epoch):
        dataset = training_epoch(pairs, source_vocab, target_vocab, epoch=epoch, **kwargs)
        return dataset.skip(tf.where(epoch == start_epoch, tf.cast(skip_batches, tf.int64), 0))
    epochs = tf.data.Dataset.range(start_epoch, 1 << 62)
    return epochs.flat_map(epoch_dataset).prefetch(tf.data.AUTOTUNE)


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
