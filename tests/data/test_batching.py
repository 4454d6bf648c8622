"""Bucket boundaries and the translation `tf.data` pipeline."""

import collections
import itertools

import numpy as np
import pytest

from keras_structattn.data import EOS_ID
from keras_structattn.data import PAD_ID
from keras_structattn.tasks.translation import batching
from keras_structattn.tasks.translation import bucket_batch_sizes
from keras_structattn.tasks.translation import bucket_boundaries
from keras_structattn.tasks.translation import make_translation_dataset
from keras_structattn.tasks.translation.batching import TokenizedPairs
from keras_structattn.tasks.translation.batching import make_tokenized_dataset
from keras_structattn.tasks.translation.batching import tokenize_pairs

BATCH_TOKENS = 512
MAX_LENGTH = 24

# tensor2tensor's rule by hand: x -> max(x + 1, int(x * step)) while x < max.
T2T_64 = [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
T2T_64 += [22, 24, 26, 28, 30, 33, 36, 39, 42, 46, 50, 55, 60]
T2T_256 = T2T_64 + [66, 72, 79, 86, 94, 103, 113, 124, 136, 149, 163, 179, 196, 215, 236]


@pytest.mark.parametrize(
    "args, expected",
    [
        ((64,), T2T_64),
        ((256,), T2T_256),
        ((61,), T2T_64),  # 60 < 61
        ((60,), T2T_64[:-1]),  # boundaries stay below max_length
        ((8,), []),
        ((9,), [8]),
        ((40, 4, 2), [4, 8, 16, 32]),
        ((30, 8, 1.5), [8, 12, 18, 27]),
        ((10, 1, 1.01), [1, 2, 3, 4, 5, 6, 7, 8, 9]),  # at least +1 per step
    ],
)
def test_bucket_boundaries_t2t(args, expected):
    assert bucket_boundaries(*args) == expected


def test_bucket_batch_sizes():
    assert bucket_batch_sizes([8, 9, 10], 100, 12) == [12, 11, 10, 8]
    assert bucket_batch_sizes([8, 9, 10], 5, 12) == [1, 1, 1, 1]
    assert bucket_batch_sizes([], 4096, 64) == [64]


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"max_length": 64, "length_bucket_step": 1.0}, "length_bucket_step"),
        ({"max_length": 0}, "max_length"),
        ({"max_length": 64, "min_length": 0}, "min_length"),
    ],
)
def test_bucket_boundaries_invalid(kwargs, name):
    with pytest.raises(ValueError, match=name):
        bucket_boundaries(**kwargs)


def _batches(dataset):
    """The batches of one epoch, as NumPy triples (source, decoder, target)."""
    return [(s, d, t) for (s, d), t in dataset.as_numpy_iterator()]


def _rows(batch):
    """Un-padded id rows (EOS removed) of a batch."""
    return [tuple(row[: list(row).index(EOS_ID)]) for row in batch]


@pytest.fixture(scope="module")
def epoch(train_pairs, subword_vocab):
    dataset, report = make_translation_dataset(
        train_pairs,
        subword_vocab,
        subword_vocab,
        batch_tokens=BATCH_TOKENS,
        max_length=MAX_LENGTH,
        seed=0,
        shuffle_buffer=len(train_pairs),
    )
    return _batches(dataset), report


def _batch_size_by_padded_length(max_length, batch_tokens):
    """{padded length of a bucket: its batch size} (t2t buckets, tf.data padding)."""
    boundaries = bucket_boundaries(max_length)
    padded = [b - 1 for b in boundaries] + [max_length]
    return dict(zip(padded, bucket_batch_sizes(boundaries, batch_tokens, max_length)))


def _fits(pair, vocab, max_length=MAX_LENGTH):
    return all(len(vocab.encode(side)) + 1 <= max_length for side in pair)


def test_report_counts(epoch, train_pairs, subword_vocab):
    batches, report = epoch
    dropped = sum(not _fits(pair, subword_vocab) for pair in train_pairs)
    assert dropped > 0  # the long end of the slice
    assert (report.total, report.too_long, report.empty) == (len(train_pairs), dropped, 0)
    assert report.kept == len(train_pairs) - dropped == sum(len(t) for _, _, t in batches)
    assert f"longer than {MAX_LENGTH} tokens: {dropped}" in str(report)


