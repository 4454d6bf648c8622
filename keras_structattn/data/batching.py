"""tf.data pipeline for translation: in-graph tokenisation, length buckets.

Batches follow tensor2tensor: examples are grouped into buckets by length,
and each bucket's batch size is chosen so that a batch holds at most about
`batch_tokens` tokens (padding included). Padding every batch to its bucket's
boundary keeps the number of distinct batch shapes small, which matters
under XLA (one compiled program per shape).
"""

from keras_structattn.data._tensorflow import tf
from keras_structattn.data.parallel_text import FilterReport
from keras_structattn.data.parallel_text import _check_pair
from keras_structattn.data.vocab import EOS_ID
from keras_structattn.data.vocab import PAD_ID
from keras_structattn.ops import _checks


def _check_step(length_bucket_step):
    if (
        isinstance(length_bucket_step, bool)
        or not isinstance(length_bucket_step, (int, float))
        or not length_bucket_step > 1
    ):
        raise ValueError(
            "Argument `length_bucket_step` must be a number > 1. "
            f"Received: length_bucket_step={length_bucket_step!r}"
        )


def bucket_boundaries(max_length, min_length=8, length_bucket_step=1.1):
    """Length-bucket boundaries, as tensor2tensor's `_bucket_boundaries`.

    Starting at `x = min_length`, appends `x` and moves on to
    `max(x + 1, int(x * length_bucket_step))` while `x < max_length`: steps
    of one token for short lengths, then geometric steps.

    Args:
        max_length: the longest sequence length (boundaries stay below it).
        min_length: the first boundary.
        length_bucket_step: growth factor between boundaries, > 1.

    Returns:
        A strictly increasing list of ints, all `< max_length` (empty when
        `min_length >= max_length`). E.g. `bucket_boundaries(64)` is
        `[8, 9, ..., 20, 22, 24, 26, 28, 30, 33, 36, 39, 42, 46, 50, 55, 60]`.
    """
    _checks.positive_int("max_length", max_length)
    _checks.positive_int("min_length", min_length)
    _check_step(length_bucket_step)
    boundaries = []
    x = min_length
    while x < max_length:
        boundaries.append(x)
        x = max(x + 1, int(x * length_bucket_step))
    return boundaries


