"""TextVQA data for M4C and SA-M4C: the mmf imdb, the answer words, the decoding targets.

M4C (Hu et al., 2020, "Iterative Answer Prediction with Pointer-Augmented
Multimodal Transformers for TextVQA", arXiv:1911.06258) answers a question
by decoding up to 12 tokens, each either a word of a fixed answer
vocabulary (indices `[0, V)`) or a copy of one of the image's first 50 OCR
tokens (indices `V + n`). This module holds what its released code (mmf's
`M4CAnswerProcessor`) computes on the data side:

* `read_imdb`: the mmf "imdb" (a `np.save`d object array, a header dict
  first, then one dict per question; docs/shapes_world.md shows the keys
  Shapes world writes) as checked `TextVQARecord`s;
* `simple_word`: mmf's answer and OCR token normalisation;
* `AnswerWordVocab`: the answer word vocabulary (mmf's
  `fixed_answer_vocab_textvqa_5k.txt` format, or built from training
  answers), `<pad>` = 0, then `<s>`, `</s>`, `<unk>`;
* `answer_sequences`: every way of writing each human answer as vocabulary
  words and OCR copies, and the soft scores of the first step;
* `m4c_targets`: the teacher-forcing inputs, the multi-label targets and the
  loss mask of one sampled sequence (Hu et al., 2020, Sec. 3.3), and
  SA-M4C's variant (Kant et al., 2020, "Spatially Aware Multimodal
  Transformers for TextVQA", arXiv:2007.12146) that also marks the other
  indices of the same word.

The OCR features (FastText, `keras_structattn.tasks.textvqa.phoc`, regions) are not
here. NumPy and the standard library only.
"""

import collections
import dataclasses
import os
import re
from typing import NamedTuple

import numpy as np

from keras_structattn.data.json_files import atomic_open
from keras_structattn.data.vocab import _by_count

PAD_WORD = "<pad>"
BOS_WORD = "<s>"
EOS_WORD = "</s>"
UNK_WORD = "<unk>"
SPECIAL_WORDS = (PAD_WORD, BOS_WORD, EOS_WORD, UNK_WORD)

# M4C's TextVQA settings (mmf's m4c config): 12 decoding steps, 50 OCR
# tokens, at most 20 index sequences per answer.
NUM_STEPS = 12
MAX_OCR = 50
MAX_MATCH = 20
# Normalised box coordinates may stray this far outside [0, 1] (rounding in
# the OCR output); they are then clipped.
BOX_TOLERANCE = 1e-3

# mmf's sentence tokenizer (mmf.utils.text.tokenize) splits on runs of
# non-word characters and keeps them as tokens.
_SENTENCE_SPLIT = re.compile(r"(\W+)")


def simple_word(text):
    """mmf's `word_tokenize`, M4C's answer and OCR token normalisation.

    Lower-cases, deletes "," and "?", writes "'s" as " 's", and strips the
    ends: "Joe's Cafe?" -> "joe 's cafe". Not idempotent (a second pass
    doubles the space before "'s"), so apply it once, to raw text.

    Args:
        text: a `str`.

    Returns:
        The normalised `str`.
    """
    if not isinstance(text, str):
        raise ValueError(f"Argument `text` must be a str. Received: text={text!r:.80}")
    return text.lower().replace(",", "").replace("?", "").replace("'s", " 's").strip()


def _sentence_tokens(text):
    """mmf's `tokenize`: " 's" split off, "," and "?" deleted, \\W+ runs kept."""
    text = text.lower().replace("'s", " 's").replace(",", "").replace("?", "")
    return [t.strip() for t in _SENTENCE_SPLIT.split(text) if t.strip()]