def test_batch_shapes(epoch):
    batches, _ = epoch
    sizes = _batch_size_by_padded_length(MAX_LENGTH, BATCH_TOKENS)
    short_batches = collections.Counter()
    for source, decoder_inputs, targets in batches:
        assert source.dtype == decoder_inputs.dtype == targets.dtype == np.int32
        rows, length = targets.shape
        assert source.shape == decoder_inputs.shape == (rows, length)
        assert length in sizes  # a bucket's padded length
        assert rows * length <= BATCH_TOKENS or rows == 1
        assert rows <= sizes[length]
        short_batches[length] += rows < sizes[length]
        # The bucket key is the longer side: it is longer than the previous
        # bucket's padded length.
        longest = max(np.count_nonzero(source, axis=1).max(), np.count_nonzero(targets, 1).max())
        below = [b for b in sizes if b < length]
        assert longest > max(below, default=0)
    # Only the last batch of a bucket in an epoch is short.
    assert max(short_batches.values()) <= 1


def test_rows_end_with_eos_then_padding(epoch):
    batches, _ = epoch
    for source, _, targets in batches:
        for row in np.concatenate([source, targets]):
            n = np.count_nonzero(row)  # no padding before EOS
            assert n >= 1 and row[n - 1] == EOS_ID
            assert np.all(row[n:] == PAD_ID)
            assert np.count_nonzero(row == EOS_ID) == 1


def test_decoder_inputs_shift_right(epoch):
    batches, _ = epoch
    for _, decoder_inputs, targets in batches:
        assert np.all(decoder_inputs[:, 0] == PAD_ID)
        not_padding = targets[:, :-1] != PAD_ID
        assert np.array_equal(decoder_inputs[:, 1:][not_padding], targets[:, :-1][not_padding])
        assert np.array_equal(decoder_inputs[:, 1:], targets[:, :-1])


def test_every_pair_once(epoch, train_pairs, subword_vocab):
    batches, _ = epoch
    kept = [pair for pair in train_pairs if _fits(pair, subword_vocab)]
    got_ids = collections.Counter(
        pair for source, _, targets in batches for pair in zip(_rows(source), _rows(targets))
    )
    expected_ids = collections.Counter(
        (tuple(subword_vocab.encode(s)), tuple(subword_vocab.encode(t))) for s, t in kept
    )
    assert got_ids == expected_ids
    got_text = collections.Counter(
        (subword_vocab.decode(s), subword_vocab.decode(t))
        for source, _, targets in batches
        for s, t in zip(source, targets)
    )
    assert got_text == collections.Counter(kept)


def test_deterministic_given_seed(train_pairs, subword_vocab):
    pairs = train_pairs[::4]

    def batches(seed):
        dataset, _ = make_translation_dataset(
            pairs, subword_vocab, subword_vocab, batch_tokens=256, max_length=16, seed=seed
        )
        return _batches(dataset)

    first, again, other = batches(7), batches(7), batches(8)
    assert len(first) == len(again)
    for a, b in zip(first, again):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    assert any(a[2].shape != b[2].shape or np.any(a[2] != b[2]) for a, b in zip(first, other))


def test_no_shuffle_keeps_bucket_order(subword_vocab):
    pairs = [("Hi.", "Hallo."), ("Go.", "Geh."), ("Run!", "Lauf!")]
    dataset, report = make_translation_dataset(
        pairs, subword_vocab, subword_vocab, shuffle=False, batch_tokens=64, max_length=16
    )
    (source, _, targets), = _batches(dataset)
    assert [subword_vocab.decode(t) for t in targets] == ["Hallo.", "Geh.", "Lauf!"]
    assert source.shape[1] == 7  # the first bucket (keys < 8) pads to 7
    assert report.too_long == 0 and report.kept == 3


def test_repeat_gives_full_batches(train_pairs, subword_vocab):
    dataset, _ = make_translation_dataset(
        train_pairs[:300],
        subword_vocab,
        subword_vocab,
        batch_tokens=128,
        max_length=16,
        repeat=True,
        seed=1,
    )
    sizes = _batch_size_by_padded_length(16, 128)
    # 300 pairs make about 25 batches per epoch: this spans epochs.
    for _, targets in itertools.islice(dataset.as_numpy_iterator(), 80):
        assert targets.shape[0] == sizes[targets.shape[1]]


def test_char_vocab_dataset(train_pairs, char_vocab):
    pairs = train_pairs[::10]
    dataset, report = make_translation_dataset(
        pairs, char_vocab, char_vocab, batch_tokens=1024, max_length=40, seed=0
    )
    kept = [p for p in pairs if _fits(p, char_vocab, 40)]
    assert report.too_long == len(pairs) - len(kept) > 0
    got = collections.Counter(
        (char_vocab.decode(s), char_vocab.decode(t))
        for source, _, targets in _batches(dataset)
        for s, t in zip(source, targets)
    )
    assert got == collections.Counter(kept)


