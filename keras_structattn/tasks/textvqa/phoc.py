"""PHOC: the pyramidal histogram of characters of a word (604 binary attributes).

Almazán et al., 2014, "Word Spotting and Recognition with Embedded
Attributes" (TPAMI 36(12)) describe a word by which characters occur in
which part of it: at pyramid level L the word is cut into L equal regions
and a character counts in a region when at least half of the character's
span (character k of n covers [k/n, (k+1)/n]) lies inside it. M4C (Hu et
al., 2020, "Iterative Answer Prediction with Pointer-Augmented Multimodal
Transformers for TextVQA", arXiv:1911.06258, Sec. 3.1) adds this vector to
each OCR token's features, with the layout of mmf's `build_phoc`:

* 36 unigrams (`UNIGRAMS`: a-z, 0-9) at levels 2, 3, 4, 5: 14 regions x 36
  = 504 entries, level by level, region by region, the 36 characters in
  each (entry `(2 + ... + (L - 1) + r) * 36 + c` for level L, region r,
  character c);
* then the 50 common English bigrams (`BIGRAMS`) at level 2: 2 regions x 50
  = 100 entries (`504 + r * 50 + b`), a bigram at positions k, k + 1
  covering [k/n, (k+2)/n].

The word is lower-cased and stripped, and every character outside a-z0-9
is dropped before the positions are counted (so "Caf-e!" is "cafe"). The
occupancy ratio is computed in float32 in mmf's order of operations, which
decides the ties: "the" at level 2 sets 'h' in the second half only, since
(0.5 - fl(1/3)) / fl(1/3) rounds below 0.5 while (fl(2/3) - 0.5) / fl(1/3)
rounds above it.

NumPy and the standard library only.
"""

import functools

import numpy as np

UNIGRAMS = tuple("abcdefghijklmnopqrstuvwxyz0123456789")
# mmf's order (the index of a bigram is its attribute column); ordered by
# frequency in English text.
BIGRAMS = (
    "th", "he", "in", "er", "an", "re", "es", "on", "st", "nt",
    "en", "at", "ed", "nd", "to", "or", "ea", "ti", "ar", "te",
    "ng", "al", "it", "as", "is", "ha", "et", "se", "ou", "of",
    "le", "sa", "ve", "ro", "ra", "ri", "hi", "ne", "me", "de",
    "co", "ta", "ec", "si", "ll", "so", "na", "li", "la", "el",
)
UNIGRAM_LEVELS = (2, 3, 4, 5)
BIGRAM_LEVELS = (2,)
UNIGRAM_DIM = len(UNIGRAMS) * sum(UNIGRAM_LEVELS)  # 504
PHOC_DIM = UNIGRAM_DIM + len(BIGRAMS) * sum(BIGRAM_LEVELS)  # 604

_UNIGRAM_INDEX = {c: i for i, c in enumerate(UNIGRAMS)}
_BIGRAM_INDEX = {b: i for i, b in enumerate(BIGRAMS)}
_HALF = np.float32(0.5)


def _regions(levels):
    """float32 `(start, end, level offset)` of every region, level by level."""
    starts, ends, offsets = [], [], []
    offset = 0
    for level in levels:
        for r in range(level):
            starts.append(np.float32(r) / np.float32(level))
            ends.append(np.float32(r + 1) / np.float32(level))
            offsets.append(offset + r)
        offset += level
    return np.array(starts, np.float32), np.array(ends, np.float32), np.array(offsets)


_UNIGRAM_REGIONS = _regions(UNIGRAM_LEVELS)
_BIGRAM_REGIONS = _regions(BIGRAM_LEVELS)


def _occupied(length, span, count, regions):
    """Bool `[count, regions]`: the n-gram at each position fills half a region.

    The span of the n-gram at position k of a `length`-character word is
    [k/length, (k + span)/length]; every quantity is float32, as in mmf.
    """
    starts, ends, _ = regions
    k = np.arange(count, dtype=np.float32)[:, None]
    n = np.float32(length)
    lo = k / n
    hi = (k + np.float32(span)) / n
    overlap = np.minimum(hi, ends[None]) - np.maximum(lo, starts[None])
    return overlap / (hi - lo) >= _HALF


@functools.lru_cache(maxsize=64)
def _slots(length):
    """`(unigram slots [length, R1], bigram slots [length - 1, R2])` of a length.

    Each row lists the region numbers (the `offsets` of `_regions`) that the
    n-gram at that position occupies; the occupancy depends on the length
    and the position only, so it is computed once per length.
    """
    uni = _occupied(length, 1, length, _UNIGRAM_REGIONS)
    bi = _occupied(length, 2, max(length - 1, 0), _BIGRAM_REGIONS)
    return uni, bi


def _clean(word):
    if not isinstance(word, str):
        raise ValueError(f"Argument `word` must be a str. Received: word={word!r:.80}")
    return "".join(c for c in word.lower().strip() if c in _UNIGRAM_INDEX)


def _fill(out, word):
    text = _clean(word)
    if not text:
        return
    uni, bi = _slots(len(text))
    region_of = _UNIGRAM_REGIONS[2]
    for k, c in enumerate(text):
        out[region_of[uni[k]] * len(UNIGRAMS) + _UNIGRAM_INDEX[c]] = 1.0
    bigram_region_of = _BIGRAM_REGIONS[2]
    for k in range(len(text) - 1):
        b = _BIGRAM_INDEX.get(text[k : k + 2])
        if b is not None:
            out[UNIGRAM_DIM + bigram_region_of[bi[k]] * len(BIGRAMS) + b] = 1.0


def phoc(word):
    """The 604-dimensional PHOC of a word (module docstring).

    Args:
        word: a `str`; lower-cased, stripped and reduced to its a-z0-9
            characters first, as mmf's `build_phoc` does.

    Returns:
        float32 `[PHOC_DIM]` (604) of zeros and ones; all zeros for a word
        with no a-z0-9 character (e.g. "" or "--").
    """
    out = np.zeros(PHOC_DIM, np.float32)
    _fill(out, word)
    return out


def phoc_batch(words):
    """The PHOCs of a list of words.

    Args:
        words: a sequence of N `str` (not a single `str`).

    Returns:
        float32 `[N, PHOC_DIM]`; `[0, 604]` for no words.
    """
    if isinstance(words, str):
        raise ValueError(
            f"Argument `words` must be a sequence of str, not a str. Received: {words!r:.80}"
        )
    words = list(words)
    out = np.zeros((len(words), PHOC_DIM), np.float32)
    for row, word in enumerate(words):
        if not isinstance(word, str):
            raise ValueError(
                f"Argument `words` must hold str. Received: words[{row}]={word!r:.80}"
            )
        _fill(out[row], word)
    return out
