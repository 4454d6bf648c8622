"""Subword and character vocabularies: ids, round trips, tf == Python."""

import io

import numpy as np
import pytest
import sentencepiece
import tensorflow as tf
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_structattn.data import EOS_ID
from keras_structattn.data import PAD_ID
from keras_structattn.data import UNK_ID
from keras_structattn.data import CharVocab
from keras_structattn.data import SubwordVocab
from keras_structattn.data import load_vocab
from keras_structattn.tasks.translation import load_tatoeba_en_de


@pytest.fixture(scope="module")
def dev_sentences():
    return [side for pair in load_tatoeba_en_de("dev") for side in pair]


def _tf_ids(ragged):
    return [row.tolist() for row in ragged.numpy()]


def _padded(rows, width=None):
    """Rows + EOS, padded with 0 (and some junk after EOS) to one width."""
    width = width or max(len(r) for r in rows) + 3
    out = np.zeros((len(rows), width), np.int32)
    for i, row in enumerate(rows):
        out[i, : len(row) + 1] = row + [EOS_ID]
        if len(row) + 2 < width:
            out[i, len(row) + 2] = 7  # after EOS: ignored
    return out


# ---------------------------------------------------------------- SubwordVocab


def test_subword_training_is_deterministic(train_pairs, subword_vocab):
    texts = [side for pair in train_pairs for side in pair]
    again = SubwordVocab.train(texts, vocab_size=500)
    assert again.model_proto == subword_vocab.model_proto


def test_subword_reserved_ids(subword_vocab):
    assert subword_vocab.vocab_size == 500
    pieces = [subword_vocab.id_to_piece(i) for i in (PAD_ID, EOS_ID, UNK_ID)]
    assert pieces == ["<pad>", "</s>", "<unk>"]
    assert EOS_ID not in subword_vocab.encode("Tom is here.")


def test_subword_bpe(train_pairs):
    vocab = SubwordVocab.train([en for en, _ in train_pairs[:500]], 200, model_type="bpe")
    assert vocab.vocab_size == 200
    assert vocab.decode(vocab.encode("Tom is here.")) == "Tom is here."


def test_subword_round_trip_dev(subword_vocab, dev_sentences):
    # Unseen sentences: exact whenever every character is known.
    known = [s for s in dev_sentences if UNK_ID not in subword_vocab.encode(s)]
    assert len(known) > 0.9 * len(dev_sentences)
    for sentence in known:
        assert subword_vocab.decode(subword_vocab.encode(sentence)) == sentence
    # Whitespace is kept as is (no normalisation).
    odd = "  Tom  ist   hier. "
    assert subword_vocab.decode(subword_vocab.encode(odd)) == odd


def test_subword_decode_stops_at_eos(subword_vocab):
    ids = subword_vocab.encode("Tom is here.")
    noisy = [PAD_ID] + ids[:2] + [PAD_ID] + ids[2:] + [EOS_ID] + ids + [PAD_ID]
    assert subword_vocab.decode(noisy) == "Tom is here."
    assert subword_vocab.decode(np.array(ids + [EOS_ID])) == "Tom is here."
    assert subword_vocab.decode([EOS_ID] + ids) == ""
    with pytest.raises(ValueError, match="ids"):
        subword_vocab.decode([500])


def test_subword_tf_encode_equals_encode(subword_vocab, dev_sentences):
    ragged = subword_vocab.tf_encode(tf.constant(dev_sentences))
    assert isinstance(ragged, tf.RaggedTensor) and ragged.dtype == tf.int32
    assert _tf_ids(ragged) == [subword_vocab.encode(s) for s in dev_sentences]
    single = subword_vocab.tf_encode(tf.constant(dev_sentences[5]))
    assert single.numpy().tolist() == subword_vocab.encode(dev_sentences[5])


def test_subword_tf_encode_in_dataset_map(subword_vocab, dev_sentences):
    dataset = tf.data.Dataset.from_tensor_slices(dev_sentences[:20]).map(subword_vocab.tf_encode)
    assert [x.numpy().tolist() for x in dataset] == [
        subword_vocab.encode(s) for s in dev_sentences[:20]
    ]


def test_subword_tf_decode_equals_decode(subword_vocab, dev_sentences):
    rows = [subword_vocab.encode(s) for s in dev_sentences[:50]]
    padded = _padded(rows)
    expected = [subword_vocab.decode(row) for row in padded]
    assert [s.decode("utf-8") for s in subword_vocab.tf_decode(padded).numpy()] == expected
    ragged = tf.ragged.constant([r + [EOS_ID] for r in rows], dtype=tf.int32)
    assert [s.decode("utf-8") for s in subword_vocab.tf_decode(ragged).numpy()] == expected
    assert subword_vocab.tf_decode(padded[3]).numpy().decode("utf-8") == expected[3]


