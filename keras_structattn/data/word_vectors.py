"""Pretrained word vectors from GloVe / word2vec text files.

MCAN initialises its 300-d question word embedding from GloVe vectors
(Pennington et al., 2014, "GloVe: Global Vectors for Word Representation",
EMNLP; spaCy's `en_vectors_web_lg` in MCAN's code, Yu et al., 2019,
arXiv:1906.10770) and trains it further. `read_word_vectors` reads the rows
of a vocabulary's words from such a file, streaming it (the 840B file is
5.6 GB), so the rows can seed an `Embedding` layer:

```python
matrix, found = read_word_vectors("glove.840B.300d.txt", vocab.words, dim=300)
```

NumPy and the standard library only.
"""

import math

import numpy as np

from keras_structattn import checks
from keras_structattn.data.json_files import text_lines


def _header_dim(tokens):
    """The dim of a word2vec header line `count dim`, or None."""
    if len(tokens) == 2 and all(t.isascii() and t.isdigit() for t in tokens):
        return int(tokens[1])
    return None


def read_word_vectors(path, words, *, dim=None):
    """Reads the vectors of `words` from a GloVe / word2vec text file.

    Each line is `word v1 ... vd`, separated by single spaces (GloVe's
    format; word2vec's text format adds a first line `count dim`, which is
    recognised as two integers and skipped). The dimension is `dim`, else
    the header's, else the first vector line's token count minus one. Some
    GloVe 840B words contain spaces: a line with more than `dim + 1` tokens
    takes its last `dim` tokens as the values and joins the others with
    single spaces as the word. Other whitespace (e.g. non-breaking spaces)
    stays part of the word. The first line of a word wins if it repeats.

    The file is read line by line and only the rows of `words` are kept;
    every line's value count is checked, but the values are parsed (and
    checked to be finite numbers) only on the lines of wanted words.

    Args:
        path: the text file (UTF-8).
        words: the words to look up (a sequence of `str`, e.g.
            `WordVocab.words`); row i of the result is `words[i]`. Matching
            is exact (case-sensitive).
        dim: None or the expected vector size (a positive int;
            keyword-only).

    Returns:
        `(matrix, found)`: float32 `[len(words), dim]` with the vectors, and
        bool `[len(words)]`, True for the words found; the rows of the
        others are zero (left for the caller to initialise).

    Raises:
        FileNotFoundError: if the file is missing.
        ValueError: naming the file and line, for invalid UTF-8, a line with
            fewer than `dim + 1` tokens, a value that is not a finite
            number, a header or first line whose size differs from `dim`,
            or an empty file.
    """
    if dim is not None:
        checks.positive_int("dim", dim)
    if isinstance(words, str):
        raise ValueError(f"Argument `words` must be a sequence of str, not a str: {words!r:.80}")
    words = list(words)
    rows = {}
    for i, word in enumerate(words):
        if not isinstance(word, str):
            raise ValueError(f"Argument `words` must hold strings. Received: words[{i}]={word!r}")
        rows.setdefault(word, []).append(i)
    name, lines = text_lines(path, "word vector")
    matrix = None if dim is None else np.zeros((len(words), dim), np.float32)
    found = np.zeros(len(words), bool)
    done = set()
    for number, line in lines:
        line = line.rstrip("\r\n").rstrip(" ")
        if not line:
            continue
        tokens = line.split(" ")
        if number == 1:
            header = _header_dim(tokens)
            if header is not None:
                if dim is not None and header != dim:
                    raise ValueError(
                        f"{name}, line 1: the header says {header} values per vector; "
                        f"expected dim={dim}."
                    )
                dim = header
                matrix = np.zeros((len(words), dim), np.float32)
                continue
        if matrix is None:
            dim = len(tokens) - 1
            if dim < 1:
                raise ValueError(f"{name}, line {number}: a word without values: {line!r:.80}")
            matrix = np.zeros((len(words), dim), np.float32)
        if len(tokens) < dim + 1:
            raise ValueError(
                f"{name}, line {number}: expected a word and {dim} values; found "
                f"{len(tokens)} tokens."
            )
        word = " ".join(tokens[:-dim]) if len(tokens) > dim + 1 else tokens[0]
        if word not in rows or word in done:
            continue
        try:
            values = [float(t) for t in tokens[-dim:]]
        except ValueError:
            bad = next(t for t in tokens[-dim:] if not _is_float(t))
            raise ValueError(
                f"{name}, line {number}: the value {bad!r:.40} of {word!r:.40} is not a "
                "number."
            ) from None
        if not all(math.isfinite(v) for v in values):
            raise ValueError(
                f"{name}, line {number}: the vector of {word!r:.40} is not finite."
            )
        done.add(word)
        matrix[rows[word]] = values
        found[rows[word]] = True
    if matrix is None:
        raise ValueError(f"{name}: the file holds no vector.")
    return matrix, found


def _is_float(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def embedding_matrix(path, words, *, stddev=0.1, seed=0):
    """The initial embedding of `words`: their vectors, random rows for the others.

    Args:
        path: a GloVe / word2vec text file (`read_word_vectors`).
        words: the words of the embedding's rows, in id order.
        stddev: the standard deviation of the normal rows of the words the
            file lacks (keyword-only).
        seed: the seed of those rows (keyword-only).

    Returns:
        `(matrix, found)`: float32 `[len(words), dim]`, and bool
        `[len(words)]`, True for the rows read from the file.
    """
    matrix, found = read_word_vectors(path, words)
    missing = ~found
    rng = np.random.default_rng(seed)
    matrix[missing] = rng.normal(0.0, stddev, (int(missing.sum()), matrix.shape[1]))
    return matrix.astype("float32"), found
