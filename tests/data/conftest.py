"""Small corpora and vocabularies shared by the data tests (built once)."""

import pytest

from keras_structattn.data import CharVocab
from keras_structattn.data import SubwordVocab
from keras_structattn.tasks.translation import load_tatoeba_en_de


@pytest.fixture(scope="session")
def train_pairs():
    """2,000 pairs of the Tatoeba train split, short and long alike.

    The file is sorted by length, so both ends are taken: the long pairs
    give the length filter something to drop.
    """
    pairs = load_tatoeba_en_de("train")
    return pairs[:1500] + pairs[-500:]


@pytest.fixture(scope="session")
def subword_vocab(train_pairs):
    """A joint unigram vocabulary of 500 ids trained on `train_pairs`.

    Small and quick (well under a second), and it covers every character of
    `train_pairs` (`character_coverage=1.0`), so they decode exactly.
    """
    return SubwordVocab.train([side for pair in train_pairs for side in pair], vocab_size=500)


@pytest.fixture(scope="session")
def char_vocab(train_pairs):
    return CharVocab.build([side for pair in train_pairs for side in pair])
