"""Batch translation of strings: order, length buckets, truncation, search.

The model is a copy model written with `keras.ops`: at step `i` it predicts
source token `i`, so each translation is its (possibly truncated) source, an
answer known without the library. It records the shape of every batch it
encodes (at trace time, when shapes are static).
"""

import pytest
from keras import ops

from keras_structattn.data.vocab import CharVocab
from keras_structattn.tasks.translation.translate import Translations
from keras_structattn.tasks.translation.translate import padded_length
from keras_structattn.tasks.translation.translate import translate_sentences

SENTENCES = [
    "a fairly long sentence, the longest one here by far",
    "hi",
    "mid-length words",
    "",
    "x" * 17,
    "short one",
    "another medium one!",
    "ok",
    "the quick brown fox",
]
VOCAB = CharVocab.build(SENTENCES)


class CopyModel:
    """The decoding protocol of `keras_structattn.decoding.seq2seq`, copying."""

    def __init__(self, vocab_size):
        self.vocab_size = vocab_size
        self.encoded_shapes = []
        self.decode_lengths = []

    def encode(self, source_ids, training=False):
        self.encoded_shapes.append(tuple(source_ids.shape))
        return source_ids, ops.not_equal(source_ids, 0)

    def initial_cache(self, encoder_outputs, encoder_mask, max_decode_length):
        self.decode_lengths.append(max_decode_length)
        length = encoder_outputs.shape[1]
        source = encoder_outputs[:, :max_decode_length]
        if length < max_decode_length:
            source = ops.pad(source, [[0, 0], [0, max_decode_length - length]])
        return {"source": ops.cast(source, "int32")}

    def decode_step(self, ids, cache, index):
        token = ops.take(cache["source"], index, axis=1)
        logits = 10.0 * ops.one_hot(token, self.vocab_size)
        return logits, cache


def copied(sentence, max_length):
    return sentence[: max_length - 1]


@pytest.mark.parametrize("beam_size", [1, 3])
def test_outputs_in_input_order(beam_size):
    model = CopyModel(VOCAB.vocab_size)
    result = translate_sentences(
        model, VOCAB, SENTENCES, max_length=64, beam_size=beam_size, batch_size=4
    )
    assert isinstance(result, Translations)
    assert result.translations == SENTENCES
    assert result.truncated == 0


def test_batches_are_length_sorted_fixed_shape_buckets():
    model = CopyModel(VOCAB.vocab_size)
    batch_size = 3
    translate_sentences(model, VOCAB, SENTENCES, max_length=64, beam_size=1,
                        batch_size=batch_size, extra_length=64)
    # What the batches must be, worked out here: the non-empty sources (EOS
    # included) sorted by length, cut into groups of 3, each padded to a
    # multiple of 8 tokens and to 3 rows. Empty sources are not decoded.
    lengths = sorted(len(s) + 1 for s in SENTENCES if s.strip())
    groups = [lengths[i : i + batch_size] for i in range(0, len(lengths), batch_size)]
    expected = {(batch_size, -(-max(g) // 8) * 8) for g in groups}
    # One trace per distinct decode length, each of one batch shape.
    assert set(model.encoded_shapes) == expected
    assert len(model.encoded_shapes) == len(expected)


def test_long_sources_are_truncated_and_counted():
    model = CopyModel(VOCAB.vocab_size)
    max_length = 10
    result = translate_sentences(model, VOCAB, SENTENCES, max_length=max_length,
                                 beam_size=2, batch_size=4)
    assert result.translations == [copied(s, max_length) for s in SENTENCES]
    assert result.truncated == sum(len(s) > max_length - 1 for s in SENTENCES) == 5


@pytest.mark.parametrize("extra_length, max_length", [(0, 64), (5, 64), (20, 30)])
def test_decode_length(extra_length, max_length):
    """At most the padded source length + extra_length tokens, and never
    more than max_length (the longest target seen in training)."""
    model = CopyModel(VOCAB.vocab_size)
    sentences = ["x" * 20, "hi"]
    result = translate_sentences(model, VOCAB, sentences, max_length=max_length,
                                 beam_size=1, extra_length=extra_length, batch_size=1)
    assert result.translations == sentences
    want = sorted(min(-(-(len(s) + 1) // 8) * 8 + extra_length, max_length) for s in sentences)
    assert sorted(model.decode_lengths) == want


def test_empty_sentences_translate_to_empty_strings_without_decoding():
    """`decode` keeps one output line per input line, blank lines included."""
    model = CopyModel(VOCAB.vocab_size)
    result = translate_sentences(model, VOCAB, ["", "hi", "   "], max_length=16, beam_size=1)
    assert result.translations == ["", "hi", ""]
    assert [shape[0] for shape in model.encoded_shapes] == [64]  # one batch, for "hi"
    blank = CopyModel(VOCAB.vocab_size)
    assert translate_sentences(blank, VOCAB, ["", " "], max_length=16) == Translations(
        ["", ""], 0)
    assert blank.encoded_shapes == []


def test_empty_input_and_padded_length():
    model = CopyModel(VOCAB.vocab_size)
    assert translate_sentences(model, VOCAB, [], max_length=8) == Translations([], 0)
    assert model.encoded_shapes == []
    assert [padded_length(n) for n in (0, 1, 8, 9, 16, 17)] == [0, 8, 8, 16, 16, 24]
    assert padded_length(5, 1) == 5


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"max_length": 0}, "max_length"),
        ({"max_length": 8, "beam_size": 0}, "beam_size"),
        ({"max_length": 8, "batch_size": 0}, "batch_size"),
        ({"max_length": 8, "extra_length": -1}, "extra_length"),
        ({"max_length": 8, "length_multiple": 0}, "length_multiple"),
    ],
)
def test_invalid_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        translate_sentences(CopyModel(VOCAB.vocab_size), VOCAB, ["hi"], **kwargs)


def test_sentences_must_be_strings():
    with pytest.raises(ValueError, match=r"sentences\[1\]"):
        translate_sentences(CopyModel(VOCAB.vocab_size), VOCAB, ["hi", 3], max_length=8)