class TextVQARecord(NamedTuple):
    """One TextVQA question of an mmf imdb (`read_imdb`).

    Attributes:
        question_id: the int question id.
        image_id: the image id as the imdb gives it (a `str` in TextVQA, an
            int in Shapes world).
        image_name: the imdb's `image_name`, or None where it has none.
        question: the question `str`.
        question_tokens: the imdb's `question_tokens` (a list of `str`), or
            mmf's sentence tokens of the question where it has none.
        ocr_tokens: the OCR tokens as the imdb gives them (a list of `str`,
            not normalised; `answer_sequences` normalises them).
        ocr_boxes: float32 `[len(ocr_tokens), 4]`, normalised `x1, y1, x2,
            y2` in [0, 1], from `ocr_normalized_boxes`, else from `ocr_info`
            (`top_left_x, top_left_y, width, height`).
        answers: the human answers (a list of `str`, 10 in TextVQA), `[]`
            where the imdb has none (test splits).
        feature_path: the imdb's `feature_path`, or None.
        feature_index: the imdb's `feature_index` (Shapes world: the row in
            the split's feature file), or None.
        question_type: the imdb's `question_type`, or None.
        answer_source: the imdb's `answer_source` (Shapes world: "ocr" or
            "vocab"), or None.
        bias_conflict: the imdb's `bias_conflict` (Shapes world with a
            bias), or None.
    """

    question_id: int
    image_id: object
    image_name: str
    question: str
    question_tokens: list
    ocr_tokens: list
    ocr_boxes: np.ndarray
    answers: list
    feature_path: str = None
    feature_index: int = None
    question_type: str = None
    answer_source: str = None
    bias_conflict: bool = None


@dataclasses.dataclass(frozen=True)
class ImdbReport:
    """What `read_imdb` read.

    Attributes:
        path: the imdb file.
        header: the header dict (element 0), or None where there is none.
        entries: the question entries in the file (the header excluded).
        kept: the records returned.
        skipped: the entries skipped (`skip_invalid=True`).
        reasons: `{reason: count}` of the skipped entries; reasons:
            "not_a_dict", "missing_key", "bad_type", "bad_id",
            "duplicate_question_id", "bad_boxes".
        first_error: the message of the first skipped entry, or None.
    """

    path: str
    header: dict
    entries: int
    kept: int
    skipped: int
    reasons: dict
    first_error: str = None

    def summary(self):
        """One line: "<path>: 6 of 7 entries kept; skipped: bad_boxes 1"."""
        line = f"{self.path}: {self.kept} of {self.entries} entries kept"
        if not self.skipped:
            return line + "; nothing skipped"
        parts = ", ".join(f"{k} {v}" for k, v in sorted(self.reasons.items()))
        return f"{line}; skipped: {parts}; first: {self.first_error}"


class _Invalid(ValueError):
    """A malformed entry: `reason` is its `ImdbReport.reasons` key."""

    def __init__(self, reason, message):
        super().__init__(message)
        self.reason = reason


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _str_list(where, key, value):
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise _Invalid("bad_type", f"{where}: {key!r} must be a list of str; found {value!r:.80}.")
    for k, item in enumerate(value):
        if not isinstance(item, str):
            raise _Invalid(
                "bad_type", f"{where}: {key}[{k}] must be a str; found {item!r:.80}."
            )
    return [str(item) for item in value]


def _optional(where, entry, key, check, kind):
    value = entry.get(key)
    if value is None:
        return None
    if not check(value):
        raise _Invalid("bad_type", f"{where}: {key!r} must be {kind} or absent; "
                       f"found {value!r:.80}.")
    return value


def _boxes_from_info(where, info, count):
    if isinstance(info, np.ndarray):
        info = info.tolist()
    if not isinstance(info, (list, tuple)) or len(info) != count:
        raise _Invalid(
            "bad_boxes",
            f"{where}: 'ocr_info' must be a list of {count} items (one per OCR token); "
            f"found {info!r:.80}.",
        )
    boxes = np.zeros((count, 4), np.float64)
    for k, item in enumerate(info):
        box = item.get("bounding_box") if isinstance(item, dict) else None
        try:
            x, y = box["top_left_x"], box["top_left_y"]
            boxes[k] = [x, y, x + box["width"], y + box["height"]]
        except (TypeError, KeyError, ValueError):
            raise _Invalid(
                "bad_boxes",
                f"{where}: ocr_info[{k}] needs a 'bounding_box' with numeric top_left_x, "
                f"top_left_y, width, height; found {item!r:.120}.",
            ) from None
    return boxes


