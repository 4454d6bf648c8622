"""`WordVocab`: id order against a brute-force count, encode/decode, files."""

import collections
import json

import numpy as np
import pytest

from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.decoding.tokens import PAD_ID
from keras_structattn.decoding.tokens import UNK_ID

TOKEN_LISTS = [
    ["a", "red", "circle", "left", "of", "a", "square"],
    ["a", "blue", "square"],
    ["two", "red", "shapes"],
    ["a", "circle", "<unk>"],
    ["the", "red", "circle"],
]


def brute_force_words(token_lists, min_count):
    counts = collections.Counter(t for tokens in token_lists for t in tokens)
    words = []
    # Highest count first; within a count, alphabetical.
    for count in sorted(set(counts.values()), reverse=True):
        if count >= min_count:
            words += sorted(w for w, n in counts.items() if n == count and w[0] != "<")
    return words


@pytest.mark.parametrize("min_count", [1, 2, 3])
def test_build_orders_by_count_then_alphabet(min_count):
    vocab = WordVocab.build(TOKEN_LISTS, min_count=min_count)
    expected = brute_force_words(TOKEN_LISTS, min_count)
    assert vocab.words == expected
    assert vocab.vocab_size == 3 + len(expected)
    for i, word in enumerate(expected):
        assert vocab.id_to_word(i + 3) == word
    assert [vocab.id_to_word(i) for i in (PAD_ID, EOS_ID, UNK_ID)] == ["<pad>", "</s>", "<unk>"]


def test_build_on_random_tokens_matches_brute_force():
    rng = np.random.default_rng(3)
    pool = [f"w{i}" for i in range(40)]
    token_lists = [list(rng.choice(pool, size=rng.integers(1, 12))) for _ in range(60)]
    for min_count in (1, 5, 9):
        assert WordVocab.build(token_lists, min_count).words == brute_force_words(
            token_lists, min_count
        )


def test_encode_decode():
    vocab = WordVocab.build(TOKEN_LISTS, min_count=2)
    # a: 4, circle: 3, red: 3 (tie: alphabetical), square: 2.
    assert vocab.words == ["a", "circle", "red", "square"]
    ids = vocab.encode(["a", "red", "triangle", "<unk>", "square"])
    assert ids == [3, 5, UNK_ID, UNK_ID, 6]
    assert vocab.encode("a  red\ttriangle") == [3, 5, UNK_ID]  # whitespace-split, as given
    assert vocab.encode("A") == [UNK_ID]  # no lower-casing: tokenise when reading
    assert vocab.decode(ids + [EOS_ID, 5, 5]) == "a red <unk> <unk> square"
    assert vocab.decode([PAD_ID, 3, PAD_ID, 4, EOS_ID, 5]) == "a circle"
    assert vocab.decode(np.array([5, 6, EOS_ID, PAD_ID], np.int32)) == "red square"
    assert vocab.decode([EOS_ID]) == ""
    with pytest.raises(ValueError, match=r"\[0, 7\)"):
        vocab.decode([3, 7])
    with pytest.raises(ValueError, match="tokens_or_text"):
        vocab.encode(["a", 3])
    assert "vocab_size=7" in repr(vocab) and "'a'" in repr(vocab)


def test_build_errors():
    with pytest.raises(ValueError, match="min_count"):
        WordVocab.build(TOKEN_LISTS, min_count=0)
    with pytest.raises(ValueError, match="min_count"):
        WordVocab.build(TOKEN_LISTS, min_count=2.5)
    with pytest.raises(ValueError, match=r"most frequent seen 4 times, and min_count=5"):
        WordVocab.build(TOKEN_LISTS, min_count=5)
    with pytest.raises(ValueError, match="0 distinct words"):
        WordVocab.build([[], []], min_count=1)
    with pytest.raises(ValueError, match="not strings"):
        WordVocab.build(["a red circle"], min_count=1)
    with pytest.raises(ValueError, match="without spaces"):
        WordVocab.build([["a red"]], min_count=1)
    with pytest.raises(ValueError, match="listed twice"):
        WordVocab(["a", "b", "a"])
    with pytest.raises(ValueError, match="reserved"):
        WordVocab(["a", "</s>"])


def test_save_load_round_trip(tmp_path):
    vocab = WordVocab.build(TOKEN_LISTS, min_count=1)
    path = tmp_path / "vocab.json"
    vocab.save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["format"] == "keras_structattn.WordVocab" and data["words"] == vocab.words
    loaded = WordVocab.load(path)
    assert loaded.words == vocab.words
    assert loaded.encode(TOKEN_LISTS[0]) == vocab.encode(TOKEN_LISTS[0])


def test_load_errors_name_the_file(tmp_path):
    path = tmp_path / "vocab.json"
    path.write_text('{"format": "keras_structattn.WordVocab",\n "words": [,]}\n')
    with pytest.raises(ValueError, match=rf"{path}, line 2: not a WordVocab JSON file"):
        WordVocab.load(path)
    path.write_text(json.dumps({"format": "keras_structattn.CharVocab", "chars": ["a"]}))
    with pytest.raises(ValueError, match=rf"{path}: not a WordVocab file"):
        WordVocab.load(path)
    reserved = {"pad": 0, "eos": 1, "unk": 2}
    path.write_text(json.dumps({"format": "keras_structattn.WordVocab", "reserved": reserved,
                                "words": ["a", "a"]}))
    with pytest.raises(ValueError, match=rf"{path}: the word 'a' is listed twice"):
        WordVocab.load(path)
    with pytest.raises(FileNotFoundError, match="missing.json"):
        WordVocab.load(tmp_path / "missing.json")
