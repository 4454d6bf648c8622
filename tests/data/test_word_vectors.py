"""GloVe / word2vec text files: header, multi-word tokens, bad lines, missing words."""

import numpy as np
import pytest

from keras_structattn.data.word_vectors import embedding_matrix
from keras_structattn.data.word_vectors import read_word_vectors

LINES = [
    "the 0.1 0.2 0.3",
    "new york -1 2.5e-1 3",
    "cat 1 2 3",
    "cat 9 9 9",  # a repeat: the first line wins
    "dog\u00a0house 4 5 6",  # a non-breaking space stays in the word
]


def _write(tmp_path, lines, name="vectors.txt"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("header", [True, False])
def test_reads_wanted_rows_and_found_mask(tmp_path, header):
    path = _write(tmp_path, (["5 3"] if header else []) + LINES)
    words = ["cat", "zebra", "new york", "the", "dog\u00a0house", "cat"]
    matrix, found = read_word_vectors(path, words, dim=3 if header else None)
    assert matrix.dtype == np.float32 and matrix.shape == (6, 3)
    assert found.tolist() == [True, False, True, True, True, True]
    expected = [[1, 2, 3], [0, 0, 0], [-1, 0.25, 3], [0.1, 0.2, 0.3], [4, 5, 6], [1, 2, 3]]
    np.testing.assert_allclose(matrix, np.float32(expected))


@pytest.mark.parametrize(
    "lines, dim, needle",
    [
        (["3 3", "the 0.1 0.2 0.3", "cat 1 2"], None, "line 3: expected a word and 3 values"),
        (["the 0.1 0.2 0.3", "cat 1 x 3"], None, "line 2: the value 'x'"),
        (["the 0.1 0.2 0.3", "cat 1 nan 3"], None, "line 2: the vector of 'cat' is not finite"),
        (["3 4", "the 0.1 0.2 0.3"], 3, "line 1: the header says 4"),
        (["the 0.1 0.2"], 3, "line 1: expected a word and 3 values"),
    ],
)
def test_errors_name_file_and_line(tmp_path, lines, dim, needle):
    path = _write(tmp_path, lines)
    with pytest.raises(ValueError) as info:
        read_word_vectors(path, ["the", "cat"], dim=dim)
    assert str(path) in str(info.value) and needle in str(info.value)


def test_unwanted_lines_are_not_parsed(tmp_path):
    # Only wanted words' values are parsed (the file may be gigabytes).
    path = _write(tmp_path, ["the 0.1 0.2 0.3", "odd 1 x 3"])
    matrix, found = read_word_vectors(path, ["the"])
    assert found.tolist() == [True] and matrix.shape == (1, 3)


def test_embedding_matrix_gives_the_missing_words_seeded_random_rows(tmp_path):
    path = _write(tmp_path, LINES)
    matrix, found = embedding_matrix(path, ["cat", "zebra", "the"])
    assert matrix.dtype == np.float32 and found.tolist() == [True, False, True]
    np.testing.assert_allclose(matrix[[0, 2]], [[1, 2, 3], [0.1, 0.2, 0.3]], rtol=1e-6)
    assert np.all(matrix[1] != 0) and np.all(np.abs(matrix[1]) < 1)
    np.testing.assert_array_equal(matrix, embedding_matrix(path, ["cat", "zebra", "the"])[0])