def _ocr_boxes(where, entry, count):
    """float32 `[count, 4]` checked normalised boxes (raises `_Invalid`)."""
    if entry.get("ocr_normalized_boxes") is not None:
        key = "ocr_normalized_boxes"
        try:
            boxes = np.asarray(entry[key], dtype=np.float64)
        except (TypeError, ValueError):
            raise _Invalid(
                "bad_boxes", f"{where}: {key!r} is not numeric; found {entry[key]!r:.80}."
            ) from None
        if count == 0 and boxes.size == 0:
            boxes = boxes.reshape(0, 4)
    elif entry.get("ocr_info") is not None:
        key = "ocr_info"
        boxes = _boxes_from_info(where, entry[key], count)
    elif count == 0:
        return np.zeros((0, 4), np.float32)
    else:
        raise _Invalid(
            "missing_key",
            f"{where}: {count} OCR tokens but neither 'ocr_normalized_boxes' nor 'ocr_info'.",
        )
    if boxes.shape != (count, 4):
        raise _Invalid(
            "bad_boxes",
            f"{where}: {key!r} must have shape [{count}, 4] (one x1, y1, x2, y2 box per OCR "
            f"token); found shape {list(boxes.shape)}.",
        )
    bad = ~np.isfinite(boxes).all(axis=1)
    tol = BOX_TOLERANCE
    with np.errstate(invalid="ignore"):
        bad |= ((boxes < -tol) | (boxes > 1 + tol)).any(axis=1)
        bad |= (boxes[:, 0] > boxes[:, 2] + tol) | (boxes[:, 1] > boxes[:, 3] + tol)
    if bad.any():
        k = int(np.argmax(bad))
        raise _Invalid(
            "bad_boxes",
            f"{where}: {key!r} box {k} = {boxes[k].tolist()} must be finite, within [0, 1] "
            f"(tolerance {tol}) with x1 <= x2 and y1 <= y2.",
        )
    return np.clip(boxes, 0.0, 1.0).astype(np.float32)


def _parse_entry(where, entry):
    """`(TextVQARecord, where with the question id)`; raises `_Invalid`."""
    if not isinstance(entry, dict):
        raise _Invalid("not_a_dict", f"{where}: expected a dict; found {entry!r:.80}.")
    if "question_id" not in entry:
        raise _Invalid("missing_key", f"{where}: missing key 'question_id'; keys: "
                       f"{sorted(entry)[:12]}.")
    qid = entry["question_id"]
    if not _is_int(qid) or qid < 0:
        raise _Invalid(
            "bad_id", f"{where}: 'question_id' must be a non-negative int; found {qid!r:.80}."
        )
    qid = int(qid)
    where = f"{where} (question id {qid})"
    for key in ("image_id", "ocr_tokens"):
        if key not in entry:
            raise _Invalid("missing_key", f"{where}: missing key {key!r}; keys: "
                           f"{sorted(entry)[:12]}.")
    image_id = entry["image_id"]
    if _is_int(image_id):
        image_id = int(image_id)
    elif not isinstance(image_id, str):
        raise _Invalid("bad_type", f"{where}: 'image_id' must be a str or an int; "
                       f"found {image_id!r:.80}.")
    key = "question" if "question" in entry else "question_str"
    if key not in entry:
        raise _Invalid("missing_key", f"{where}: missing key 'question' (or 'question_str').")
    question = entry[key]
    if not isinstance(question, str):
        raise _Invalid("bad_type", f"{where}: {key!r} must be a str; found {question!r:.80}.")
    if entry.get("question_tokens") is not None:
        question_tokens = _str_list(where, "question_tokens", entry["question_tokens"])
    else:
        question_tokens = _sentence_tokens(question)
    ocr_tokens = _str_list(where, "ocr_tokens", entry["ocr_tokens"])
    boxes = _ocr_boxes(where, entry, len(ocr_tokens))
    answers = entry.get("answers")
    answers = [] if answers is None else _str_list(where, "answers", answers)
    feature_index = _optional(where, entry, "feature_index", _is_int, "an int")
    record = TextVQARecord(
        question_id=qid,
        image_id=image_id,
        image_name=_optional(where, entry, "image_name", lambda v: isinstance(v, str), "a str"),
        question=str(question),
        question_tokens=question_tokens,
        ocr_tokens=ocr_tokens,
        ocr_boxes=boxes,
        answers=answers,
        feature_path=_optional(
            where, entry, "feature_path", lambda v: isinstance(v, str), "a str"
        ),
        feature_index=None if feature_index is None else int(feature_index),
        question_type=_optional(
            where, entry, "question_type", lambda v: isinstance(v, str), "a str"
        ),
        answer_source=_optional(
            where, entry, "answer_source", lambda v: isinstance(v, str), "a str"
        ),
        bias_conflict=_optional(
            where, entry, "bias_conflict", lambda v: isinstance(v, (bool, np.bool_)),
            "True or False",
        ),
    )
    if record.bias_conflict is not None:
        record = record._replace(bias_conflict=bool(record.bias_conflict))
    return record, where


