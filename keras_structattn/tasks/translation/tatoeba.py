"""The embedded English–German corpus: 20,341 Tatoeba sentence pairs.

The file `tatoeba_en_de/deu-eng.tsv.gz` ships with the package (licence and
provenance in `tatoeba_en_de/NOTICE.md`: CC BY 2.0 FR, Tatoeba Project via
ManyThings.org). It is a verbatim subset of ManyThings' `deu-eng` file of
2018-05-13, `English<TAB>German`, sorted by English length. The
train / dev / test split is a hash of the English sentence, so every
translation of one English sentence lands in the same split:

| split | pairs  | distinct English |
|-------|-------:|-----------------:|
| train | 18,317 | 14,666           |
| dev   |    969 |    809           |
| test  |  1,055 |    837           |
"""

import functools
import hashlib
import importlib.resources

from keras_structattn import checks

# Multi-reference grouping lives with the scoring that reads it
# (`keras_structattn.metrics.text`); `keras_structattn.data` still exports it
# from here.
from keras_structattn.tasks.translation.parallel_text import clean_text
from keras_structattn.tasks.translation.parallel_text import filter_pairs
from keras_structattn.tasks.translation.parallel_text import read_parallel_files
from keras_structattn.tasks.translation.parallel_text import read_tsv_pairs

SPLITS = ("train", "dev", "test")

# Name of the data file inside the package `keras_structattn.tasks.translation`.
_DATA_DIR = "tatoeba_en_de"
_DATA_FILE = "deu-eng.tsv.gz"


def split_of(english):
    """The split ("train", "dev" or "test") an English sentence belongs to.

    The rule of the corpus README: with
    `b = int(sha256(english.encode("utf-8")).hexdigest()[:8], 16) % 1000`,
    test is `b < 6`, dev `6 <= b < 12` and train the rest. It depends on
    the exact string only, not on file order, so the split survives
    shuffling and filtering. Apply it to the raw (uncleaned) sentence.

    Args:
        english: the English sentence, exactly as in the file.

    Returns:
        "train", "dev" or "test".
    """
    b = int(hashlib.sha256(english.encode("utf-8")).hexdigest()[:8], 16) % 1000
    if b < 6:
        return "test"
    if b < 12:
        return "dev"
    return "train"


def data_path():
    """The packaged data file, as an `importlib.resources` traversable."""
    return importlib.resources.files("keras_structattn.tasks.translation") / _DATA_DIR / _DATA_FILE


@functools.lru_cache(maxsize=1)
def _raw_pairs():
    """All 20,341 raw pairs of the packaged file, with their split (cached)."""
    # `as_file` gives a real path even when the package is installed zipped.
    with importlib.resources.as_file(data_path()) as path:
        pairs = read_tsv_pairs(path)
    return tuple((split_of(english), english, german) for english, german in pairs)


def load_tatoeba_en_de(split="train", clean=True):
    """Loads one split of the embedded Tatoeba English–German corpus.

    Args:
        split: "train" (18,317 pairs), "dev" (969) or "test" (1,055).
        clean: if `True`, apply `clean_text` to both sides (maps the 39
            no-break / narrow no-break spaces of the German side to plain
            spaces and drops its 2 zero-width spaces). The split is always
            computed on the raw English string.

    Returns:
        A list of `(english, german)` string pairs, in file order (sorted by
        English length: shuffle before training).

    Raises:
        ValueError: if `split` is not one of "train", "dev", "test".
    """
    checks.one_of("split", split, SPLITS)
    pairs = [(en, de) for s, en, de in _raw_pairs() if s == split]
    if clean:
        pairs = [(clean_text(en), clean_text(de)) for en, de in pairs]
    return pairs


def corpus_pairs(split, *, tsv=None, source=None, target=None):
    """The cleaned sentence pairs of one split: a TSV, parallel files, or this corpus.

    Args:
        split: the split of the embedded corpus ("train", "dev" or "test"),
            read when neither `tsv` nor `source` is given.
        tsv: a TSV file of `source<TAB>target` pairs (`read_tsv_pairs`).
        source: a file of source sentences, one per line (with `target`,
            `read_parallel_files`).
        target: the target sentences aligned with `source`.

    Returns:
        `(pairs, report)` of `filter_pairs(pairs, clean=True)`: the embedded
        split is read raw and cleaned there, as files are.
    """
    if tsv:
        pairs = read_tsv_pairs(tsv)
    elif source:
        pairs = read_parallel_files(source, target)
    else:
        pairs = load_tatoeba_en_de(split, clean=False)
    return filter_pairs(pairs, clean=True)
