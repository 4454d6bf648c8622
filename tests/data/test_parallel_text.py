"""Readers of parallel text, `clean_text` and `filter_pairs`."""

import gzip

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_structattn.tasks.translation import FilterReport
from keras_structattn.tasks.translation import clean_text
from keras_structattn.tasks.translation import filter_pairs
from keras_structattn.tasks.translation import read_lines
from keras_structattn.tasks.translation import read_parallel_files
from keras_structattn.tasks.translation import read_tsv_pairs

LINES = ["Hallo Welt.", "  leading and trailing spaces kept  ", "", "Grüße – ✓ 30\u00a0%"]


def _write(path, text):
    """Writes UTF-8 `text` to `path`, gzip-compressed if it ends in .gz."""
    data = text.encode("utf-8")
    if str(path).endswith(".gz"):
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


@pytest.mark.parametrize("name", ["lines.txt", "lines.gz", "train.de"])
def test_read_lines_txt_and_gz(tmp_path, name):
    path = _write(tmp_path / name, "\n".join(LINES) + "\n")
    assert read_lines(path) == LINES
    assert read_lines(str(path)) == LINES


def test_read_lines_terminators_and_bom(tmp_path):
    # CRLF endings are terminators; a missing final newline loses nothing;
    # a BOM is not text; U+2028 inside a line does not split it.
    path = tmp_path / "crlf.txt"
    path.write_bytes("\ufeffa\r\nb\u2028c\r\nlast".encode("utf-8"))
    assert read_lines(path) == ["a", "b\u2028c", "last"]