def read_imdb(path, *, skip_invalid=False):
    """Reads an mmf TextVQA imdb (M4C's format; Shapes world writes it too).

    The file is `np.load(path, allow_pickle=True)` of a 1-D object array;
    element 0 is a header when it is a dict without "question_id" (mmf's
    and Shapes world's `{"version", "dataset_name", "dataset_type",
    "has_answer"}`), and every other element one question. Each question
    entry is checked: a dict; "question_id" a non-negative int, unique in
    the file; "image_id" a str or an int; "question" (or mmf's
    "question_str") a str; "ocr_tokens" a list of str; boxes of shape
    `[len(ocr_tokens), 4]`, finite, in [0, 1] within `BOX_TOLERANCE`, x1 <=
    x2 and y1 <= y2 (clipped to [0, 1] once accepted); "answers" absent,
    None or a list of str; the optional keys of `TextVQARecord` of their
    types. Other keys (`valid_answers`, `obj_normalized_boxes`, ...) are not
    read.

    Args:
        path: the `.npy` file.
        skip_invalid: False (default): the first malformed entry raises;
            True: malformed entries are skipped and counted in the report
            (keyword-only).

    Returns:
        `(records, report)`: the `TextVQARecord`s in file order and an
        `ImdbReport`.

    Raises:
        FileNotFoundError: if the file is missing.
        ValueError: naming the file, if it is not a 1-D object array `.npy`;
            without `skip_invalid`, naming the file, the element index and
            the question id where known, for a malformed entry or a
            duplicate question id.
    """
    if not isinstance(skip_invalid, bool):
        raise ValueError(
            f"Argument `skip_invalid` must be True or False. Received: {skip_invalid!r}"
        )
    name = os.fspath(path)
    if not os.path.isfile(name):
        raise FileNotFoundError(f"No such TextVQA imdb file: {name!r}")
    try:
        array = np.load(name, allow_pickle=True)
    except Exception as e:  # an unreadable file of any kind is reported as such
        raise ValueError(f"{name}: not a NumPy .npy imdb ({type(e).__name__}: {e}).") from None
    if not isinstance(array, np.ndarray) or array.ndim != 1 or array.dtype != object:
        shape = getattr(array, "shape", None)
        raise ValueError(
            f"{name}: an imdb is a 1-D object array (a header, then one dict per question); "
            f"found {type(array).__name__} of shape {shape} and dtype "
            f"{getattr(array, 'dtype', None)}."
        )
    header = None
    start = 0
    if len(array) and isinstance(array[0], dict) and "question_id" not in array[0]:
        header, start = dict(array[0]), 1
    records, seen = [], {}
    reasons = collections.Counter()
    first_error = None
    for index in range(start, len(array)):
        try:
            record, where = _parse_entry(f"{name}, imdb[{index}]", array[index])
            if record.question_id in seen:
                raise _Invalid(
                    "duplicate_question_id",
                    f"{where}: duplicate question id (also imdb[{seen[record.question_id]}]).",
                )
        except _Invalid as e:
            if not skip_invalid:
                raise ValueError(str(e)) from None
            reasons[e.reason] += 1
            first_error = first_error or str(e)
            continue
        seen[record.question_id] = index
        records.append(record)
    entries = len(array) - start
    report = ImdbReport(
        path=name, header=header, entries=entries, kept=len(records),
        skipped=entries - len(records), reasons=dict(reasons), first_error=first_error,
    )
    return records, report


