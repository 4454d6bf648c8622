"""VQA v2 files: questions, annotations, results, answer vocabulary, targets.

The format is the official one (Goyal et al., 2017, "Making the V in VQA
Matter", arXiv:1612.00837; Antol et al., 2015, arXiv:1505.00468), which
Shapes world writes too (docs/shapes_world.md):

* questions `{"questions": [{question_id, image_id, question}], ...}`;
* annotations `{"annotations": [{question_id, image_id, question_type,
  answer_type, multiple_choice_answer, answers: [{answer, ...}] * 10}], ...}`
  (absent for the test splits);
* results `[{question_id, answer}]`, what the evaluation server reads.

The preprocessing is MCAN's (Yu et al., 2019, "Deep Modular Co-Attention
Networks for Visual Question Answering", arXiv:1906.10770): questions are
tokenised by `tokenize_question` and cut or padded to 14 words
(`question_batch`); the answer vocabulary keeps the normalised
`multiple_choice_answer`s of train+val seen at least 9 times (3,129 answers
on VQA v2; `AnswerVocab.build`); the training targets are soft scores,
0.3 per matching human answer up to 1 (`soft_scores`). The question
vocabulary is a `WordVocab` built with `min_count=1` (MCAN keeps every
training word): `WordVocab.build([r.tokens for r in train], min_count=1)`.

Every malformed input is a one-line `ValueError` naming the file and the
question id (or the list index when the id itself is unusable). With
`skip_invalid=True` the readers skip such records instead, and count each
in their report under `"skipped/<reason>"`: nothing is dropped silently.

Region features are read by `keras_structattn.data.image_features`
(`open_features`, `region_batch`). NumPy and the standard library only.
"""

import collections
import json
import os
import re
from typing import NamedTuple

import numpy as np

from keras_structattn import checks
from keras_structattn.data.json_files import _field
from keras_structattn.data.json_files import _Invalid
from keras_structattn.data.json_files import _record_id
from keras_structattn.data.json_files import _skip_or_raise
from keras_structattn.data.json_files import atomic_open
from keras_structattn.data.json_files import load_json
from keras_structattn.data.json_files import top_list
from keras_structattn.data.vocab import _by_count
from keras_structattn.decoding.tokens import PAD_ID
from keras_structattn.metrics.vqa_accuracy import read_vqa_results  # noqa: F401

QUESTION_LENGTH = 14
ANSWERS_PER_QUESTION = 10
# MCAN's `get_score`: 0, 1, 2, 3, >= 4 matching human answers.
SOFT_SCORE_LADDER = np.array([0.0, 0.3, 0.6, 0.9, 1.0], np.float32)

_ANSWER_VOCAB_FORMAT = "keras_structattn.AnswerVocab"
# MCAN (core/data/data_utils.py, `proc_ques`): these characters are deleted
# (so "what's" -> "whats"), then "-" and "/" become spaces.
_DELETED = re.compile(r"[.,'!?\"()*#:;]")


class VQARecord(NamedTuple):
    """One VQA question with its annotation.

    Attributes:
        question_id: the int question id.
        image_id: the int image id.
        question: the raw question string.
        tokens: `tokenize_question(question)`.
        question_type: the annotation's `question_type` (None without
            annotations).
        answer_type: the annotation's `answer_type` (None without
            annotations).
        answers: the 10 raw human answers (a tuple of `str`), or `()`
            without annotations.
        multiple_choice_answer: the annotation's most common answer, or None.
        bias_conflict: the annotation's `bias_conflict` (Shapes world with
            `--world_bias`: the answer contradicts the training split's
            confounder), or None where the annotation has none.
    """

    question_id: int
    image_id: int
    question: str
    tokens: list
    question_type: str = None
    answer_type: str = None
    answers: tuple = ()
    multiple_choice_answer: str = None
    bias_conflict: bool = None


