"""Reading JSON data files with errors that name the file and line; writing
files whole or not at all.

The readers of real formats (COCO captions, VQA v2, RefCOCO) share these:
a missing file, invalid UTF-8 or JSON, or a top-level key that is not a
list is reported with the file's name (and the line, for JSON syntax).
The line-by-line text readers (word vectors, split lists) share
`text_lines`, with the same messages.
The library's writers (vocabularies, scores, feature files) share
`atomic_open`; the score files, `write_json`. The readers and metrics
that check official JSON records one by one (VQA v2, RefCOCO, TextVQA
results) share `_Invalid`, `_field`, `_record_id` and `_skip_or_raise`.
"""

import contextlib
import json
import os
import tempfile


def _umask():
    mask = os.umask(0)  # the only way to read it is to set it
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_open(path, mode="w"):
    """A temporary file beside `path`, renamed onto it when the block ends
    without an error (and removed when it raises): a reader never sees half
    a file.

    Args:
        path: the file to write; its folder must exist.
        mode: "w" (UTF-8 text) or "wb".

    Yields:
        The open temporary file.
    """
    name = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(name))
    fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(name)}.",
                                suffix=".partial")
    try:
        # mkstemp makes the file 0600; the file written is the user's, with
        # the permissions any other file of theirs gets (0666 less the umask).
        os.chmod(temp, 0o666 & ~_umask())
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            yield f
        os.replace(temp, name)
    finally:
        if os.path.exists(temp):
            os.remove(temp)


def write_json(data, path):
    """Writes `data` to `path` as JSON through `atomic_open`: keys sorted,
    indented, non-ASCII kept, NaN refused (it is not JSON), a final newline.

    Args:
        data: a JSON-serialisable value.
        path: the file to write; its folder must exist.
    """
    with atomic_open(path) as f:
        json.dump(data, f, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False)
        f.write("\n")


def load_json(path, what):
    """The parsed JSON of `path`; errors name the file (and line).

    Args:
        path: the file.
        what: what the file should hold, for the messages ("VQA questions").

    Returns:
        The parsed value.

    Raises:
        FileNotFoundError: if the file is missing.
        ValueError: naming the file and line, for invalid UTF-8 or JSON.
    """
    name = os.fspath(path)
    if not os.path.isfile(name):
        raise FileNotFoundError(f"No such {what} file: {name!r}")
    with open(name, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{name}: not valid UTF-8 ({e}).") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{name}, line {e.lineno}: not valid JSON ({e.msg}, column {e.colno}); "
            f"expected {what}."
        ) from None


def text_lines(path, what):
    """The lines of a UTF-8 text file, numbered; errors name the file and line.

    The file is read a line at a time (word vector files run to gigabytes);
    a byte order mark on line 1 is dropped.

    Args:
        path: the file.
        what: what the file is, for the messages ("word vector").

    Returns:
        `(name, lines)`: `os.fspath(path)` and an iterator of
        `(number, line)`, numbered from 1, each line with its line ending.

    Raises:
        FileNotFoundError: if the file is missing (when called).
        ValueError: naming the file and line, for invalid UTF-8 (when that
            line is reached).
    """
    name = os.fspath(path)
    if not os.path.isfile(name):
        raise FileNotFoundError(f"No such {what} file: {name!r}")
    return name, _decoded_lines(name)


def _decoded_lines(name):
    with open(name, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{name}, line {number}: not valid UTF-8 ({e}).") from None
            yield number, line


def top_list(name, data, key, what):
    """`data[key]`, checked to be a list; errors name the file and key."""
    if not isinstance(data, dict):
        raise ValueError(
            f"{name}: expected a JSON object with a {key!r} list ({what}); "
            f"found a JSON {type(data).__name__}."
        )
    if key not in data:
        raise ValueError(f"{name}: missing key {key!r} ({what}); keys: {sorted(data)[:10]}.")
    if not isinstance(data[key], list):
        raise ValueError(f"{name}: {key!r} must be a list; found {type(data[key]).__name__}.")
    return data[key]


# ------------------------------------------------------------ records


class _Invalid(ValueError):
    """A malformed record: `reason` is its report key suffix."""

    def __init__(self, reason, message):
        super().__init__(message)
        self.reason = reason


def _field(where, entry, key, kind):
    if key not in entry:
        raise _Invalid("missing_key", f"{where}: missing key {key!r}; keys: {sorted(entry)[:10]}.")
    value = entry[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise _Invalid(
            "bad_type", f"{where}: {key!r} must be a {kind.__name__}; found {value!r:.80}."
        )
    return value


def _record_id(name, list_name, index, entry, key="question_id"):
    """`(id, where)` of a list entry; the id must be a non-negative int."""
    where = f"{name}, {list_name}[{index}]"
    if not isinstance(entry, dict):
        raise _Invalid("bad_type", f"{where}: expected a JSON object, found {entry!r:.80}.")
    if key not in entry:
        raise _Invalid("missing_key", f"{where}: missing key {key!r}; keys: {sorted(entry)[:10]}.")
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Invalid(
            "bad_id", f"{where}: {key!r} must be a non-negative integer; found {value!r:.80}."
        )
    return value, f"{name}, question id {value} ({list_name}[{index}])"


def _skip_or_raise(error, skip_invalid, report):
    if not skip_invalid:
        raise ValueError(str(error)) from None
    report[f"skipped/{error.reason}"] += 1