class AnswerWordVocab:
    """M4C's answer word vocabulary: `<pad>` = 0, `<s>`, `</s>`, `<unk>`, words.

    The fixed part of M4C's output space (Hu et al., 2020, arXiv:1911.06258,
    Sec. 3.3): index i < `size` is `word(i)`; the OCR copies follow at
    `size + n`. Create one with `from_file` (mmf's vocabulary files),
    `from_answers` (built from training answers) or `AnswerWordVocab(words)`.

    Args:
        words: the distinct words in index order, the special ones included:
            `words[0]` must be "<pad>", and "<s>" and "</s>" must be among
            them; "<unk>" is appended when absent (mmf prepends it, which
            would move "<pad>" off 0 and fail its own M4C check, so mmf's
            M4C vocabularies always list it).

    Attributes:
        PAD, BOS, EOS, UNK: the indices of "<pad>" (0), "<s>", "</s>",
            "<unk>".
    """

    def __init__(self, words):
        if isinstance(words, str):
            raise ValueError(f"Argument `words` must be a list of str, not a str: {words!r:.80}")
        words = list(words)
        seen = {}
        for i, word in enumerate(words):
            if not isinstance(word, str) or not word.strip():
                raise ValueError(
                    f"Argument `words`: words[{i}] must be a non-blank str; found {word!r:.80}."
                )
            if word in seen:
                raise ValueError(
                    f"Argument `words`: {word!r} is listed twice (words[{seen[word]}] and "
                    f"words[{i}])."
                )
            seen[word] = i
        if not words or words[0] != PAD_WORD:
            raise ValueError(
                f"Argument `words` must start with {PAD_WORD!r} (index 0, M4C's padding). "
                f"Received: {words[:4]!r}"
            )
        for word in (BOS_WORD, EOS_WORD):
            if word not in seen:
                raise ValueError(f"Argument `words` must contain {word!r}.")
        if UNK_WORD not in seen:
            seen[UNK_WORD] = len(words)
            words.append(UNK_WORD)
        self._words = words
        self._index = seen
        self.PAD = 0
        self.BOS = seen[BOS_WORD]
        self.EOS = seen[EOS_WORD]
        self.UNK = seen[UNK_WORD]

    @classmethod
    def from_file(cls, path):
        """Reads a vocabulary file: one word per line, as mmf's `VocabDict`.

        The format of M4C's `fixed_answer_vocab_textvqa_5k.txt`: each line
        is stripped of surrounding whitespace; line 1 must be "<pad>".

        Args:
            path: the text file (UTF-8).

        Returns:
            An `AnswerWordVocab`.

        Raises:
            FileNotFoundError: if the file is missing.
            ValueError: naming the file and line, for a blank or repeated
                line, or a missing special word.
        """
        name = os.fspath(path)
        if not os.path.isfile(name):
            raise FileNotFoundError(f"No such answer vocabulary file: {name!r}")
        with open(name, encoding="utf-8") as f:
            lines = [line.strip() for line in f.readlines()]
        first = {}
        for number, word in enumerate(lines, start=1):
            if not word:
                raise ValueError(f"{name}, line {number}: blank line in an answer vocabulary.")
            if word in first:
                raise ValueError(
                    f"{name}, line {number}: {word!r} is already on line {first[word]}."
                )
            first[word] = number
        try:
            return cls(lines)
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None

    @classmethod
    def from_answers(cls, answer_lists, min_count=1):
        """Builds the vocabulary of the training answers' words.

        Every answer (all 10 of each question) is `simple_word`-normalised
        and split on whitespace; each word counts once per occurrence. The
        special words come first (`<pad>` 0, `<s>` 1, `</s>` 2, `<unk>` 3),
        then the words seen at least `min_count` times by descending count,
        ties alphabetical. (M4C's 5k vocabulary holds the most frequent
        TextVQA training answer words.)

        Args:
            answer_lists: an iterable of `TextVQARecord`s or of answer lists
                (sequences of raw `str`).
            min_count: a positive int (default 1).

        Returns:
            An `AnswerWordVocab`.

        Raises:
            ValueError: for a non-string answer, or if no word is seen
                `min_count` times.
        """
        if not _is_int(min_count) or min_count < 1:
            raise ValueError(
                f"Argument `min_count` must be a positive integer. Received: {min_count!r}"
            )
        counts = collections.Counter()
        for index, item in enumerate(answer_lists):
            answers = item.answers if isinstance(item, TextVQARecord) else item
            if not isinstance(answers, str):
                answers = list(answers)
            if isinstance(answers, str) or not all(isinstance(a, str) for a in answers):
                raise ValueError(
                    "Argument `answer_lists` must hold records or lists of answer strings. "
                    f"Received: item {index} = {item!r:.80}"
                )
            for answer in answers:
                counts.update(simple_word(answer).split())
        for word in SPECIAL_WORDS:
            counts.pop(word, None)
        kept = _by_count(counts, min_count, "answer word", "words")
        return cls(list(SPECIAL_WORDS) + [w for w, _ in kept])

    @property
    def size(self):
        """V, the number of words (the OCR copies start at index V)."""
        return len(self._words)

    @property
    def words(self):
        """The words in index order (a new list)."""
        return list(self._words)

    def __len__(self):
        return len(self._words)

    def __contains__(self, word):
        return word in self._index

    def index(self, word):
        """The index of a word, or -1 if absent (never `UNK`: M4C matches
        an answer word only to a vocabulary word it equals)."""
        return self._index.get(word, -1)

    def word(self, i):
        """The word at index `i`, an int in `[0, size)`."""
        if not _is_int(i) or not 0 <= i < len(self._words):
            raise ValueError(f"Word index {i!r} is outside [0, {len(self._words)}).")
        return self._words[int(i)]

    def save(self, path):
        """Writes one word per line (the `from_file` format), atomically.

        Args:
            path: the file to write (a temporary file is renamed onto it).
        """
        with atomic_open(path) as f:
            f.write("\n".join(self._words) + "\n")

    def __repr__(self):
        shown = ", ".join(repr(w) for w in self._words[4:8])
        more = ", ..." if len(self._words) > 8 else ""
        return f"AnswerWordVocab(size={self.size}, words=[{shown}{more}])"