def tokenize_question(text):
    """MCAN's question tokenizer.

    Lower-cases, deletes the characters `. , ' ! ? " ( ) * # : ;` (so
    "what's" gives "whats" and "3.5" gives "35"), replaces `-` and `/` by
    spaces, then splits on whitespace (MCAN, Yu et al., 2019,
    arXiv:1906.10770, `proc_ques` of its official code).

    Args:
        text: the question, a `str`.

    Returns:
        A list of `str` tokens.
    """
    if not isinstance(text, str):
        raise ValueError(f"Argument `text` must be a str. Received: text={text!r:.80}")
    return _DELETED.sub("", text.lower()).replace("-", " ").replace("/", " ").split()


def _parse_annotation(where, entry, image_id):
    """The annotation fields of one entry (raises `_Invalid`)."""
    if _field(where, entry, "image_id", int) != image_id:
        raise _Invalid(
            "image_id_mismatch",
            f"{where}: image id {entry['image_id']} differs from the question's {image_id}.",
        )
    question_type = _field(where, entry, "question_type", str)
    answer_type = _field(where, entry, "answer_type", str)
    best = _field(where, entry, "multiple_choice_answer", str)
    answers = _field(where, entry, "answers", list)
    if len(answers) != ANSWERS_PER_QUESTION:
        raise _Invalid(
            "answer_count",
            f"{where}: expected {ANSWERS_PER_QUESTION} answers, found {len(answers)}.",
        )
    raw = []
    for k, answer in enumerate(answers):
        value = answer.get("answer") if isinstance(answer, dict) else None
        if not isinstance(value, str):
            raise _Invalid(
                "answer_not_string",
                f"{where}, answers[{k}]: expected an object with a string 'answer'; "
                f"found {answer!r:.80}.",
            )
        raw.append(value)
    conflict = entry.get("bias_conflict")
    if conflict is not None and not isinstance(conflict, bool):
        raise _Invalid("bad_type", f"{where}: 'bias_conflict' must be true or false; "
                       f"found {conflict!r:.80}.")
    return question_type, answer_type, tuple(raw), best, conflict


