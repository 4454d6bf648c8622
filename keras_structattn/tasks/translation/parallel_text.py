"""Reading and filtering parallel text: line files, TSV pairs, clean-up.

Every reader names the file and the 1-based line number of malformed input
(invalid UTF-8, a missing column, a truncated or corrupt `.gz` file), the
corpus readers refuse a file with no sentence in it, and `filter_pairs`
reports what it dropped, so no sentence pair is lost without a count.
"""

import dataclasses
import gzip
import os
import zlib

from keras_structattn import checks

# Non-ASCII spaces seen in real corpora (Tatoeba among them): no-break and
# narrow no-break spaces become plain spaces (so whitespace tokenisers and
# SentencePiece see one kind of space); the zero-width space is invisible and
# would otherwise glue or split tokens arbitrarily, so it goes.
_CLEAN_TABLE = str.maketrans({"\u00a0": " ", "\u202f": " ", "\u200b": None})


def _open_binary(path):
    """Opens `path` for reading bytes, decompressing `.gz` files."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No such file: {os.fspath(path)!r}")
    if os.fspath(path).endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def read_lines(path):
    """Reads the text lines of a plain or gzip-compressed UTF-8 file.

    A file whose name ends in `.gz` is decompressed; any other file (`.txt`,
    `.tsv`, `train.en`, ...) is read as plain text. Only the line terminator
    (`\\n`, or `\\r\\n`) is removed: other whitespace is data and is kept. A
    UTF-8 byte-order mark at the start of the file is dropped. Lines are split
    on `\\n` only, so Unicode line separators inside a sentence stay in it.
    An empty file gives `[]` (the corpus readers `read_parallel_files` and
    `read_tsv_pairs` refuse one).

    Args:
        path: path of the file (`str` or `os.PathLike`).

    Returns:
        A list of `str`, one per line (a final newline does not add an empty
        line).

    Raises:
        FileNotFoundError: if `path` is not an existing file.
        ValueError: if a line is not valid UTF-8 (names the file and line),
            or a `.gz` file is not gzip data, is truncated or is corrupt
            (names the file and the last line read).
        OSError: if reading fails otherwise (names the file).
    """
    name = os.fspath(path)
    lines = []
    with _open_binary(path) as f:
        try:
            for number, raw in enumerate(f, start=1):
                if raw.endswith(b"\n"):
                    raw = raw[:-1]
                    if raw.endswith(b"\r"):
                        raw = raw[:-1]
                try:
                    line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as e:
                    raise ValueError(f"{name}, line {number}: not valid UTF-8 ({e}).") from None
                lines.append(line)
        except (EOFError, zlib.error, OSError) as e:  # gzip.BadGzipFile is an OSError
            raise _read_error(name, len(lines), e) from None
    return lines


def _read_error(name, lines_read, error):
    """The error for `error` raised while reading `name` after `lines_read` lines."""
    where = f"after line {lines_read}" if lines_read else "before its first line"
    detail = f"{type(error).__name__}: {error}"
    if not name.endswith(".gz"):
        return OSError(f"{name}: reading failed {where} ({detail}).")
    if isinstance(error, EOFError):
        return ValueError(
            f"{name}: truncated gzip file: the compressed data ends {where}, "
            f"before the end of the stream ({detail})."
        )
    if isinstance(error, gzip.BadGzipFile) and not lines_read:
        return ValueError(
            f"{name}: not a gzip file, although its name ends in .gz ({detail})."
        )
    return ValueError(f"{name}: corrupt gzip data {where} ({detail}).")


def _check_has_text(path, lines):
    """Refuses a corpus file that is empty or holds only blank lines."""
    if not lines:
        raise ValueError(f"{os.fspath(path)}: the file is empty (no sentences).")
    if not any(clean_text(line) for line in lines):
        raise ValueError(
            f"{os.fspath(path)}: the file has no non-empty lines "
            f"({len(lines)} blank line{'s' if len(lines) != 1 else ''})."
        )


def _check_has_pair(description, pairs):
    """Refuses pairs of which none has both sides non-empty."""
    if not any(clean_text(source) and clean_text(target) for source, target in pairs):
        raise ValueError(
            f"{description}: no line has both a non-empty source and a non-empty "
            f"target ({len(pairs)} lines), so there is no sentence pair."
        )


def read_parallel_files(source_path, target_path):
    """Reads a sentence-aligned pair of files (line `i` translates line `i`).

    Args:
        source_path: file of source sentences, one per line (`.gz` allowed).
        target_path: file of target sentences, one per line (`.gz` allowed).

    Returns:
        A list of `(source, target)` string pairs, in file order.

    Raises:
        FileNotFoundError: if either file is missing.
        ValueError: if the files have different numbers of lines (names both
            files and both counts), if a file is empty or has only blank
            lines (names it), if no line is non-empty in both files, or on
            what `read_lines` refuses (names the file and line).
    """
    sources = read_lines(source_path)
    _check_has_text(source_path, sources)
    targets = read_lines(target_path)
    _check_has_text(target_path, targets)
    if len(sources) != len(targets):
        raise ValueError(
            "Parallel files must have the same number of lines. Received: "
            f"{os.fspath(source_path)!r} has {len(sources)} lines, "
            f"{os.fspath(target_path)!r} has {len(targets)} lines."
        )
    pairs = list(zip(sources, targets))
    _check_has_pair(f"{os.fspath(source_path)} and {os.fspath(target_path)}", pairs)
    return pairs


def read_tsv_pairs(path, source_column=0, target_column=1):
    """Reads sentence pairs from a tab-separated file.

    Extra columns (e.g. an attribution column) are allowed and ignored.

    Args:
        path: a `.txt`, `.tsv` or `.gz` (compressed) file, UTF-8, one pair
            per line, columns separated by tabs.
        source_column: 0-based index of the source column.
        target_column: 0-based index of the target column.

    Returns:
        A list of `(source, target)` string pairs, in file order.

    Raises:
        FileNotFoundError: if the file is missing.
        ValueError: if a column index is not a non-negative integer, a line
            has too few columns (names the file and the 1-based line number),
            the file is empty or has only blank lines, no line has both
            columns non-empty (names the file), or on what `read_lines`
            refuses (names the file and line).
    """
    checks.non_negative_int("source_column", source_column)
    checks.non_negative_int("target_column", target_column)
    needed = max(source_column, target_column) + 1
    lines = read_lines(path)
    _check_has_text(path, lines)
    pairs = []
    for number, line in enumerate(lines, start=1):
        columns = line.split("\t")
        if len(columns) < needed:
            raise ValueError(
                f"{os.fspath(path)}, line {number}: expected at least {needed} "
                f"tab-separated columns, found {len(columns)}: {line[:80]!r}"
            )
        pairs.append((columns[source_column], columns[target_column]))
    _check_has_pair(os.fspath(path), pairs)
    return pairs


def clean_text(text):
    """Normalises the invisible oddities of real text.

    Maps U+00A0 (no-break space) and U+202F (narrow no-break space) to a
    plain space, removes U+200B (zero-width space) and strips leading and
    trailing whitespace. Nothing else changes (no Unicode normalisation, no
    case folding), so cleaned text is still the text people wrote.

    Args:
        text: a `str`.

    Returns:
        The cleaned `str`.
    """
    return text.translate(_CLEAN_TABLE).strip()


@dataclasses.dataclass
class FilterReport:
    """What a filter kept and dropped.

    Attributes:
        total: number of pairs seen.
        kept: number of pairs kept.
        empty: pairs dropped because a side was empty (after `clean_text`).
        too_long: pairs dropped because a side was longer than `max_length`.
        max_length: the length limit used (`None`: no limit), for messages.
        unit: what lengths count, for messages (e.g. "tokens").
    """

    total: int = 0
    kept: int = 0
    empty: int = 0
    too_long: int = 0
    max_length: int | None = None
    unit: str = "tokens"

    def __str__(self):
        if self.max_length is None:
            long_label = "too long"
        else:
            long_label = f"longer than {self.max_length} {self.unit}"
        return (
            f"kept {self.kept} of {self.total} pairs "
            f"(empty: {self.empty}, {long_label}: {self.too_long})"
        )


def _whitespace_tokens(text):
    return len(text.split())


def filter_pairs(pairs, max_length=None, length_fn=None, *, clean=False):
    """Drops empty and over-long sentence pairs, and counts them.

    A pair is dropped as *empty* if either side is empty after `clean_text`
    (checked first), and as *too long* if either side's `length_fn(text)`
    exceeds `max_length`. With `clean=False` kept pairs are returned
    unchanged; with `clean=True` they are returned cleaned, so that reading,
    cleaning and filtering a corpus cleans each sentence once. Lengths are
    measured on the text returned, i.e. on what will be tokenised.

    Args:
        pairs: iterable of `(source, target)` string pairs.
        max_length: `None` (no length limit) or a positive integer.
        length_fn: callable `str -> int`; defaults to the number of
            whitespace tokens (`len(text.split())`).
        clean: return the kept pairs with `clean_text` applied to both
            sides (keyword-only).

    Returns:
        `(kept_pairs, report)`: the list of kept pairs, in input order, and a
        `FilterReport`.

    Raises:
        ValueError: if `max_length` is not `None` or a positive integer, if
            `length_fn` is not callable, or if an item of `pairs` is not a
            pair of strings (names its index).
    """
    if max_length is not None:
        checks.positive_int("max_length", max_length)
    if length_fn is None:
        length_fn = _whitespace_tokens
    elif not callable(length_fn):
        raise ValueError(
            "Argument `length_fn` must be `None` or a callable `str -> int`. "
            f"Received: length_fn={length_fn!r}"
        )
    kept = []
    report = FilterReport(max_length=max_length)
    for index, pair in enumerate(pairs):
        _check_pair(index, pair)
        report.total += 1
        cleaned = (clean_text(pair[0]), clean_text(pair[1]))
        source, target = cleaned if clean else pair
        if not cleaned[0] or not cleaned[1]:
            report.empty += 1
        elif max_length is not None and (
            length_fn(source) > max_length or length_fn(target) > max_length
        ):
            report.too_long += 1
        else:
            kept.append(cleaned if clean else pair)
    report.kept = len(kept)
    return kept, report


def _check_pair(index, pair):
    """Checks that `pairs[index]` is a `(str, str)` pair."""
    if (
        not isinstance(pair, (tuple, list))
        or len(pair) != 2
        or not all(isinstance(side, str) for side in pair)
    ):
        raise ValueError(
            "Argument `pairs` must hold `(source, target)` pairs of strings. "
            f"Received: pairs[{index}]={pair!r}"
        )