def test_subword_save_load(tmp_path, subword_vocab, dev_sentences):
    path = tmp_path / "vocab.model"
    subword_vocab.save(path)
    for loaded in (SubwordVocab.load(path), load_vocab(path)):
        assert isinstance(loaded, SubwordVocab)
        assert loaded.model_proto == subword_vocab.model_proto
        assert [loaded.encode(s) for s in dev_sentences[:100]] == [
            subword_vocab.encode(s) for s in dev_sentences[:100]
        ]


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"vocab_size": 0}, "vocab_size"),
        ({"vocab_size": 100_000}, "vocab_size"),  # more pieces than the text has
        ({"vocab_size": 100, "model_type": "char"}, "model_type"),
        ({"vocab_size": 100, "character_coverage": 1.5}, "character_coverage"),
    ],
)
def test_subword_invalid_arguments(train_pairs, kwargs, name):
    with pytest.raises(ValueError, match=name):
        SubwordVocab.train([en for en, _ in train_pairs[:200]], **kwargs)


def test_subword_rejects_other_id_conventions(train_pairs):
    with pytest.raises(ValueError, match="model_proto"):
        SubwordVocab("not bytes")
    # SentencePiece's own defaults: unk 0, bos 1, eos 2, no padding.
    writer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter([en for en, _ in train_pairs[:200]]),
        model_writer=writer,
        vocab_size=100,
        minloglevel=2,
    )
    with pytest.raises(ValueError, match="pad_id=0, eos_id=1, unk_id=2"):
        SubwordVocab(writer.getvalue())


# ------------------------------------------------------------------- CharVocab


def test_char_vocab_order():
    vocab = CharVocab.build(["abba", "cab", "d"], min_count=1)
    # a: 3, b: 3, c: 1, d: 1 -> by count, ties by code point.
    assert vocab.chars == ["a", "b", "c", "d"]
    assert vocab.vocab_size == 7
    assert vocab.encode("dab?") == [6, 3, 4, UNK_ID]
    assert CharVocab.build(["abba", "cab", "d"], min_count=2).chars == ["a", "b"]
    assert CharVocab.build(["zzy", "yxx"]).chars == ["x", "y", "z"]


def test_char_round_trip_dev(char_vocab, dev_sentences):
    known = [s for s in dev_sentences if UNK_ID not in char_vocab.encode(s)]
    assert len(known) > 0.9 * len(dev_sentences)
    for sentence in known:
        assert char_vocab.decode(char_vocab.encode(sentence)) == sentence
    assert char_vocab.decode(char_vocab.encode("Tom\u2603") + [EOS_ID, 5]) == "Tom\u2047"


def test_char_tf_equals_python(char_vocab, dev_sentences):
    ragged = char_vocab.tf_encode(tf.constant(dev_sentences))
    assert isinstance(ragged, tf.RaggedTensor) and ragged.dtype == tf.int32
    expected = [char_vocab.encode(s) for s in dev_sentences]
    assert _tf_ids(ragged) == expected
    padded = _padded(expected[:50])
    decoded = [s.decode("utf-8") for s in char_vocab.tf_decode(padded).numpy()]
    assert decoded == [char_vocab.decode(row) for row in padded]


def test_char_save_load(tmp_path, char_vocab):
    path = tmp_path / "chars.json"
    char_vocab.save(path)
    for loaded in (CharVocab.load(path), load_vocab(path)):
        assert isinstance(loaded, CharVocab)
        assert loaded.chars == char_vocab.chars


def test_char_invalid_arguments(tmp_path):
    with pytest.raises(ValueError, match="min_count"):
        CharVocab.build(["abc"], min_count=0)
    with pytest.raises(ValueError, match="chars"):
        CharVocab(["a", "bc"])
    with pytest.raises(ValueError, match="chars"):
        CharVocab(["a", "a"])
    path = tmp_path / "other.json"
    path.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="other.json"):
        load_vocab(path)


@settings(max_examples=40, deadline=None)
@given(
    vocab_texts=st.lists(st.text(min_size=1), min_size=1, max_size=5),
    text=st.text(max_size=30),
)
def test_char_vocab_property(vocab_texts, text):
    vocab = CharVocab.build(vocab_texts)
    known = set("".join(vocab_texts))
    ids = vocab.encode(text)
    assert len(ids) == len(text)
    for char, token_id in zip(text, ids):
        if char in known:
            assert token_id >= 3 and vocab.chars[token_id - 3] == char
        else:
            assert token_id == UNK_ID
    expected = "".join(c if c in known else "\u2047" for c in text)
    assert vocab.decode(ids) == expected
    assert vocab.tf_encode(tf.constant(text)).numpy().tolist() == ids
    if ids:
        assert vocab.tf_decode(tf.constant([ids], tf.int32)).numpy()[0].decode("utf-8") == expected


def test_load_vocab_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="none.model"):
        load_vocab(tmp_path / "none.model")


def test_vocab_of_no_text_names_the_corpus():
    with pytest.raises(ValueError, match=r"the 3 texts from train\.tsv are all empty"):
        SubwordVocab.train(["", "", ""], vocab_size=100, source="train.tsv")
    with pytest.raises(ValueError, match=r"received no texts from train\.tsv"):
        CharVocab.build([], source="train.tsv")
    # Without a source, the message still says what was wrong.
    with pytest.raises(ValueError, match="No text to build a vocabulary from: the one text is"):
        CharVocab.build([""])
    with pytest.raises(ValueError, match="must hold strings"):
        CharVocab.build(["a", 3])