def read_vqa(questions_path, annotations_path=None, *, skip_invalid=False):
    """Reads VQA v2 questions and, optionally, their annotations.

    Args:
        questions_path: the questions JSON file
            (`v2_OpenEnded_mscoco_<split>_questions.json`,
            `vqa/questions_<split>.json` of Shapes world).
        annotations_path: None (test splits) or the annotations JSON file;
            then every question needs exactly one annotation and every
            annotation a question.
        skip_invalid: False (default) raises on the first malformed record;
            True skips it and counts it in the report (keyword-only).

    Returns:
        `(records, report)`: a list of `VQARecord` in the order of the
        questions file, and a `collections.Counter` with "questions_in_file",
        "annotations_in_file" (with annotations), "questions" (returned) and
        one "skipped/<reason>" count per skipped record. A question skipped
        because its annotation is malformed counts once, under the
        annotation's reason; reasons: "bad_type", "missing_key", "bad_id",
        "duplicate_question_id", "duplicate_annotation",
        "unknown_question_id" (an annotation's), "image_id_mismatch",
        "answer_count", "answer_not_string", "without_annotation".

    Raises:
        FileNotFoundError: if a file is missing.
        ValueError: naming the file and question id (or list index), for
            invalid JSON, a missing top-level list, and (without
            `skip_invalid`) any malformed record as listed above.
    """
    checks.boolean("skip_invalid", skip_invalid)
    name = os.fspath(questions_path)
    questions = top_list(name, load_json(name, "VQA questions"), "questions", "VQA questions")
    report = collections.Counter(questions_in_file=len(questions))
    parsed = {}  # question id -> (question index, image id, question)
    for index, entry in enumerate(questions):
        try:
            qid, where = _record_id(name, "questions", index, entry)
            if qid in parsed:
                raise _Invalid(
                    "duplicate_question_id",
                    f"{where}: duplicate question id (also questions[{parsed[qid][0]}]).",
                )
            image_id = _field(where, entry, "image_id", int)
            question = _field(where, entry, "question", str)
        except _Invalid as e:
            _skip_or_raise(e, skip_invalid, report)
            continue
        parsed[qid] = (index, image_id, question)

    annotated = None
    if annotations_path is not None:
        aname = os.fspath(annotations_path)
        annotations = top_list(
            aname, load_json(aname, "VQA annotations"), "annotations", "VQA annotations"
        )
        report["annotations_in_file"] = len(annotations)
        annotated, failed, seen = {}, set(), {}
        for index, entry in enumerate(annotations):
            owner = None  # the question a malformed annotation takes down with it
            try:
                qid, where = _record_id(aname, "annotations", index, entry)
                if qid in seen:
                    raise _Invalid(
                        "duplicate_annotation",
                        f"{where}: a second annotation of the question (also "
                        f"annotations[{seen[qid]}]).",
                    )
                seen[qid] = index
                if qid not in parsed:
                    raise _Invalid(
                        "unknown_question_id", f"{where}: the question id is not in {name}."
                    )
                owner = qid
                annotated[qid] = _parse_annotation(where, entry, parsed[qid][1])
            except _Invalid as e:
                _skip_or_raise(e, skip_invalid, report)
                if owner is not None:
                    failed.add(owner)

    records = []
    for qid, (index, image_id, question) in parsed.items():
        if annotated is None:
            extra = (None, None, (), None, None)
        elif qid in annotated:
            extra = annotated[qid]
        elif qid in failed:
            continue
        else:
            _skip_or_raise(
                _Invalid(
                    "without_annotation",
                    f"{name}, question id {qid} (questions[{index}]): no annotation in "
                    f"{aname}.",
                ),
                skip_invalid,
                report,
            )
            continue
        question_type, answer_type, answers, best, conflict = extra
        records.append(
            VQARecord(
                qid, image_id, question, tokenize_question(question),
                question_type, answer_type, answers, best, conflict,
            )
        )
    report["questions"] = len(records)
    return records, report


def records_report(report):
    """One line for a reader's report: what was read and what was skipped.

    Args:
        report: the `Counter` of `read_vqa`, `read_refs` or the like.

    Returns:
        A `str` such as "6 questions returned (of 6 in the file, 6
        annotations); skipped: answer_count 1".
    """
    plain = {k: v for k, v in report.items() if "/" not in k}
    parts = [", ".join(f"{k.replace('_', ' ')} {v}" for k, v in plain.items())]
    skipped = {k.split("/", 1)[1]: v for k, v in report.items() if k.startswith("skipped/")}
    if skipped:
        parts.append("skipped: " + ", ".join(f"{k} {v}" for k, v in sorted(skipped.items())))
    else:
        parts.append("nothing skipped")
    others = {k: v for k, v in report.items() if "/" in k and not k.startswith("skipped/")}
    if others:
        parts.append(", ".join(f"{k} {v}" for k, v in others.items()))
    return "; ".join(parts)


def _identity(answer):
    return answer


def _normalizer(normalize):
    if normalize is None:
        return _identity
    if not callable(normalize):
        raise ValueError(
            "Argument `normalize` must be None or a function str -> str. "
            f"Received: normalize={normalize!r}"
        )
    return normalize