def _positive(name, value):
    if not _is_int(value) or value < 1:
        raise ValueError(
            f"Argument `{name}` must be a positive integer. Received: {name}={value!r}"
        )
    return int(value)


def _ocr_positions(ocr_tokens, max_ocr):
    """`{simple_word(token): [positions]}` over the first `max_ocr` tokens."""
    if isinstance(ocr_tokens, str):
        raise ValueError(
            f"Argument `ocr_tokens` must be a list of str, not a str: {ocr_tokens!r:.80}"
        )
    positions = collections.defaultdict(list)
    for n, token in enumerate(list(ocr_tokens)[:max_ocr]):
        if not isinstance(token, str):
            raise ValueError(f"Argument `ocr_tokens`: item {n} is not a str: {token!r:.80}")
        positions[simple_word(token)].append(n)
    return positions


def answer_scores(answers):
    """The soft score of each distinct (normalised) answer, as mmf computes it.

    The average over the N leave-one-out subsets of the N human answers of
    min(1, matches / 3) (the VQA accuracy; 10 answers give 0.3, 0.6, 0.9, 1
    for 1, 2, 3, >= 4 matches).

    Args:
        answers: the human answers, already `simple_word`-normalised.

    Returns:
        `{answer: score}` (Python floats).
    """
    answers = list(answers)
    counts = collections.Counter(answers)
    # Leaving out annotator k, the answer matches `m - [answers[k] == a]` of
    # the other answers; summed in annotator order, as mmf does.
    return {
        a: sum(min(1.0, (m - (b == a)) / 3) for b in answers) / len(answers)
        for a, m in counts.items()
    }