def bucket_batch_sizes(boundaries, batch_tokens, max_length):
    """Batch size of each bucket, as tensor2tensor's batching scheme.

    Bucket `i < len(boundaries)` holds lengths below `boundaries[i]`; the
    last one holds lengths up to `max_length`.

    Args:
        boundaries: the bucket boundaries (see `bucket_boundaries`).
        batch_tokens: tokens per batch (rows x padded length), at most.
        max_length: the longest sequence length.

    Returns:
        A list of `len(boundaries) + 1` ints,
        `max(1, batch_tokens // length)` for each length in
        `boundaries + [max_length]`.
    """
    _checks.positive_int("batch_tokens", batch_tokens)
    _checks.positive_int("max_length", max_length)
    return [max(1, batch_tokens // length) for length in list(boundaries) + [max_length]]


def _length_report(pairs, source_vocab, target_vocab, max_length):
    """Counts, in Python, the pairs the pipeline's length filter drops."""
    report = FilterReport(total=len(pairs), max_length=max_length)
    for source, target in pairs:
        # + 1: the EOS appended to both sides.
        if (
            len(source_vocab.encode(source)) + 1 > max_length
            or len(target_vocab.encode(target)) + 1 > max_length
        ):
            report.too_long += 1
    report.kept = report.total - report.too_long
    return report


def make_translation_dataset(
    pairs,
    source_vocab,
    target_vocab,
    *,
    batch_tokens=4096,
    max_length=64,
    length_bucket_step=1.1,
    min_bucket_length=8,
    shuffle=True,
    seed=None,
    repeat=False,
    shuffle_buffer=10000,
):
    """A bucketed `tf.data.Dataset` of translation batches, and a report.

    Each element is `((source_ids, decoder_inputs), targets)`, three int32
    tensors of shape `[batch, length]`, ready for `model.fit`. For a pair
    whose source encodes to ids `s` and target to ids `t`:

    * `source_ids = s + [EOS]`
    * `targets = t + [EOS]`
    * `decoder_inputs = [0] + t` (tensor2tensor's "shift right", with the
      padding id 0 as the start symbol; there is no BOS),

    all padded with 0. Tokenisation runs inside the tf.data graph
    (`vocab.tf_encode`).

    Pairs whose source or target, EOS included, is longer than `max_length`
    tokens are dropped inside the pipeline. Their number is counted
    beforehand in Python (`vocab.encode`) and returned as a `FilterReport`
    (`too_long`; `empty` stays 0: pairs with an empty side are kept, so drop
    them first with `filter_pairs` if you want).

    Batching (tensor2tensor's scheme): the key of a pair is
    `max(len(source_ids), len(targets))`. With
    `b = bucket_boundaries(max_length, min_bucket_length, length_bucket_step)`,
    bucket `i` holds keys in `[b[i-1], b[i])` and the last bucket keys in
    `[b[-1], max_length]`. Both source and target of a batch are padded to
    the same length: the bucket's largest key, i.e. `b[i] - 1` (as
    `tf.data`'s `pad_to_bucket_boundary` does), or `max_length` for the last
    bucket. A bucket's batch size is `bucket_batch_sizes(b, batch_tokens,
    max_length)[i]`, so a batch holds at most `batch_tokens` tokens
    (rows x padded length), except single-row batches of sequences longer
    than `batch_tokens`. Hence there are at most `len(b) + 1` padded
    lengths, and with `repeat=True` one batch shape per bucket; with
    `repeat=False` the last batch of a bucket in an epoch may have fewer rows.

    Args:
        pairs: sequence of `(source, target)` string pairs.
        source_vocab: vocabulary of the sources (`SubwordVocab` or
            `CharVocab`; anything with `encode` and `tf_encode`).
        target_vocab: vocabulary of the targets (may be `source_vocab`).
        batch_tokens: tokens per batch, at most (see above).
        max_length: longest sequence kept, in tokens, EOS included.
        length_bucket_step: growth factor of the bucket boundaries, > 1.
        min_bucket_length: the first bucket boundary.
        shuffle: shuffle the pairs (with a buffer of `shuffle_buffer`)
            before batching, anew in each epoch.
        seed: `None` or an int seed for the shuffle; with an int, the order
            of pairs and batches is the same in every run.
        repeat: repeat the data forever (epochs follow one another without
            a partial batch between them).
        shuffle_buffer: size of the shuffle buffer (the Tatoeba train split
            is sorted by length: keep it at least as large as the data for
            a full shuffle).

    Returns:
        `(dataset, report)`: the `tf.data.Dataset` and a `FilterReport` of
        the pairs dropped for length.

    Raises:
        ValueError: on an invalid argument (names it and the allowed values).
    """
    _checks.positive_int("batch_tokens", batch_tokens)
    _checks.positive_int("max_length", max_length)
    _checks.positive_int("min_bucket_length", min_bucket_length)
    _checks.positive_int("shuffle_buffer", shuffle_buffer)
    _check_step(length_bucket_step)
    if seed is not None:
        _checks.non_negative_int("seed", seed)
    for name, vocab in (("source_vocab", source_vocab), ("target_vocab", target_vocab)):
        if not (hasattr(vocab, "encode") and hasattr(vocab, "tf_encode")):
            raise ValueError(
                f"Argument `{name}` must be a vocabulary with `encode` and "
                f"`tf_encode` (SubwordVocab, CharVocab). Received: {vocab!r}"
            )
    pairs = list(pairs)
    for index, pair in enumerate(pairs):
        _check_pair(index, pair)

    report = _length_report(pairs, source_vocab, target_vocab, max_length)

    boundaries = bucket_boundaries(max_length, min_bucket_length, length_bucket_step)
    batch_sizes = bucket_batch_sizes(boundaries, batch_tokens, max_length)
    # tf.data pads bucket i to `boundary - 1` and refuses keys beyond the
    # last boundary, so one more boundary, `max_length + 1`, makes the last
    # t2t bucket (keys up to `max_length`) pad to `max_length`. tf.data also
    # wants a batch size for the bucket past it, which the length filter
    # leaves empty: 1.
    tf_boundaries = boundaries + [max_length + 1]
    tf_batch_sizes = batch_sizes + [1]

    sources = tf.constant([s for s, _ in pairs], dtype=tf.string, shape=[len(pairs)])
    targets = tf.constant([t for _, t in pairs], dtype=tf.string, shape=[len(pairs)])
    dataset = tf.data.Dataset.from_tensor_slices((sources, targets))
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()

    eos = tf.constant([EOS_ID], tf.int32)

    def encode(source, target):
        source_ids = tf.concat([tf.cast(source_vocab.tf_encode(source), tf.int32), eos], 0)
        target_ids = tf.concat([tf.cast(target_vocab.tf_encode(target), tf.int32), eos], 0)
        return source_ids, target_ids

    def fits(source_ids, target_ids):
        return tf.logical_and(
            tf.size(source_ids) <= max_length, tf.size(target_ids) <= max_length
        )

    def length(source_ids, target_ids):
        return tf.maximum(tf.size(source_ids), tf.size(target_ids))

    def to_model_io(source_ids, target_ids):
        # Shift right on the padded batch: the dropped last column is EOS or
        # padding, so this equals padding `[0] + t` row by row.
        decoder_inputs = tf.pad(target_ids[:, :-1], [[0, 0], [1, 0]], constant_values=PAD_ID)
        return (source_ids, decoder_inputs), target_ids

    # Parallel map keeps the element order (tf.data's default), so the
    # pipeline is deterministic given `seed`.
    dataset = dataset.map(encode, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.filter(fits)
    dataset = dataset.bucket_by_sequence_length(
        element_length_func=length,
        bucket_boundaries=tf_boundaries,
        bucket_batch_sizes=tf_batch_sizes,
        padding_values=(tf.constant(PAD_ID, tf.int32), tf.constant(PAD_ID, tf.int32)),
        pad_to_bucket_boundary=True,
    )
    dataset = dataset.map(to_model_io, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    return dataset, report
