"""TextVQA accuracy and ANLS, the scene-text VQA metrics.

- TextVQA accuracy (Singh et al., 2019, "Towards VQA Models That Can Read",
  arXiv:1904.08920, Sec. 5): the VQA soft accuracy over 10 human answers
  (Antol et al., 2015, arXiv:1505.00468), after the answer normalisation of
  the EvalAI server, as mmf's `TextVQAAccuracyEvaluator` computes it.
- ANLS, the Average Normalized Levenshtein Similarity (Biten et al., 2019,
  "Scene Text Visual Question Answering", arXiv:1905.13648, Eq. 1), with the
  paper's threshold rule (`mode="st_vqa"`) or mmf's (`mode="mmf"`).

`evaluate_textvqa` scores a results list against annotations; the readers
take the official TextVQA JSON, mmf imdb `.npy` files (what the Shapes world
writes too) and results JSON. Definitions, mmf's differences and edge cases:
`docs/textvqa_metrics.md`. NumPy and the standard library only.
"""

import collections
import dataclasses
import numbers
import os
from collections.abc import Mapping

import numpy as np

from keras_structattn.data.json_files import _field
from keras_structattn.data.json_files import _Invalid
from keras_structattn.data.json_files import _record_id
from keras_structattn.data.json_files import load_json
from keras_structattn.data.json_files import top_list
from keras_structattn.data.json_files import write_json
from keras_structattn.metrics.vqa_accuracy import _clean
from keras_structattn.metrics.vqa_accuracy import _indexed
from keras_structattn.metrics.vqa_accuracy import _leave_one_out
from keras_structattn.metrics.vqa_accuracy import _listed
from keras_structattn.metrics.vqa_accuracy import _predictions
from keras_structattn.metrics.vqa_accuracy import _same_ids
from keras_structattn.metrics.vqa_accuracy import process_digit_article
from keras_structattn.metrics.vqa_accuracy import process_punctuation
from keras_structattn.metrics.vqa_accuracy import read_vqa_results

TEXTVQA_ANSWERS = 10  # annotators a TextVQA question has

ANLS_MODES = ("st_vqa", "mmf")
ANSWERS_PER_QUESTION = 10


def normalize_evalai_answer(text):
    """The EvalAI answer normalisation of TextVQA (mmf's
    `EvalAIAnswerProcessor`).

    Lower-case; delete every "," and "?"; write "'s" as " 's"; newlines and
    tabs to spaces; strip; then `process_punctuation` and
    `process_digit_article` of the VQA accuracy. Where it differs from the
    VQA evaluation (`docs/vqa_metrics.md`): it lower-cases first, deletes
    commas and question marks outright, splits "'s" off, and is applied to
    every answer and prediction, with no all-identical exception. Its
    punctuation step tests `(?<=\\d)(,)+(?=\\d)` where the VQA one tests
    `(\\d)(,)(\\d)`; the two differ only on runs of commas, and no comma
    is left by then, so the shared `process_punctuation` gives the same
    result.

    Args:
        text: an answer string.

    Returns:
        The normalised answer: "Two" -> "2", "the Cafe." -> "cafe",
        "what's" -> "what 's".
    """
    text = text.lower().replace(",", "").replace("?", "").replace("'s", " 's")
    return process_digit_article(process_punctuation(_clean(text)))


def _answer_list(answers, what="answers"):
    """`answers` as a non-empty list of strings."""
    if isinstance(answers, str) or not isinstance(answers, (list, tuple, np.ndarray)):
        raise ValueError(f"`{what}` must be a list of answer strings; received {answers!r:.100}.")
    answers = list(answers)
    if not answers:
        raise ValueError(f"`{what}` is empty; a question needs at least one answer.")
    for k, answer in enumerate(answers):
        if not isinstance(answer, str):
            raise ValueError(f"`{what}`[{k}] must be a string; received {answer!r:.100}.")
    return [str(a) for a in answers]  # plain str, also from a NumPy array


def _check_prediction(prediction):
    if not isinstance(prediction, str):
        raise ValueError(f"`prediction` must be a string; received {prediction!r:.100}.")