class AnswerVocab:
    """The answer classes of a VQA model: normalised answer strings by index.

    Build one with `AnswerVocab.build`, or load one written by `save`. The
    answers are stored normalised: look them up (`index`) after applying the
    same `normalize` as `build` did.

    Args:
        answers: the distinct answer strings, in index order.
        counts: optional counts of each answer (kept for reports and
            saved with the vocabulary).
    """

    def __init__(self, answers, counts=None):
        answers = list(answers)
        if not answers:
            raise ValueError("Argument `answers` is empty: a vocabulary needs an answer.")
        index = {}
        for i, answer in enumerate(answers):
            if not isinstance(answer, str):
                raise ValueError(
                    f"Argument `answers` must hold strings. Received: answers[{i}]={answer!r:.80}"
                )
            if answer in index:
                raise ValueError(
                    f"Argument `answers` lists {answer!r} twice (at {index[answer]} and {i})."
                )
            index[answer] = i
        if counts is not None:
            counts = [int(c) for c in counts]
            if len(counts) != len(answers):
                raise ValueError(
                    f"Argument `counts` must have one count per answer ({len(answers)}). "
                    f"Received: {len(counts)} counts"
                )
        self._answers = answers
        self._index = index
        self._counts = counts

    @classmethod
    def build(cls, answer_lists, min_count=9, normalize=None):
        """Counts normalised answers and keeps those seen `min_count` times.

        MCAN counts the `multiple_choice_answer` of every VQA v2 train and
        val question, normalised by `prep_ans` (the official evaluation's
        answer processing), and keeps those seen more than 8 times: 3,129
        answers (Yu et al., 2019, arXiv:1906.10770). Here the answers are
        ordered by descending count, ties alphabetical (MCAN's order is its
        JSON dict order; the order does not change any accuracy).

        Args:
            answer_lists: an iterable with one item per question: a `str`
                (its `multiple_choice_answer`, MCAN's choice), counted once,
                or a list/tuple of `str` (e.g. its 10 human answers), each
                counted.
            min_count: answers seen fewer times are left out; a positive
                int (9, MCAN's "more than 8").
            normalize: None (the answers are used as they are) or a
                function `str -> str` applied to each answer first, e.g.
                `keras_structattn.metrics.vqa_accuracy.prepare_answer`.

        Returns:
            An `AnswerVocab`.

        Raises:
            ValueError: for a non-string answer, or if no answer is seen
                `min_count` times (naming the highest count).
        """
        checks.positive_int("min_count", min_count)
        normalize = _normalizer(normalize)
        counts = collections.Counter()
        for index, item in enumerate(answer_lists):
            items = [item] if isinstance(item, str) else item
            if not isinstance(items, (list, tuple)) or not all(isinstance(a, str) for a in items):
                raise ValueError(
                    "Argument `answer_lists` must hold answer strings or lists of them. "
                    f"Received: item {index} = {item!r:.80}"
                )
            counts.update(normalize(a) for a in items)
        kept = _by_count(counts, min_count, "answer", "answers")
        return cls([a for a, _ in kept], [n for _, n in kept])

    @property
    def answers(self):
        """The answers in index order (a new list)."""
        return list(self._answers)

    @property
    def counts(self):
        """The answer counts of `build` (a list), or None."""
        return None if self._counts is None else list(self._counts)

    def __len__(self):
        return len(self._answers)

    def __contains__(self, answer):
        return answer in self._index

    def index(self, answer):
        """The index of an (already normalised) answer, or -1 if absent."""
        return self._index.get(answer, -1)

    def answer(self, i):
        """The answer at index `i` (an int in `[0, len(self))`)."""
        i = int(i)
        if not 0 <= i < len(self._answers):
            raise ValueError(
                f"Answer index {i} is outside [0, {len(self._answers)}) of the vocabulary."
            )
        return self._answers[i]

    def save(self, path):
        """Writes the vocabulary as JSON, atomically (temp file, `os.replace`).

        Args:
            path: the file to write.
        """
        data = {"format": _ANSWER_VOCAB_FORMAT, "version": 1, "answers": self._answers}
        if self._counts is not None:
            data["counts"] = self._counts
        with atomic_open(path) as f:
            json.dump(data, f, ensure_ascii=False, indent=0)
            f.write("\n")

    @classmethod
    def load(cls, path):
        """Loads a vocabulary written by `save`.

        Raises:
            FileNotFoundError: if the file is missing.
            ValueError: naming the file, if it is not an `AnswerVocab` file.
        """
        name = os.fspath(path)
        data = load_json(name, "AnswerVocab")
        if not isinstance(data, dict) or data.get("format") != _ANSWER_VOCAB_FORMAT:
            raise ValueError(
                f'{name}: not an AnswerVocab file (expected "format": "{_ANSWER_VOCAB_FORMAT}").'
            )
        answers = data.get("answers")
        if not isinstance(answers, list) or not answers:
            raise ValueError(f"{name}: 'answers' must be a non-empty list of strings.")
        try:
            return cls(answers, data.get("counts"))
        except (ValueError, TypeError) as e:
            raise ValueError(f"{name}: {e}") from None

    def __repr__(self):
        shown = ", ".join(repr(a) for a in self._answers[:5])
        more = ", ..." if len(self._answers) > 5 else ""
        return f"AnswerVocab(size={len(self)}, answers=[{shown}{more}])"