def answer_sequences(answers, ocr_tokens, vocab, *, max_ocr=MAX_OCR, max_match=MAX_MATCH):
    """Every index sequence that writes a human answer, and the step-0 scores.

    As mmf's `M4CAnswerProcessor` (M4C, Hu et al., 2020, arXiv:1911.06258,
    Sec. 3.3): the answers and the first `max_ocr` OCR tokens are
    `simple_word`-normalised here (pass them raw, as the imdb gives them);
    each answer is split on whitespace and each of its words matched to its
    vocabulary index (where `vocab` holds it) and to `V + n` for every OCR
    position n whose normalised token equals it. An answer with a word that
    matches nothing (or with no word) has no sequence. The sequences of an
    answer are the combinations of its words' matches in order (vocabulary
    index first, then the OCR positions), cut to the first `max_match`
    after each word as mmf does (so the cut keeps the earliest
    combinations, not 20 of the full product). Each human answer adds its
    sequences again, so an answer given by 3 annotators weighs 3 times when
    the caller samples one uniformly.

    Args:
        answers: the raw human answers (a sequence of `str`; 10 in
            TextVQA, where mmf requires exactly 10; any number here).
        ocr_tokens: the raw OCR tokens of the image (a sequence of `str`).
        vocab: an `AnswerWordVocab` (V = `vocab.size`).
        max_ocr: OCR tokens the model sees (50 in M4C); keyword-only.
        max_match: most sequences per answer (20 in M4C); keyword-only.

    Returns:
        `(step0, sequences)`: `step0` maps each index some sequence starts
        with to the highest soft score (`answer_scores`) of the answers with
        such a sequence; `sequences` is the list of all answers' sequences
        (tuples of int in `[0, V + max_ocr)`), in answer order. Both empty
        when no answer can be written (or there are no answers).
    """
    max_ocr = _positive("max_ocr", max_ocr)
    max_match = _positive("max_match", max_match)
    if isinstance(answers, str):
        raise ValueError(f"Argument `answers` must be a list of str, not a str: {answers!r:.80}")
    answers = [simple_word(a) for a in answers]
    if not answers:
        return {}, []
    positions = _ocr_positions(ocr_tokens, max_ocr)
    scores = answer_scores(answers)
    size = vocab.size
    step0, sequences = {}, []
    for answer in answers:
        matches = []
        for word in answer.split():
            found = ([vocab.index(word)] if word in vocab else []) + [
                size + n for n in positions.get(word, ())
            ]
            if not found:
                matches = []
                break
            matches.append(found)
        if not matches:
            continue
        combos = [()]
        for found in matches:
            combos = [c + (i,) for c in combos for i in found][:max_match]
        sequences.extend(combos)
        for combo in combos:
            step0[combo[0]] = max(step0.get(combo[0], 0.0), scores[answer])
    return step0, sequences


def _same_word(index, ocr_words, vocab):
    """SA-M4C's other indices of the word at `index`: its vocabulary index
    (where the vocabulary holds it) and every OCR position reading it.

    Kant et al. (2020, arXiv:2007.12146) switch on every index of the same
    word, as the reference notes of this project describe it; docs/textvqa.md
    says where a reading of the released code differs (an OCR target there
    may add the vocabulary index only). `</s>` has none.
    """
    size = vocab.size
    if index == vocab.EOS:
        return []
    word = ocr_words[index - size] if index >= size else vocab.word(index)
    same = [size + n for n, w in enumerate(ocr_words) if w == word]
    i = vocab.index(word)
    return ([] if i < 0 or i == vocab.UNK else [i]) + same