def textvqa_accuracy(prediction, answers):
    """The TextVQA accuracy of one prediction, in [0, 1].

    Prediction and answers go through `normalize_evalai_answer`; the score
    is the mean, over the answers left out in turn, of
    min(1, #answers among the others equal to the prediction / 3): 0.3,
    0.6, 0.9, 1.0 for 1, 2, 3, >= 4 matches of 10 (mmf's
    `_compute_answer_scores`, value for value).

    mmf asserts 10 answers. Here any number n >= 1 is scored by the same
    leave-one-out mean over n subsets, as the VQA accuracy does: with fewer
    than 4 answers the score cannot reach 1 (n = 1 always gives 0, n = 3
    all matching gives 2/3). Use ANLS for datasets with one or two answers
    (ST-VQA).

    Args:
        prediction: the predicted answer string.
        answers: the human answer strings (10 in TextVQA).

    Returns:
        A float in [0, 1].

    Raises:
        ValueError: if `prediction` is not a string, or `answers` is not a
            non-empty list of strings.
    """
    _check_prediction(prediction)
    answers = _answer_list(answers)
    return _leave_one_out(normalize_evalai_answer(prediction),
                          [normalize_evalai_answer(a) for a in answers])


def levenshtein(a, b):
    """The Levenshtein distance: the fewest single-character insertions,
    deletions and substitutions that turn `a` into `b`.

    Dynamic programming over two rows, O(len(a) * len(b)) time and
    O(min(len(a), len(b))) memory; characters are Unicode code points.

    Args:
        a, b: strings (or any sequences of comparable items).

    Returns:
        An int.
    """
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1,  # delete x
                               current[j - 1] + 1,  # insert y
                               previous[j - 1] + (x != y)))  # substitute
        previous = current
    return previous[-1]


def _check_anls_args(threshold, mode):
    if mode not in ANLS_MODES:
        raise ValueError(f"`mode` must be one of {ANLS_MODES}; received mode={mode!r}.")
    if (isinstance(threshold, bool) or not isinstance(threshold, numbers.Real)
            or not 0 < threshold <= 1):
        raise ValueError(f"`threshold` must be a number in (0, 1]; received "
                         f"threshold={threshold!r}.")


def _similarity(prediction, answer, threshold, mode):
    """The thresholded 1 - NL of two lower-cased, stripped strings."""
    longest = max(len(prediction), len(answer))
    if longest == 0:
        if mode == "mmf":
            raise ValueError("the prediction and an answer are both empty after lower-casing "
                             "and stripping: mmf's STVQAANLSEvaluator divides by zero there "
                             "(use mode='st_vqa', which scores 1).")
        return 1.0
    distance = levenshtein(prediction, answer) / longest
    similarity = 1 - distance  # mmf's expression, for bit-identical values
    if mode == "mmf":
        # mmf keeps the similarity when it is >= 0.5 (NL <= 0.5).
        return similarity if similarity >= 1 - threshold else 0.0
    # Biten et al., Eq. 1: 1 - NL when NL < threshold, else 0.
    return similarity if distance < threshold else 0.0


def anls(prediction, answers, *, threshold=0.5, mode="st_vqa"):
    """The ANLS score of one prediction (Biten et al., 2019, arXiv:1905.13648,
    Eq. 1): the best, over the answers, of the thresholded normalised
    Levenshtein similarity.

    Both strings are lower-cased and stripped (nothing else); NL is the
    Levenshtein distance divided by the longer length. With `mode="st_vqa"`
    (the paper) a pair scores 1 - NL if NL < `threshold`, else 0; two empty
    strings score 1 (NL is 0/0; the strings are equal); the metric is
    space-sensitive, so a string of whitespace alone is not stripped (`' '`
    against `'  '` has NL = 0.5 and scores 0, not 1). With `mode="mmf"`
    (mmf's `STVQAANLSEvaluator`) a pair keeps 1 - NL when
    1 - NL >= 1 - `threshold`, so NL == 0.5 scores 0.5, not 0; and two empty
    strings raise a ValueError where mmf raises ZeroDivisionError.

    Args:
        prediction: the predicted answer string.
        answers: the answer strings (any number >= 1).
        threshold: the NL threshold, in (0, 1]; 0.5 in the paper and mmf.
        mode: "st_vqa" (default) or "mmf", see above.

    Returns:
        A float in [0, 1].

    Raises:
        ValueError: for a bad argument, or, in "mmf" mode, an empty
            prediction with an empty answer.
    """
    _check_anls_args(threshold, mode)
    _check_prediction(prediction)
    answers = _answer_list(answers)
    prediction = _anls_normalized(prediction, mode)
    return max(
        _similarity(prediction, _anls_normalized(a, mode), threshold, mode) for a in answers
    )


def _anls_normalized(text, mode):
    """`text` lower-cased and stripped; in "st_vqa" mode a string of
    whitespace alone is kept as it is. ST-VQA's ANLS is space-sensitive:
    stripping such a string would make any two of them equal (`' '` and
    `'  '` would score 1; as they are, NL = 0.5 scores 0). mmf strips
    every string."""
    lowered = text.lower()
    stripped = lowered.strip()
    if mode == "st_vqa" and not stripped:
        return lowered
    return stripped


