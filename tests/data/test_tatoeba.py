"""The embedded Tatoeba corpus: file integrity, split rule and counts.

Expected numbers are those of the corpus README (shipped as NOTICE.md).
"""

import collections
import gzip
import hashlib
import importlib.resources

import pytest

from keras_structattn.metrics.text import group_references
from keras_structattn.tasks.translation import clean_text
from keras_structattn.tasks.translation import load_tatoeba_en_de
from keras_structattn.tasks.translation import split_of
from keras_structattn.tasks.translation.tatoeba import _raw_pairs
from keras_structattn.tasks.translation.tatoeba import data_path

SHA256 = "593c1d49120846a80b905964204a7d86f83a25dd10c7db04854a57f08d03a2df"


def test_packaged_file_sha256():
    data = gzip.decompress(data_path().read_bytes())
    assert len(data) == 1476852
    assert hashlib.sha256(data).hexdigest() == SHA256


def test_notice_is_packaged():
    package = importlib.resources.files("keras_structattn.tasks.translation")
    notice = package / "tatoeba_en_de" / "NOTICE.md"
    text = notice.read_text(encoding="utf-8")
    assert "CC BY 2.0 FR" in text and "tatoeba.org" in text and SHA256 in text


def test_split_rule():
    # The README's rule, written out again.
    for english in ["Go.", "Get lost!", "Tom knows that.", "Grüß dich!"]:
        b = int(hashlib.sha256(english.encode("utf-8")).hexdigest()[:8], 16) % 1000
        expected = "test" if b < 6 else "dev" if b < 12 else "train"
        assert split_of(english) == expected
    assert split_of("Tom knows that.") == "test"  # the README's example


@pytest.mark.parametrize(
    "split, pairs, english, german",
    [("train", 18317, 14666, 18194), ("dev", 969, 809, 967), ("test", 1055, 837, 1052)],
)
def test_split_counts(split, pairs, english, german):
    loaded = load_tatoeba_en_de(split, clean=False)
    assert len(loaded) == pairs
    assert len({en for en, _ in loaded}) == english
    assert len({de for _, de in loaded}) == german
    assert all(split_of(en) == split for en, _ in loaded)


def test_every_pair_in_one_split():
    raw = _raw_pairs()
    assert len(raw) == 20341
    total = sum(len(load_tatoeba_en_de(s, clean=False)) for s in ("train", "dev", "test"))
    assert total == 20341


def test_file_order_kept():
    # Upstream sorts by English character length; the loader keeps it.
    lengths = [len(en) for en, _ in load_tatoeba_en_de("dev", clean=False)]
    assert lengths == sorted(lengths)


def test_clean():
    raw = [p for s in ("train", "dev", "test") for p in load_tatoeba_en_de(s, clean=False)]
    german = "".join(de for _, de in raw)
    assert (german.count("\u00a0"), german.count("\u202f"), german.count("\u200b")) == (36, 3, 2)
    cleaned = [p for s in ("train", "dev", "test") for p in load_tatoeba_en_de(s)]
    assert len(cleaned) == len(raw)
    assert cleaned == [(clean_text(en), clean_text(de)) for en, de in raw]
    assert not any(c in side for pair in cleaned for side in pair for c in "\u00a0\u202f\u200b")


def test_invalid_split():
    with pytest.raises(ValueError, match=r"split.*'train', 'dev', 'test'.*'valid'"):
        load_tatoeba_en_de("valid")


@pytest.mark.parametrize(
    "split, histogram",
    [
        ("test", {1: 682, 2: 110, 3: 35, 4: 6, 5: 2, 7: 2}),
        ("dev", {1: 680, 2: 101, 3: 25, 4: 3}),
    ],
)
def test_group_references(split, histogram):
    pairs = load_tatoeba_en_de(split)
    sources, references = group_references(pairs)
    assert len(sources) == len(references) == sum(histogram.values())
    assert len(set(sources)) == len(sources)
    assert dict(collections.Counter(len(r) for r in references)) == histogram
    # Nothing lost, targets in input order.
    assert sorted((s, t) for s, refs in zip(sources, references) for t in refs) == sorted(pairs)
