"""PHOC vectors: hand-worked words, a scalar float32 reference, properties."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_structattn.tasks.textvqa.phoc import BIGRAMS
from keras_structattn.tasks.textvqa.phoc import PHOC_DIM
from keras_structattn.tasks.textvqa.phoc import UNIGRAMS
from keras_structattn.tasks.textvqa.phoc import phoc
from keras_structattn.tasks.textvqa.phoc import phoc_batch

PROPERTY_SETTINGS = settings(max_examples=40, deadline=None)

# Unigram block of level L starts at (2 + ... + (L - 1)) * 36: level 2 at 0,
# level 3 at 72, level 4 at 180, level 5 at 324; bigrams at 504.
LEVEL_START = {2: 0, 3: 72, 4: 180, 5: 324}


def bit(level, region, char):
    return LEVEL_START[level] + region * 36 + UNIGRAMS.index(char)


def bigram_bit(region, pair):
    return 504 + region * 50 + BIGRAMS.index(pair)


def test_constants():
    assert PHOC_DIM == 604 and len(UNIGRAMS) == 36 and len(BIGRAMS) == 50
    assert UNIGRAMS[:3] == ("a", "b", "c") and UNIGRAMS[26:] == tuple("0123456789")
    assert BIGRAMS[:4] == ("th", "he", "in", "er") and BIGRAMS[-1] == "el"


def test_ab_by_hand():
    # "ab": n = 2, a spans [0, 1/2], b spans [1/2, 1]; a char counts in a
    # region when >= half of its span lies inside it.
    # level 2 (halves): a in region 0 (all of it), b in region 1.
    # level 3 (thirds): a overlaps [0, 1/3] by 1/3 of its 1/2 = 2/3 -> region 0,
    #   [1/3, 2/3] by 1/6 / 1/2 = 1/3 -> no; b mirrored: region 2 only.
    # level 4 (quarters): a fills regions 0 and 1 exactly half each -> both;
    #   b: regions 2 and 3.
    # level 5 (fifths): a overlaps [0, .2] and [.2, .4] by .4 of its span
    #   and [.4, .6] by .2 -> none; b likewise none.
    # bigram "ab" is not among the 50.
    expected = {
        bit(2, 0, "a"), bit(2, 1, "b"),
        bit(3, 0, "a"), bit(3, 2, "b"),
        bit(4, 0, "a"), bit(4, 1, "a"), bit(4, 2, "b"), bit(4, 3, "b"),
    }
    assert expected == {0, 37, 72, 145, 180, 216, 253, 289}
    assert set(np.flatnonzero(phoc("ab"))) == expected


def test_cafe_by_hand():
    # "cafe": n = 4, char k spans [k/4, (k+1)/4].
    # level 2: c, a in the first half; f, e in the second.
    # level 3: c in [0, 1/3] fully; a = [1/4, 1/2] has 1/12 in region 0
    #   (1/3 of it) and 1/6 in region 1 (2/3) -> region 1; f mirrored ->
    #   region 1; e -> region 2.
    # level 4: each char is exactly one quarter: c 0, a 1, f 2, e 3.
    # level 5: c = [0, .25]: .2 in region 0 (.8 of it) -> 0; a = [.25, .5]:
    #   .15 in region 1 (.6) -> 1; f = [.5, .75]: .15 in region 3 -> 3;
    #   e -> 4.
    # bigrams "ca", "af", "fe" are not among the 50.
    expected = {
        bit(2, 0, "c"), bit(2, 0, "a"), bit(2, 1, "f"), bit(2, 1, "e"),
        bit(3, 0, "c"), bit(3, 1, "a"), bit(3, 1, "f"), bit(3, 2, "e"),
        bit(4, 0, "c"), bit(4, 1, "a"), bit(4, 2, "f"), bit(4, 3, "e"),
        bit(5, 0, "c"), bit(5, 1, "a"), bit(5, 3, "f"), bit(5, 4, "e"),
    }
    assert set(np.flatnonzero(phoc("cafe"))) == expected
    # Case, surrounding space and characters outside a-z0-9 are dropped first.
    np.testing.assert_array_equal(phoc(" Ca-F.e! "), phoc("cafe"))


def test_the_float32_tie_and_bigrams():
    # "the": n = 3. In exact arithmetic 'h' = [1/3, 2/3] has exactly half in
    # each level-2 half; in float32 (mmf's C code) fl(1/3) = 0.33333334 and
    # fl(2/3) = 0.6666667, so (0.5 - fl(1/3)) / (fl(2/3) - fl(1/3)) =
    # 0.49999997 < 0.5 (no bit in region 0) while (fl(2/3) - 0.5) / fl(1/3)
    # = 0.50000006 (bit in region 1).
    # Bigrams at level 2: "th" = [0, 2/3] has 3/4 of its span in region 0;
    # "he" = [1/3, 1] has 3/4 in region 1.
    v = phoc("the")
    assert v[bit(2, 1, "h")] == 1 and v[bit(2, 0, "h")] == 0
    assert v[bit(2, 0, "t")] == 1 and v[bit(2, 1, "e")] == 1
    bigram_bits = set(np.flatnonzero(v[504:]) + 504)
    assert bigram_bits == {bigram_bit(0, "th"), bigram_bit(1, "he")} == {504, 555}


def reference_phoc(word):
    """A scalar transcription of the published rule, every value float32."""
    f = np.float32
    text = "".join(c for c in word.lower().strip() if c in UNIGRAMS)
    out = np.zeros(604, np.float32)
    n = len(text)

    def occupies(lo, hi, level, region):
        r_lo, r_hi = f(region) / f(level), f(region + 1) / f(level)
        return (min(hi, r_hi) - max(lo, r_lo)) / (hi - lo) >= f(0.5)

    for k, c in enumerate(text):
        lo, hi = f(k) / f(n), f(k + 1) / f(n)
        for level in (2, 3, 4, 5):
            for region in range(level):
                if occupies(lo, hi, level, region):
                    out[bit(level, region, c)] = 1
    for k in range(n - 1):
        pair = text[k : k + 2]
        if pair in BIGRAMS:
            lo, hi = f(k) / f(n), f(k + 2) / f(n)
            for region in range(2):
                if occupies(lo, hi, 2, region):
                    out[bigram_bit(region, pair)] = 1
    return out


WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789THE-' ", max_size=24)


@PROPERTY_SETTINGS
@given(WORDS)
def test_matches_reference_and_is_binary(word):
    v = phoc(word)
    assert v.shape == (PHOC_DIM,) and v.dtype == np.float32
    assert set(np.unique(v)) <= {0.0, 1.0}
    np.testing.assert_array_equal(v, reference_phoc(word))


@PROPERTY_SETTINGS
@given(st.sampled_from(UNIGRAMS), st.integers(1, 30))
def test_repeated_char_sets_only_its_bits(char, n):
    v = phoc(char * n)
    on = np.flatnonzero(v)
    assert len(on) > 0
    unigram_on = on[on < 504]
    assert np.all(unigram_on % 36 == UNIGRAMS.index(char))
    # The only repeated-letter bigram of the 50 is "ll".
    bigram_on = on[on >= 504]
    if char == "l" and n >= 2:
        assert len(bigram_on) > 0 and np.all((bigram_on - 504) % 50 == BIGRAMS.index("ll"))
    else:
        assert len(bigram_on) == 0


@pytest.mark.parametrize("word", ["", "   ", "--?!", "é"])
def test_no_alphanumeric_gives_zeros(word):
    np.testing.assert_array_equal(phoc(word), np.zeros(604, np.float32))


def test_batch():
    words = ["the", "", "Cafe", "ab"]
    out = phoc_batch(words)
    assert out.shape == (4, 604) and out.dtype == np.float32
    np.testing.assert_array_equal(out, np.stack([phoc(w) for w in words]))
    assert phoc_batch([]).shape == (0, 604)
    with pytest.raises(ValueError, match="not a str"):
        phoc_batch("cafe")
    with pytest.raises(ValueError, match=r"words\[1\]"):
        phoc_batch(["a", 3])
    with pytest.raises(ValueError, match="must be a str"):
        phoc(None)