def soft_scores(answers, vocab, normalize=None):
    """MCAN's soft target of one question over the answer vocabulary.

    For each vocabulary answer, the number of human answers equal to it
    after `normalize`, mapped 0 -> 0, 1 -> 0.3, 2 -> 0.6, 3 -> 0.9,
    >= 4 -> 1 (MCAN's `get_score`, about min(1, 0.3 count); Yu et al.,
    2019, arXiv:1906.10770). Human answers outside the vocabulary add
    nothing.

    Args:
        answers: the raw human answers (a sequence of `str`, 10 in VQA).
        vocab: an `AnswerVocab`.
        normalize: None or the function `str -> str` `vocab` was built with.

    Returns:
        float32 `[len(vocab)]`.
    """
    normalize = _normalizer(normalize)
    if isinstance(answers, str):
        raise ValueError(
            f"Argument `answers` must be a sequence of str, not a str. Received: {answers!r:.80}"
        )
    scores = np.zeros(len(vocab), np.float32)
    for answer, count in collections.Counter(normalize(a) for a in answers).items():
        i = vocab.index(answer)
        if i >= 0:
            scores[i] = SOFT_SCORE_LADDER[min(count, len(SOFT_SCORE_LADDER) - 1)]
    return scores


def soft_score_batch(records, vocab, normalize=None):
    """The soft targets of a batch of questions.

    Args:
        records: B `VQARecord`s (with annotations) or answer sequences.
        vocab: an `AnswerVocab`.
        normalize: as for `soft_scores`.

    Returns:
        float32 `[B, len(vocab)]`.
    """
    records = list(records)
    if not records:
        raise ValueError("Argument `records` is empty: a batch needs at least one question.")
    out = np.zeros((len(records), len(vocab)), np.float32)
    for row, record in enumerate(records):
        answers = record.answers if isinstance(record, VQARecord) else record
        if not answers:
            qid = getattr(record, "question_id", row)
            raise ValueError(
                f"Question {qid} (batch row {row}) has no human answers (a test split read "
                "without annotations?)."
            )
        out[row] = soft_scores(answers, vocab, normalize)
    return out


def question_batch(token_lists, vocab, max_length=QUESTION_LENGTH):
    """Word ids of a batch of questions, cut or padded to `max_length`.

    As MCAN (14 words, no end symbol; Yu et al., 2019, arXiv:1906.10770),
    with the `WordVocab` ids (0 padding, 2 unknown words).

    Args:
        token_lists: B token lists (`VQARecord.tokens`).
        vocab: a `WordVocab`.
        max_length: columns; a positive int (default 14).

    Returns:
        int32 `[B, max_length]`, padded with 0.
    """
    checks.positive_int("max_length", max_length)
    token_lists = list(token_lists)
    if not token_lists:
        raise ValueError("Argument `token_lists` is empty: a batch needs at least one question.")
    out = np.full((len(token_lists), max_length), PAD_ID, np.int32)
    for row, tokens in enumerate(token_lists):
        if isinstance(tokens, str):
            raise ValueError(
                f"Argument `token_lists` must hold token lists, not strings. Received: "
                f"item {row} = {tokens!r:.80}"
            )
        ids = vocab.encode(list(tokens))[:max_length]
        out[row, : len(ids)] = ids
    return out