@dataclasses.dataclass(frozen=True)
class TextVQAScores:
    """The result of `evaluate_textvqa` (fractions in [0, 1], not percent).

    Attributes:
        accuracy: mean TextVQA accuracy over the questions.
        anls: mean ANLS over the questions.
        per_question: `{question_id: {"accuracy": float, "anls": float}}`
            in annotation order.
        count: the number of questions.
        anls_mode: "st_vqa" or "mmf".
    """

    accuracy: float
    anls: float
    per_question: dict
    count: int
    anls_mode: str = "st_vqa"

    def to_json(self):
        """`{"accuracy", "anls", "per_question": {str(question_id): {...}}}`
        (JSON object keys are strings)."""
        return {"accuracy": self.accuracy, "anls": self.anls,
                "per_question": {str(q): dict(s) for q, s in self.per_question.items()}}


def evaluate_textvqa(annotations, results, *, anls_mode="st_vqa"):
    """Scores TextVQA results: TextVQA accuracy and ANLS of every question.

    Args:
        annotations: an iterable of `{"question_id", "answers": [str]}`
            dicts (as `read_textvqa_annotations` returns; other keys are
            ignored), or the official file's dict with its "data" list.
        results: `[{"question_id", "answer"}]` (as `read_textvqa_results`
            returns), or a dict `{question_id: answer}` (string keys of
            digits are taken as ints, as JSON writes them).
        anls_mode: "st_vqa" (default) or "mmf", see `anls`.

    Returns:
        A `TextVQAScores`.

    Raises:
        ValueError: when the result ids are not exactly the annotation ids
            (naming a missing or extra id and how many), on a duplicated id,
            a malformed record, no annotation, or (`anls_mode="mmf"`) an
            empty prediction with an empty answer (naming the question id).
    """
    _check_anls_args(0.5, anls_mode)
    if not isinstance(annotations, Mapping):
        annotations = list(annotations)
    gts = _indexed(_listed(annotations, "data", "annotations"), "annotations")
    if not gts:
        raise ValueError("`annotations` is empty: no question to score.")
    predictions = _predictions(results)
    _same_ids(predictions, gts, "results", "annotations")

    per_question = {}
    for qid, record in gts.items():
        if "answers" not in record:
            raise ValueError(f"`annotations`: question id {qid!r} has no 'answers'.")
        try:
            accuracy = textvqa_accuracy(predictions[qid], record["answers"])
            score = anls(predictions[qid], record["answers"], mode=anls_mode)
        except ValueError as e:
            raise ValueError(f"question id {qid!r}: {e}") from None
        per_question[qid] = {"accuracy": accuracy, "anls": score}
    count = len(per_question)
    # mmf's order of operations: sum, then divide.
    return TextVQAScores(
        accuracy=sum(s["accuracy"] for s in per_question.values()) / count,
        anls=sum(s["anls"] for s in per_question.values()) / count,
        per_question=per_question,
        count=count,
        anls_mode=anls_mode,
    )


def write_textvqa_scores_json(scores, path):
    """Writes `scores.to_json()` to `path` atomically (a temporary file in
    the same folder, then `os.replace`), keys sorted, indented."""
    write_json(scores.to_json(), path)


def _load_imdb(name):
    """The entries (header removed) of an mmf imdb `.npy`, list name "imdb"."""
    if not os.path.isfile(name):
        raise FileNotFoundError(f"No such TextVQA imdb file: {name!r}")
    try:
        data = np.load(name, allow_pickle=True)
    except (OSError, ValueError, EOFError) as e:
        raise ValueError(f"{name}: not a NumPy .npy file ({e}).") from None
    if not isinstance(data, np.ndarray) or data.ndim != 1 or len(data) == 0:
        raise ValueError(f"{name}: expected a 1-D object array (an imdb: a header dict, then "
                         f"one dict per question); found {type(data).__name__} of shape "
                         f"{getattr(data, 'shape', None)}.")
    header = data[0]
    if not isinstance(header, dict) or "question_id" in header:
        raise ValueError(f"{name}, imdb[0]: expected the header dict (without 'question_id'); "
                         f"found {header!r:.80}.")
    if header.get("has_answer") is False:
        raise ValueError(f"{name}: the imdb header says has_answer=False (a test split); "
                         "there are no answers to evaluate against.")
    entries = []
    for entry in data[1:]:
        qid = entry.get("question_id") if isinstance(entry, dict) else None
        if isinstance(qid, np.integer):
            # NumPy ints, as some imdb writers store them, are ids too.
            entry = dict(entry, question_id=int(qid))
        entries.append(entry)
    return entries