def test_read_lines_missing_file(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        read_lines(missing)


def test_read_lines_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\nalso ok\n\xff\xfe broken\n")
    with pytest.raises(ValueError, match=r"bad\.txt, line 3"):
        read_lines(path)


def test_read_parallel_files(tmp_path):
    src = _write(tmp_path / "train.en", "Hello.\nThanks!\n")
    tgt = _write(tmp_path / "train.de.gz", "Hallo.\nDanke!\n")
    assert read_parallel_files(src, tgt) == [("Hello.", "Hallo."), ("Thanks!", "Danke!")]


def test_read_parallel_files_misaligned_names_both(tmp_path):
    src = _write(tmp_path / "a.en", "1\n2\n3\n")
    tgt = _write(tmp_path / "b.de", "1\n2\n")
    with pytest.raises(ValueError) as info:
        read_parallel_files(src, tgt)
    message = str(info.value)
    assert "a.en" in message and "b.de" in message
    assert "3 lines" in message and "2 lines" in message


@pytest.mark.parametrize("name", ["pairs.tsv", "pairs.txt", "pairs.tsv.gz"])
def test_read_tsv_pairs(tmp_path, name):
    path = _write(tmp_path / name, "Go.\tGeh.\tCC-BY attribution\nHi.\tHallo!\n")
    assert read_tsv_pairs(path) == [("Go.", "Geh."), ("Hi.", "Hallo!")]
    assert read_tsv_pairs(path, source_column=1, target_column=0) == [
        ("Geh.", "Go."),
        ("Hallo!", "Hi."),
    ]


def test_read_tsv_pairs_malformed_line(tmp_path):
    path = _write(tmp_path / "pairs.tsv", "Go.\tGeh.\nHi.\tHallo!\nno tab here\n")
    with pytest.raises(ValueError, match=r"pairs\.tsv, line 3"):
        read_tsv_pairs(path)
    # The third column is missing on every line.
    with pytest.raises(ValueError, match=r"pairs\.tsv, line 1"):
        read_tsv_pairs(path, target_column=2)


def _truncated_gz(path, lines, cut=20):
    """A gzip file of `lines` with its last `cut` bytes cut off."""
    data = gzip.compress(("\n".join(lines) + "\n").encode("utf-8"))
    path.write_bytes(data[:-cut])
    return path


def test_truncated_gz_names_the_file(tmp_path):
    # Incompressible lines, so that the data ends well after line 1.
    lines = [f"{i} {i ** 7 % 1000003} {i * 7919 % 104729}" for i in range(4000)]
    path = _truncated_gz(tmp_path / "corpus.en.gz", lines)
    with pytest.raises(ValueError, match=r"corpus\.en\.gz: truncated gzip file") as info:
        read_lines(path)
    assert "after line " in str(info.value) and "EOFError" in str(info.value)
    # Through the corpus readers too.
    tgt = _write(tmp_path / "corpus.de", "\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"corpus\.en\.gz: truncated gzip file"):
        read_parallel_files(path, tgt)
    tsv = _truncated_gz(tmp_path / "pairs.tsv.gz", ["Go.\tGeh."] * 10, cut=5)
    with pytest.raises(ValueError, match=r"pairs\.tsv\.gz: truncated gzip file"):
        read_tsv_pairs(tsv)


def test_corrupt_gz_names_the_file(tmp_path):
    plain = _write(tmp_path / "plain.txt.gz", "")
    plain.write_bytes(b"Hello, not compressed.\n")
    with pytest.raises(ValueError, match=r"plain\.txt\.gz: not a gzip file"):
        read_lines(plain)
    data = bytearray(gzip.compress(b"Hallo Welt.\n" * 50))
    data[12:20] = b"\xff" * 8  # inside the deflate stream
    broken = tmp_path / "broken.gz"
    broken.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"broken\.gz: corrupt gzip data"):
        read_lines(broken)


def test_invalid_utf8_in_gz_names_file_and_line(tmp_path):
    path = tmp_path / "bad.de.gz"
    path.write_bytes(gzip.compress(b"ok\nalso ok\n\xff broken\n"))
    with pytest.raises(ValueError, match=r"bad\.de\.gz, line 3: not valid UTF-8"):
        read_lines(path)


def test_tsv_line_without_tab_names_file_and_line(tmp_path):
    path = _write(tmp_path / "pairs.tsv", "Go.\tGeh.\nno tab\nHi.\tHallo!\n")
    with pytest.raises(ValueError, match=r"pairs\.tsv, line 2: expected at least 2 "):
        read_tsv_pairs(path)


@pytest.mark.parametrize("name", ["empty.tsv", "empty.tsv.gz"])
def test_empty_files_are_named(tmp_path, name):
    empty = _write(tmp_path / name, "")
    assert read_lines(empty) == []  # the plain reader returns what is there
    with pytest.raises(ValueError, match=rf"{name}: the file is empty"):
        read_tsv_pairs(empty)
    full = _write(tmp_path / "full.de", "Hallo.\n")
    with pytest.raises(ValueError, match=rf"{name}: the file is empty"):
        read_parallel_files(empty, full)
    with pytest.raises(ValueError, match=rf"{name}: the file is empty"):
        read_parallel_files(full, empty)


def test_files_of_blank_lines_are_named(tmp_path):
    blank = _write(tmp_path / "blank.en", "\n  \n\t\n\u200b\n")
    full = _write(tmp_path / "full.de", "a\nb\nc\nd\n")
    with pytest.raises(ValueError, match=r"blank\.en: the file has no non-empty lines \(4 blank"):
        read_parallel_files(blank, full)
    with pytest.raises(ValueError, match=r"blank\.en: the file has no non-empty lines"):
        read_tsv_pairs(blank)


def test_no_sentence_pair_is_named(tmp_path):
    # Every line has text, but never on both sides.
    tsv = _write(tmp_path / "one_sided.tsv", "Go.\t\n\tGeh.\n")
    with pytest.raises(ValueError, match=r"one_sided\.tsv: no line has both"):
        read_tsv_pairs(tsv)
    src = _write(tmp_path / "a.en", "Go.\n\n")
    tgt = _write(tmp_path / "b.de", "\nGeh.\n")
    with pytest.raises(ValueError, match=r"a\.en and .*b\.de: no line has both"):
        read_parallel_files(src, tgt)


def test_read_tsv_pairs_invalid_column():
    with pytest.raises(ValueError, match="source_column"):
        read_tsv_pairs("unused.tsv", source_column=-1)


def test_clean_text():
    assert clean_text("  30\u00a0%\u202f! a\u200bb \n") == "30 % ! ab"
    assert clean_text("\u200b") == ""
    assert clean_text("Tom’s café…") == "Tom’s café…"  # nothing else changes


@given(st.text())
def test_clean_text_properties(text):
    cleaned = clean_text(text)
    assert not set(cleaned) & {"\u00a0", "\u202f", "\u200b"}
    assert cleaned == cleaned.strip()
    assert clean_text(cleaned) == cleaned


def test_filter_pairs_counts():
    pairs = [
        ("a b", "c d"),
        ("", "x"),  # empty source
        ("x", " \u200b "),  # empty target after cleaning
        ("one two three four", "x"),  # too long (4 > 3)
        ("x", "one two three"),  # exactly max_length: kept
        ("", "one two three four"),  # empty and too long: counts as empty
    ]
    kept, report = filter_pairs(pairs, max_length=3)
    assert kept == [("a b", "c d"), ("x", "one two three")]
    assert report == FilterReport(total=6, kept=2, empty=3, too_long=1, max_length=3)
    assert str(report) == "kept 2 of 6 pairs (empty: 3, longer than 3 tokens: 1)"


def test_filter_pairs_defaults_and_length_fn():
    pairs = [("abc", "abcdef"), ("ab", "a")]
    kept, report = filter_pairs(pairs)
    assert kept == pairs and report.total == report.kept == 2
    assert str(report) == "kept 2 of 2 pairs (empty: 0, too long: 0)"
    kept, report = filter_pairs(pairs, max_length=3, length_fn=len)
    assert kept == [("ab", "a")] and report.too_long == 1


def test_filter_pairs_clean_returns_cleaned_pairs_and_measures_them():
    pairs = [
        ("\u00a0a b ", "c\u202fd"),  # 5 and 3 characters raw, 3 and 3 cleaned
        (" x ", "\u200b"),  # empty target once cleaned
        ("abcd", "x"),  # too long either way
    ]
    kept, report = filter_pairs(pairs, max_length=3, length_fn=len, clean=True)
    assert kept == [(clean_text(s), clean_text(t)) for s, t in pairs[:1]] == [("a b", "c d")]
    assert (report.total, report.kept, report.empty, report.too_long) == (3, 1, 1, 1)
    # Without `clean` the lengths are those of the raw text.
    kept, report = filter_pairs(pairs, max_length=3, length_fn=len)
    assert kept == [] and (report.empty, report.too_long) == (1, 2)
    kept, _ = filter_pairs(pairs[:1])
    assert kept == pairs[:1]  # returned as they were


def test_filter_report_str_example():
    report = FilterReport(total=18317, kept=18000, empty=0, too_long=317, max_length=64)
    assert str(report) == "kept 18000 of 18317 pairs (empty: 0, longer than 64 tokens: 317)"


@pytest.mark.parametrize(
    "kwargs, name",
    [({"max_length": 0}, "max_length"), ({"length_fn": 3}, "length_fn")],
)
def test_filter_pairs_invalid_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        filter_pairs([("a", "b")], **kwargs)


def test_filter_pairs_rejects_non_pairs():
    with pytest.raises(ValueError, match=r"pairs\[1\]"):
        filter_pairs([("a", "b"), ("a", "b", "c")])