def test_empty_input(subword_vocab):
    dataset, report = make_translation_dataset([], subword_vocab, subword_vocab, seed=0)
    assert _batches(dataset) == []
    assert (report.total, report.kept, report.too_long) == (0, 0, 0)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"batch_tokens": 0}, "batch_tokens"),
        ({"max_length": -1}, "max_length"),
        ({"length_bucket_step": 1}, "length_bucket_step"),
        ({"min_bucket_length": 0}, "min_bucket_length"),
        ({"seed": -1}, "seed"),
        ({"shuffle_buffer": 0}, "shuffle_buffer"),
    ],
)
def test_invalid_arguments(subword_vocab, kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_translation_dataset([("a", "b")], subword_vocab, subword_vocab, **kwargs)


def test_invalid_vocab_and_pairs(subword_vocab):
    with pytest.raises(ValueError, match="target_vocab"):
        make_translation_dataset([("a", "b")], subword_vocab, None)
    with pytest.raises(ValueError, match=r"pairs\[0\]"):
        make_translation_dataset([("a",)], subword_vocab, subword_vocab)


# ------------------------------------------------------------ tokenise once


@pytest.mark.parametrize("vocab_name", ["subword_vocab", "char_vocab"])
def test_tokenize_pairs_appends_eos_to_the_in_graph_ids(train_pairs, vocab_name, request):
    vocab = request.getfixturevalue(vocab_name)
    pairs = train_pairs[::50]
    tokens = tokenize_pairs(pairs, vocab, vocab)
    assert len(tokens) == len(pairs)
    source_lengths, target_lengths = tokens.lengths()
    for i, (source, target) in enumerate(pairs):
        s, t = tokens[i]
        assert s.dtype == t.dtype == np.int32
        # The Python tokenizer as an independent reference (no tie breaks
        # differ on these sentences).
        assert s.tolist() == vocab.encode(source) + [EOS_ID]
        assert t.tolist() == vocab.encode(target) + [EOS_ID]
        assert (source_lengths[i], target_lengths[i]) == (len(s), len(t))
    assert tokens[-1][0].tolist() == tokens[len(pairs) - 1][0].tolist()
    with pytest.raises(IndexError):
        tokens[len(pairs)]


def test_tokenize_pairs_in_chunks_gives_the_same_ids(train_pairs, subword_vocab, monkeypatch):
    pairs = train_pairs[:37]
    whole = tokenize_pairs(pairs, subword_vocab, subword_vocab)
    monkeypatch.setattr(batching, "_TOKENIZE_CHUNK", 5)
    chunked = tokenize_pairs(pairs, subword_vocab, subword_vocab)
    for name in ("source_tokens", "source_offsets", "target_tokens", "target_offsets"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(chunked, name))


def test_tokenized_pairs_from_lists_round_trip():
    lists = [([5, 6, EOS_ID], [7, EOS_ID]), ([EOS_ID], [8, 9, 10, EOS_ID])]
    tokens = TokenizedPairs.from_lists(lists)
    assert [(s.tolist(), t.tolist()) for s, t in (tokens[0], tokens[1])] == lists
    assert tokens.source_offsets.tolist() == [0, 3, 4]
    assert len(TokenizedPairs.from_lists([])) == 0


def test_tokenized_dataset_equals_the_one_call_pipeline(train_pairs, subword_vocab):
    """Tokenising first and batching the ids gives the batches (and the
    report) of `make_translation_dataset` on the strings."""
    pairs = train_pairs[::3]
    options = dict(batch_tokens=256, max_length=20, seed=5, repeat=True)
    tokens = tokenize_pairs(pairs, subword_vocab, subword_vocab)
    first, report = make_tokenized_dataset(tokens, **options)
    second, strings_report = make_translation_dataset(pairs, subword_vocab, subword_vocab,
                                                      **options)
    assert report == strings_report and report.too_long > 0
    # The report counts the ids the pipeline filters on.
    source_lengths, target_lengths = tokens.lengths()
    assert report.kept == int(np.sum((source_lengths <= 20) & (target_lengths <= 20)))
    for a, b in zip(_batches(first.take(40)), _batches(second.take(40))):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_tokenized_dataset_wants_tokenized_pairs(subword_vocab):
    with pytest.raises(ValueError, match="TokenizedPairs"):
        make_tokenized_dataset([("a", "b")])