def _parse_textvqa_entry(name, list_name, index, entry):
    """`{"question_id", "answers", "image_id", "question"}` of one entry."""
    qid, where = _record_id(name, list_name, index, entry)
    question = _field(where, entry, "question", str)
    if "image_id" not in entry:
        raise _Invalid("missing_key", f"{where}: missing key 'image_id'; "
                       f"keys: {sorted(entry)[:10]}.")
    image_id = entry["image_id"]
    if isinstance(image_id, numbers.Integral) and not isinstance(image_id, bool):
        image_id = int(image_id)  # Shapes world imdbs use int ids
    elif not isinstance(image_id, str):
        raise _Invalid("bad_type", f"{where}: 'image_id' must be a string or an integer; "
                       f"found {image_id!r:.80}.")
    if "answers" not in entry:
        raise _Invalid("missing_key", f"{where}: missing key 'answers' (test splits have none); "
                       f"keys: {sorted(entry)[:10]}.")
    try:
        answers = _answer_list(entry["answers"])
    except ValueError as e:
        raise _Invalid("bad_answers", f"{where}: {e}") from None
    return {"question_id": qid, "answers": answers, "image_id": image_id, "question": question}


def read_textvqa_annotations(path):
    """Reads TextVQA annotations for evaluation.

    Two formats: the official JSON (`{"dataset_type", "dataset_name",
    "dataset_version", "data": [{"question_id", "image_id", "question",
    "answers": [10 str], ...}]}`), or, for a path ending in ".npy", an mmf
    imdb (an object array: element 0 a header dict without "question_id",
    then one dict per question with the same keys). Any number of answers
    >= 1 is accepted (ST-VQA imdbs have one or two); see `textvqa_accuracy`
    for what fewer than 10 means. In a file where most questions have 10
    (TextVQA), one with another count is an error.

    Args:
        path: the file.

    Returns:
        A list of `{"question_id": int, "answers": [str], "image_id": str or
        int, "question": str}` in file order.

    Raises:
        FileNotFoundError: if the file is missing.
        ValueError: naming the file and the entry index ("data[3]",
            "imdb[3]", counting the header as imdb[0]) and the question id
            when it has one, for a malformed entry (not a dict, a question id
            that is not a non-negative int, a missing or mistyped
            "question", "image_id" or "answers", an empty answer list), a
            duplicated question id, an imdb whose header says
            has_answer=False, or a file that is not JSON / an imdb.
    """
    name = os.fspath(path)
    if name.endswith(".npy"):
        entries, list_name, first = _load_imdb(name), "imdb", 1
    else:
        data = load_json(name, "TextVQA annotations")
        entries, list_name, first = top_list(name, data, "data", "TextVQA annotations"), "data", 0
    records, seen = [], {}
    for index, entry in enumerate(entries, first):
        try:
            record = _parse_textvqa_entry(name, list_name, index, entry)
        except _Invalid as e:
            raise ValueError(str(e)) from None
        qid = record["question_id"]
        if qid in seen:
            raise ValueError(f"{name}, question id {qid} ({list_name}[{index}]): duplicate "
                             f"question id (also {list_name}[{seen[qid]}]).")
        seen[qid] = index
        records.append(record)
    _check_answer_counts(name, list_name, first, records)
    return records


def _check_answer_counts(name, list_name, first, records):
    """TextVQA's questions have 10 answers each: in a file where most do, a
    question with another count is a defect (VQA's reader refuses it too),
    not a question scored out of fewer annotators. (ST-VQA's one or two
    answers a question pass.)"""
    counts = collections.Counter(len(r["answers"]) for r in records)
    if not counts or counts.most_common(1)[0][0] != TEXTVQA_ANSWERS:
        return
    for index, record in enumerate(records, first):
        if len(record["answers"]) != TEXTVQA_ANSWERS:
            raise ValueError(
                f"{name}, question id {record['question_id']} ({list_name}[{index}]): "
                f"{len(record['answers'])} answers, where the file's questions have "
                f"{TEXTVQA_ANSWERS} ({counts[TEXTVQA_ANSWERS]} of {len(records)}).")


def read_textvqa_results(path, *, question_ids=None):
    """Reads a TextVQA results file: `[{"question_id": int, "answer": str}]`
    (mmf's prediction files add "image_id" and "pred_source", ignored).

    The format is the VQA one, so this is `read_vqa_results`
    (`keras_structattn.tasks.vqa.vqa`), with its checks and messages.

    Args:
        path: the JSON file.
        question_ids: None, or the question ids the results may name.

    Returns:
        A list of `{"question_id": int, "answer": str}` in file order.

    Raises:
        FileNotFoundError, ValueError: as `read_vqa_results` does.
    """
    return read_vqa_results(path, question_ids=question_ids)
