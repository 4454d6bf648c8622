"""tf.data pipeline for translation: tokenise once, then length buckets.

A corpus is tokenised once, up front, by the vocabulary's in-graph tokenizer
(`tokenize_pairs`): the same ids serve the length filter's count, every
epoch of the pipeline and a recording of its batches
(`keras_structattn.tasks.translation.recorded`).

Batches follow tensor2tensor: examples are grouped into buckets by length,
and each bucket's batch size is chosen so that a batch holds at most about
`batch_tokens` tokens (padding included). Padding every batch to its bucket's
boundary keeps the number of distinct batch shapes small, which matters
under XLA (one compiled program per shape).

    tokens = tokenize_pairs(pairs, vocab, vocab)
    dataset, report = make_tokenized_dataset(tokens, max_length=64, seed=1)
    # or both in one call: make_translation_dataset(pairs, vocab, vocab, ...)
"""

import dataclasses

import numpy as np

from keras_structattn import checks
from keras_structattn.data._tensorflow import tf
from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.decoding.tokens import PAD_ID
from keras_structattn.tasks.translation.parallel_text import FilterReport
from keras_structattn.tasks.translation.parallel_text import _check_pair


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
    checks.positive_int("max_length", max_length)
    checks.positive_int("min_length", min_length)
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
    checks.positive_int("batch_tokens", batch_tokens)
    checks.positive_int("max_length", max_length)
    return [max(1, batch_tokens // length) for length in list(boundaries) + [max_length]]


# Sentences per call of the in-graph tokenizer: bounds the memory of one
# string tensor on large corpora; the ids do not depend on it.
_TOKENIZE_CHUNK = 65536


@dataclasses.dataclass(frozen=True, eq=False)
class TokenizedPairs:
    """The token ids of sentence pairs, EOS appended, stored flat.

    Row `i`'s source ids are `source_tokens[source_offsets[i] :
    source_offsets[i + 1]]` (likewise for the target): one flat array per
    side instead of a Python list per sentence, so a corpus of millions of
    pairs stays small. Made by `tokenize_pairs`, read by `make_tokenized_dataset`
    and `keras_structattn.tasks.translation.recorded.save_recording`; NumPy only.

    Attributes:
        source_tokens: int32 `[total source tokens]`.
        source_offsets: int64 `[num_pairs + 1]`, starting at 0.
        target_tokens: int32 `[total target tokens]`.
        target_offsets: int64 `[num_pairs + 1]`, starting at 0.
    """

    source_tokens: np.ndarray
    source_offsets: np.ndarray
    target_tokens: np.ndarray
    target_offsets: np.ndarray

    @classmethod
    def from_lists(cls, pairs):
        """From a list of `(source_ids, target_ids)` (EOS already appended)."""
        pairs = list(pairs)
        sides = []
        for k in (0, 1):
            rows = [np.asarray(pair[k], np.int32).reshape(-1) for pair in pairs]
            offsets = np.cumsum([0] + [len(row) for row in rows], dtype=np.int64)
            tokens = np.concatenate(rows) if rows else np.zeros([0], np.int32)
            sides += [tokens.astype(np.int32), offsets]
        return cls(*sides)

    def __len__(self):
        return len(self.source_offsets) - 1

    def __getitem__(self, i):
        """Pair `i` as two int32 arrays `(source_ids, target_ids)`."""
        if not -len(self) <= i < len(self):
            raise IndexError(f"Pair {i} of {len(self)}")
        i %= len(self)
        return (
            self.source_tokens[self.source_offsets[i] : self.source_offsets[i + 1]],
            self.target_tokens[self.target_offsets[i] : self.target_offsets[i + 1]],
        )

    def lengths(self):
        """`(source_lengths, target_lengths)`, int64 `[num_pairs]`, EOS included."""
        return np.diff(self.source_offsets), np.diff(self.target_offsets)


def _check_vocab(name, vocab):
    if not hasattr(vocab, "tf_encode"):
        raise ValueError(
            f"Argument `{name}` must be a vocabulary with `tf_encode` "
            f"(SubwordVocab, CharVocab). Received: {vocab!r}"
        )


def _tokenize_side(vocab, texts):
    """In-graph `tf_encode` of `texts`, EOS appended: `(tokens, offsets)`."""
    chunks, lengths = [], []
    for start in range(0, len(texts), _TOKENIZE_CHUNK):
        strings = texts[start : start + _TOKENIZE_CHUNK]
        ids = vocab.tf_encode(tf.constant(strings, dtype=tf.string, shape=[len(strings)]))
        chunks.append(np.asarray(ids.flat_values, np.int32))
        lengths.append(np.asarray(ids.row_lengths(), np.int64))
    lengths = np.concatenate(lengths) + 1 if lengths else np.zeros([0], np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = np.full([offsets[-1]], EOS_ID, np.int32)
    # Every slot but the last of each row takes the next id in order.
    not_eos = np.ones([offsets[-1]], bool)
    not_eos[offsets[1:] - 1] = False
    tokens[not_eos] = np.concatenate(chunks) if chunks else np.zeros([0], np.int32)
    return tokens, offsets


def tokenize_pairs(pairs, source_vocab, target_vocab):
    """Tokenises sentence pairs once, with the vocabularies' in-graph tokenizers.

    The ids are those the `tf.data` pipeline trains on: the in-graph
    tokenizer (`tf_encode`) is used rather than the Python one (`encode`),
    because TF-text's SentencePiece breaks rare ties between equally likely
    segmentations the other way (see `keras_structattn.data.vocab`), and a
    count or a recording must match the batches exactly. EOS is appended to
    both sides, as the pipeline feeds them.

    Args:
        pairs: sequence of `(source, target)` string pairs.
        source_vocab: vocabulary of the sources (`SubwordVocab` or
            `CharVocab`; anything with `tf_encode`).
        target_vocab: vocabulary of the targets (may be `source_vocab`).

    Returns:
        A `TokenizedPairs`, in the order of `pairs`.

    Raises:
        ValueError: if a vocabulary has no `tf_encode`, or an item of
            `pairs` is not a pair of strings (names its index).
    """
    _check_vocab("source_vocab", source_vocab)
    _check_vocab("target_vocab", target_vocab)
    pairs = list(pairs)
    for index, pair in enumerate(pairs):
        _check_pair(index, pair)
    source = _tokenize_side(source_vocab, [s for s, _ in pairs])
    target = _tokenize_side(target_vocab, [t for _, t in pairs])
    return TokenizedPairs(*source, *target)


def make_translation_dataset(pairs, source_vocab, target_vocab, **options):
    """A bucketed `tf.data.Dataset` of translation batches, and a report.

    `tokenize_pairs` then `make_tokenized_dataset`: the pairs are tokenised
    once, by the vocabularies' in-graph tokenizers, and the pipeline batches
    those ids. Call the two yourself to keep the `TokenizedPairs` (e.g. to
    record the batches with `keras_structattn.tasks.translation.recorded`).

    Args:
        pairs: sequence of `(source, target)` string pairs.
        source_vocab: vocabulary of the sources (`SubwordVocab` or
            `CharVocab`; anything with `tf_encode`).
        target_vocab: vocabulary of the targets (may be `source_vocab`).
        **options: the keyword arguments of `make_tokenized_dataset`
            (`batch_tokens`, `max_length`, `length_bucket_step`,
            `min_bucket_length`, `shuffle`, `seed`, `repeat`,
            `shuffle_buffer`).

    Returns:
        `(dataset, report)`: see `make_tokenized_dataset`.

    Raises:
        ValueError: on an invalid argument (names it and the allowed values).
    """
    return make_tokenized_dataset(tokenize_pairs(pairs, source_vocab, target_vocab), **options)


def _length_report(tokens, max_length):
    """Counts the pairs the pipeline's length filter drops.

    Args:
        tokens: a `TokenizedPairs`.
        max_length: longest sequence kept, in tokens, EOS included.

    Returns:
        A `FilterReport` (`too_long`; `empty` is 0: the pipeline keeps pairs
        with an empty side, drop them first with `filter_pairs`).
    """
    checks.positive_int("max_length", max_length)
    source_lengths, target_lengths = tokens.lengths()
    too_long = int(np.count_nonzero((source_lengths > max_length) | (target_lengths > max_length)))
    return FilterReport(
        total=len(tokens), kept=len(tokens) - too_long, too_long=too_long, max_length=max_length
    )


def _dense_pair(source_ids, target_ids):
    return tf.convert_to_tensor(source_ids), tf.convert_to_tensor(target_ids)


def make_tokenized_dataset(
    tokens,
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
    """A bucketed `tf.data.Dataset` of tokenised pairs, and a report.

    Each element is `((source_ids, decoder_inputs), targets)`, three int32
    tensors of shape `[batch, length]`, ready for `model.fit`. For a pair
    whose ids (EOS included, see `tokenize_pairs`) are `s` and `t + [EOS]`:

    * `source_ids = s`
    * `targets = t + [EOS]`
    * `decoder_inputs = [0] + t` (tensor2tensor's "shift right", with the
      padding id 0 as the start symbol; there is no BOS),

    all padded with 0. Nothing is tokenised here: every epoch reads the ids
    of `tokens`.

    Pairs whose source or target, EOS included, is longer than `max_length`
    tokens are dropped inside the pipeline. Their number is counted from
    the same ids (`_length_report`) and returned as a `FilterReport`
    (`too_long`; `empty` stays 0: pairs with an empty side are kept, so drop
    them first with `filter_pairs` if you want). They are dropped after the
    shuffle, so the order of the kept pairs is that of shuffling all of
    them: a given `seed` gives the batches it has always given.

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
        tokens: a `TokenizedPairs` (from `tokenize_pairs`).
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
    checks.positive_int("batch_tokens", batch_tokens)
    checks.positive_int("max_length", max_length)
    checks.positive_int("min_bucket_length", min_bucket_length)
    checks.positive_int("shuffle_buffer", shuffle_buffer)
    _check_step(length_bucket_step)
    if seed is not None:
        checks.non_negative_int("seed", seed)
    if not isinstance(tokens, TokenizedPairs):
        raise ValueError(
            "Argument `tokens` must be a `TokenizedPairs` (see `tokenize_pairs`). "
            f"Received: type {type(tokens).__name__}"
        )
    report = _length_report(tokens, max_length)

    boundaries = bucket_boundaries(max_length, min_bucket_length, length_bucket_step)
    batch_sizes = bucket_batch_sizes(boundaries, batch_tokens, max_length)
    # tf.data pads bucket i to `boundary - 1` and refuses keys beyond the
    # last boundary, so one more boundary, `max_length + 1`, makes the last
    # t2t bucket (keys up to `max_length`) pad to `max_length`. tf.data also
    # wants a batch size for the bucket past it, which the length filter
    # leaves empty: 1.
    tf_boundaries = boundaries + [max_length + 1]
    tf_batch_sizes = batch_sizes + [1]

    sources = tf.RaggedTensor.from_row_splits(tokens.source_tokens, tokens.source_offsets)
    targets = tf.RaggedTensor.from_row_splits(tokens.target_tokens, tokens.target_offsets)
    dataset = tf.data.Dataset.from_tensor_slices((sources, targets))
    # The slices of a ragged tensor are typed as ragged (of ragged rank 0),
    # which `bucket_by_sequence_length` refuses: make them plain tensors.
    dataset = dataset.map(_dense_pair)
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()

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

    dataset = dataset.filter(fits)
    dataset = dataset.bucket_by_sequence_length(
        element_length_func=length,
        bucket_boundaries=tf_boundaries,
        bucket_batch_sizes=tf_batch_sizes,
        padding_values=(tf.constant(PAD_ID, tf.int32), tf.constant(PAD_ID, tf.int32)),
        pad_to_bucket_boundary=True,
    )
    # Parallel map keeps the element order (tf.data's default), so the
    # pipeline is deterministic given `seed`.
    dataset = dataset.map(to_model_io, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    return dataset, report


class TrainingBatches:
    """A training run's bucketed batches: its train and dev pairs, tokenised once.

    Args:
        train_pairs: the training `(source, target)` pairs.
        dev_pairs: the dev pairs; None or empty for none.
        vocab: the vocabulary of both sides (`tokenize_pairs`).
        seed: the seed of the training batches' shuffle.
        **options: `batch_tokens`, `max_length`, `length_bucket_step` (and
            the other batching options) of `make_tokenized_dataset`.

    Attributes:
        train_tokens: the training `TokenizedPairs`.
        train_report: the `FilterReport` of the training batches.
        dev_tokens: the dev `TokenizedPairs`, or None.
        validation: the dev batches, one pass in order (a `tf.data.Dataset`),
            or None.
        validation_report: their `FilterReport`, or None.
        validation_steps: their number of batches (counted once), or None.
    """

    def __init__(self, train_pairs, dev_pairs, vocab, *, seed, **options):
        self.train_tokens = tokenize_pairs(train_pairs, vocab, vocab)
        self._train_options = dict(options, shuffle=True, seed=seed, repeat=True)
        self.train_report = make_tokenized_dataset(self.train_tokens, **self._train_options)[1]
        self.dev_tokens = self.validation = self.validation_report = None
        self.validation_steps = None
        if dev_pairs:
            self.dev_tokens = tokenize_pairs(dev_pairs, vocab, vocab)
            self.validation, self.validation_report = make_tokenized_dataset(
                self.dev_tokens, shuffle=False, repeat=False, **options)
            self.validation_steps = sum(1 for _ in self.validation)

    def train(self, start=0):
        """The training batches (shuffled, repeated) from batch `start` on.

        Args:
            start: batches to skip (the steps a resumed run has done).

        Returns:
            A new `tf.data.Dataset`: every call reads the same batches.
        """
        return make_tokenized_dataset(self.train_tokens, **self._train_options)[0].skip(start)