def m4c_targets(step0, sequence, ocr_tokens, vocab, *, num_steps=NUM_STEPS, max_ocr=MAX_OCR,
                all_copies=False):
    """Teacher-forcing inputs, targets and loss mask of one answer sequence.

    M4C's training targets (Hu et al., 2020, arXiv:1911.06258, Sec. 3.3;
    mmf's `M4CAnswerProcessor`): step 0 has the soft scores `step0` (every
    index that starts some answer); step t >= 1 has a 1 at the sequence's
    token t, or at `</s>` after its last token; the previous-token input is
    `<s>` then the sequence; the loss covers the first min(1 + len, steps)
    steps. With `sequence=None` (no answer could be written) everything is
    zero, as in mmf (whose previous-token input is then all `<pad>`, not
    `<s>` first; no loss reaches those steps).

    `all_copies=True` is SA-M4C's variant (Kant et al., 2020,
    arXiv:2007.12146): at t >= 1 every index of the target's word is
    switched on: its vocabulary index (where the vocabulary holds it) and
    every OCR copy of it; `</s>` stays alone.

    Args:
        step0: `{index: score}` of `answer_sequences`.
        sequence: one of its `sequences` (the caller samples it, e.g.
            uniformly with a seeded `np.random.Generator`), or None.
        ocr_tokens: the raw OCR tokens given to `answer_sequences` (read
            for `all_copies` only).
        vocab: the `AnswerWordVocab`.
        num_steps: decoding steps (12 in M4C); keyword-only.
        max_ocr: OCR slots of the output (50 in M4C); keyword-only.
        all_copies: False (M4C) or True (SA-M4C); keyword-only.

    Returns:
        `(previous, scores, loss_mask)`: int32 `[num_steps]`, float32
        `[num_steps, V + max_ocr]`, float32 `[num_steps]`.

    Raises:
        ValueError: for an index outside `[0, V + max_ocr)`, an empty
            sequence, or `sequence=None` with a non-empty `step0`.
    """
    num_steps = _positive("num_steps", num_steps)
    max_ocr = _positive("max_ocr", max_ocr)
    if not isinstance(all_copies, bool):
        raise ValueError(f"Argument `all_copies` must be True or False. Received: {all_copies!r}")
    width = vocab.size + max_ocr
    previous = np.zeros(num_steps, np.int32)
    scores = np.zeros((num_steps, width), np.float32)
    loss_mask = np.zeros(num_steps, np.float32)
    for index, score in step0.items():
        if not _is_int(index) or not 0 <= index < width:
            raise ValueError(f"Argument `step0`: index {index!r} is outside [0, {width}).")
        scores[0, index] = score
    if sequence is None:
        if step0:
            raise ValueError(
                "Argument `sequence` is None but `step0` has entries: pick one of the "
                "`sequences` of `answer_sequences` (None only where there is none)."
            )
        return previous, scores, loss_mask
    sequence = tuple(sequence)
    if not sequence:
        raise ValueError("Argument `sequence` is empty: an answer has at least one token.")
    for i in sequence:
        if not _is_int(i) or not 0 <= i < width:
            raise ValueError(
                f"Argument `sequence`: index {i!r} is outside [0, {width}). Received: {sequence}"
            )
    ocr_words = None
    if all_copies:
        ocr_words = [simple_word(t) for t in list(ocr_tokens)[:max_ocr]]
    steps = min(1 + len(sequence), num_steps)
    loss_mask[:steps] = 1.0
    previous[0] = vocab.BOS
    for t in range(1, steps):
        previous[t] = sequence[t - 1]
        target = sequence[t] if t < len(sequence) else vocab.EOS
        scores[t, target] = 1.0
        if all_copies:
            if target >= vocab.size and target - vocab.size >= len(ocr_words):
                raise ValueError(
                    f"Argument `sequence`: OCR index {target} (token {target - vocab.size}) "
                    f"is past the {len(ocr_words)} OCR tokens given."
                )
            scores[t, _same_word(target, ocr_words, vocab)] = 1.0
    return previous, scores, loss_mask
