"""The official VQA accuracy (Antol et al., 2015, arXiv 1505.00468, Sec. 2;
Goyal et al., 2017, arXiv 1612.00837), quirk for quirk.

This reimplements `vqaEval.py` of GT-Vision-Lab/VQA (`PythonEvaluationTools/
vqaEvaluation`) in two versions:

- `"2021"` (the default; the repository HEAD, "Fixed processing answers bug",
  March 2021): newlines, tabs and outer spaces are removed from the prediction
  and from the 10 human answers; then, **only when the 10 answers are not all
  identical**, both go through `process_punctuation` and
  `process_digit_article`. So "Yes" scores 0 against ten "yes".
- `"pre2021"` (the parent commit, which most copies of `vqaEval.py` follow):
  the prediction always goes through both helpers; the human answers get
  only `process_punctuation`, and only when they are not all identical.

A question scores the mean, over its 10 human answers left out in turn, of
min(1, #matches among the other 9 / 3); percentages are rounded to 2 digits
as upstream does. `normalization="corrected"` (never the default) lower-cases
and normalises both sides always. Every quirk, with examples and scores, is
in `docs/vqa_metrics.md`.

`prepare_answer` is MCAN's `prep_ans` (Yu et al., 2019, arXiv 1906.10770),
used to build answer vocabularies and soft training targets, not by the
metric.
"""

import dataclasses
import os
import re
from collections.abc import Mapping

from keras_structattn.data.json_files import _field
from keras_structattn.data.json_files import _Invalid
from keras_structattn.data.json_files import _record_id
from keras_structattn.data.json_files import load_json
from keras_structattn.data.json_files import write_json

VERSIONS = ("2021", "pre2021")
NORMALIZATIONS = ("official", "corrected")

# Upstream's map, key for key, including its oddities: keys with capitals
# ("Im", "Ive", "Id've") never match because `process_digit_article`
# lower-cases first, and "somebody'd" maps to "somebodyd" (the wrong way).
CONTRACTIONS = {
    "aint": "ain't", "arent": "aren't", "cant": "can't", "couldve": "could've",
    "couldnt": "couldn't", "couldn'tve": "couldn't've", "couldnt've": "couldn't've",
    "didnt": "didn't", "doesnt": "doesn't", "dont": "don't", "hadnt": "hadn't",
    "hadnt've": "hadn't've", "hadn'tve": "hadn't've", "hasnt": "hasn't",
    "havent": "haven't", "hed": "he'd", "hed've": "he'd've", "he'dve": "he'd've",
    "hes": "he's", "howd": "how'd", "howll": "how'll", "hows": "how's",
    "Id've": "I'd've", "I'dve": "I'd've", "Im": "I'm", "Ive": "I've", "isnt": "isn't",
    "itd": "it'd", "itd've": "it'd've", "it'dve": "it'd've", "itll": "it'll",
    "let's": "let's", "maam": "ma'am", "mightnt": "mightn't", "mightnt've": "mightn't've",
    "mightn'tve": "mightn't've", "mightve": "might've", "mustnt": "mustn't",
    "mustve": "must've", "neednt": "needn't", "notve": "not've", "oclock": "o'clock",
    "oughtnt": "oughtn't", "ow's'at": "'ow's'at", "'ows'at": "'ow's'at",
    "'ow'sat": "'ow's'at", "shant": "shan't", "shed've": "she'd've",
    "she'dve": "she'd've", "she's": "she's", "shouldve": "should've",
    "shouldnt": "shouldn't", "shouldnt've": "shouldn't've",
    "shouldn'tve": "shouldn't've", "somebody'd": "somebodyd",
    "somebodyd've": "somebody'd've", "somebody'dve": "somebody'd've",
    "somebodyll": "somebody'll", "somebodys": "somebody's", "someoned": "someone'd",
    "someoned've": "someone'd've", "someone'dve": "someone'd've",
    "someonell": "someone'll", "someones": "someone's", "somethingd": "something'd",
    "somethingd've": "something'd've", "something'dve": "something'd've",
    "somethingll": "something'll", "thats": "that's", "thered": "there'd",
    "thered've": "there'd've", "there'dve": "there'd've", "therere": "there're",
    "theres": "there's", "theyd": "they'd", "theyd've": "they'd've",
    "they'dve": "they'd've", "theyll": "they'll", "theyre": "they're",
    "theyve": "they've", "twas": "'twas", "wasnt": "wasn't", "wed've": "we'd've",
    "we'dve": "we'd've", "weve": "we've", "werent": "weren't", "whatll": "what'll",
    "whatre": "what're", "whats": "what's", "whatve": "what've", "whens": "when's",
    "whered": "where'd", "wheres": "where's", "whereve": "where've", "whod": "who'd",
    "whod've": "who'd've", "who'dve": "who'd've", "wholl": "who'll", "whos": "who's",
    "whove": "who've", "whyll": "why'll", "whyre": "why're", "whys": "why's",
    "wont": "won't", "wouldve": "would've", "wouldnt": "wouldn't",
    "wouldnt've": "wouldn't've", "wouldn'tve": "wouldn't've", "yall": "y'all",
    "yall'll": "y'all'll", "y'allll": "y'all'll", "yall'd've": "y'all'd've",
    "y'alld've": "y'all'd've", "y'all'dve": "y'all'd've", "youd": "you'd",
    "youd've": "you'd've", "you'dve": "you'd've", "youll": "you'll",
    "youre": "you're", "youve": "you've",
}
NUMBER_WORDS = {
    "none": "0", "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4",
    "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10",
}
ARTICLES = ("a", "an", "the")
# Characters `process_punctuation` handles; note that "'", ":", "." (handled
# by `_PERIOD`), "*", "#", "$", "%", "&" and others are not in the list.
PUNCTUATION = (";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-",
               ">", "<", "@", "`", ",", "?", "!")
# Upstream's pattern, verbatim: "(?!<=\d)" is a negative look-AHEAD for the
# text "<=" and a digit (a look-behind would be "(?<!\d)"); it can never fail
# before a ".", so the rule is "delete every '.' not followed by a digit".
_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")
_DIGIT_COMMA_DIGIT = re.compile(r"(\d)(\,)(\d)")
# Upstream calls `periodStrip.sub("", text, re.UNICODE)`: the third positional
# argument of `sub` is `count`, and re.UNICODE == 32, so only the first 32
# periods are deleted.
_PERIOD_COUNT = int(re.UNICODE)


def process_punctuation(text):
    """Upstream `VQAEval.processPunctuation`, exactly.

    For each character of `PUNCTUATION`: if the input has it next to a
    space (`p + " "` or `" " + p`), or the input has a digit-comma-digit
    anywhere, every occurrence is deleted; otherwise every occurrence
    becomes a space. The tests look at the *input*, not at the text as it is
    being rewritten. Then the first 32 periods not followed by a digit are
    deleted. No lower-casing, no whitespace collapsing.

    Args:
        text: a string.

    Returns:
        The processed string.
    """
    delete_all = _DIGIT_COMMA_DIGIT.search(text) is not None
    out = text
    for p in PUNCTUATION:
        if delete_all or p + " " in text or " " + p in text:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    return _PERIOD.sub("", out, count=_PERIOD_COUNT)


def process_digit_article(text):
    """Upstream `VQAEval.processDigitArticle`, exactly.

    Lower-cases, splits on whitespace, maps the number words "none", "zero"
    ... "ten" to digits, drops the words "a", "an", "the", then replaces
    whole words found in `CONTRACTIONS` ("dont" -> "don't"), and joins with
    single spaces.

    Args:
        text: a string.

    Returns:
        The processed string (possibly empty: "the" -> "").
    """
    words = [NUMBER_WORDS.get(w, w) for w in text.lower().split()]
    words = [w for w in words if w not in ARTICLES]
    return " ".join(CONTRACTIONS.get(w, w) for w in words)


def _clean(text):
    # Upstream's first step on predictions (both versions) and on human
    # answers (2021 only).
    return text.replace("\n", " ").replace("\t", " ").strip()


def prepare_answer(text):
    """MCAN's `prep_ans` (MILVLG/mcan-vqa `core/data/ans_punct.py`) for
    answer vocabularies and soft scores (training targets).

    Lower-case, newlines and tabs to spaces, strip, then `process_punctuation`
    and `process_digit_article` (and a final comma removal, a no-op after
    `process_punctuation` but kept as in MCAN). It is applied to every answer
    with no all-identical exception, like `normalization="corrected"`.

    Args:
        text: an answer string.

    Returns:
        The normalised answer, e.g. "Two dogs." -> "2 dogs".
    """
    text = _clean(text.lower())
    return process_digit_article(process_punctuation(text)).replace(",", "")


def _normalise(prediction, answers, version, normalization):
    """(prediction, answers) as upstream compares them."""
    if normalization == "corrected":
        return prepare_answer(prediction), [prepare_answer(a) for a in answers]
    prediction = _clean(prediction)
    if version == "2021":
        answers = [_clean(a) for a in answers]
        if len(set(answers)) > 1:
            answers = [process_digit_article(process_punctuation(a)) for a in answers]
            prediction = process_digit_article(process_punctuation(prediction))
        return prediction, answers
    # pre2021: raw human answers decide the all-identical exception.
    prediction = process_digit_article(process_punctuation(prediction))
    if len(set(answers)) > 1:
        answers = [process_punctuation(a) for a in answers]
    return prediction, list(answers)


def _leave_one_out(prediction, answers, records=None):
    """Mean over the answers left out in turn of min(1, #matches / 3).

    Upstream leaves out every answer record *equal* to the one left out
    (`item != gtAnsDatum` on whole dicts), which is one record when the
    `answer_id`s differ, as in VQA; `records` (dicts with the normalised
    answer) reproduces that. Without `records`, each answer is its own.
    """
    matches = sum(1 for a in answers if a == prediction)
    left_out = _equal_counts(records) if records is not None else [1] * len(answers)
    # Records equal to the one left out have its answer: they are matches to
    # take away only when that answer is the prediction.
    accuracies = [min(1, float(matches - (n if a == prediction else 0)) / 3)
                  for a, n in zip(answers, left_out)]
    # Upstream's order of operations, for bit-identical sums.
    return float(sum(accuracies)) / len(accuracies)


def _equal_counts(records):
    """For each record, how many records (itself included) equal it."""
    try:
        keys = [frozenset(r.items()) for r in records]
    except TypeError:  # unhashable values: compare the dicts pairwise
        return [sum(1 for other in records if other == r) for r in records]
    counts = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return [counts[key] for key in keys]


def _check_mode(version, normalization):
    if version not in VERSIONS:
        raise ValueError(f"`version` must be one of {VERSIONS}; received: version={version!r}")
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"`normalization` must be one of {NORMALIZATIONS}; received: "
                         f"normalization={normalization!r}")


def vqa_accuracy(prediction, gt_answers, *, version="2021", normalization="official"):
    """The VQA accuracy of one prediction, in [0, 1] (not rounded).

    Args:
        prediction: the predicted answer string.
        gt_answers: the human answer strings (10 in VQA).
        version: "2021" (default) or "pre2021", see the module docstring.
        normalization: "official" (default, upstream's quirks) or
            "corrected" (both sides always normalised, lower-cased).

    Returns:
        A float: the mean over `gt_answers` left out in turn of
        min(1, #matches among the others / 3).
    """
    _check_mode(version, normalization)
    gt_answers = list(gt_answers)
    if not gt_answers:
        raise ValueError("`gt_answers` is empty; a question needs at least one human answer.")
    prediction, answers = _normalise(prediction, gt_answers, version, normalization)
    return _leave_one_out(prediction, answers)


@dataclasses.dataclass(frozen=True)
class VQAScores:
    """The result of `evaluate_vqa`. Rounded values are percentages rounded
    to 2 digits as upstream's `setAccuracy` / `setEvalQA` do; the `*_exact`
    ones are the same percentages unrounded.

    Attributes:
        overall: accuracy over all questions.
        per_answer_type: `{answer_type: accuracy}`.
        per_question_type: `{question_type: accuracy}`.
        per_question: `{question_id: accuracy}`.
        overall_exact, per_answer_type_exact, per_question_type_exact,
            per_question_exact: unrounded percentages.
        answer_type_counts, question_type_counts: questions per type.
        version, normalization: how it was computed.
    """

    overall: float
    per_answer_type: dict
    per_question_type: dict
    per_question: dict
    overall_exact: float
    per_answer_type_exact: dict
    per_question_type_exact: dict
    per_question_exact: dict
    answer_type_counts: dict
    question_type_counts: dict
    version: str = "2021"
    normalization: str = "official"

    def to_official(self):
        """The dict upstream's `VQAEval.accuracy` holds: `overall`,
        `perAnswerType`, `perQuestionType` and `perQuestion` (int keys)."""
        return {"overall": self.overall, "perAnswerType": dict(self.per_answer_type),
                "perQuestionType": dict(self.per_question_type),
                "perQuestion": dict(self.per_question)}


def write_vqa_scores_json(scores, path):
    """Writes `scores.to_official()` to `path` atomically (a temporary file in
    the same folder, then `os.replace`), keys sorted, indented."""
    write_json(scores.to_official(), path)


def read_vqa_results(path, *, question_ids=None):
    """Reads a VQA results file: `[{"question_id": int, "answer": str}]`.

    Other keys are ignored.

    Args:
        path: the JSON file.
        question_ids: None, or the question ids the results may name (a
            collection of ints, e.g. `{r.question_id for r in records}`;
            keyword-only). Missing ids are not an error here.

    Returns:
        A list of `{"question_id": int, "answer": str}` in file order.

    Raises:
        FileNotFoundError: if the file is missing.
        ValueError: naming the file and the index or question id, for
            invalid JSON, a top level that is not a list, a missing key, an
            id that is not a non-negative int, a non-string answer, a
            duplicate id, or an id outside `question_ids`.
    """
    allowed = None if question_ids is None else set(question_ids)
    name = os.fspath(path)
    data = load_json(name, "VQA results")
    if not isinstance(data, list):
        raise ValueError(
            f"{name}: expected a JSON list of {{question_id, answer}} objects; "
            f"found a JSON {type(data).__name__}."
        )
    results, seen = [], {}
    for index, entry in enumerate(data):
        try:
            qid, where = _record_id(name, "results", index, entry)
            answer = _field(where, entry, "answer", str)
        except _Invalid as e:
            raise ValueError(str(e)) from None
        if qid in seen:
            raise ValueError(f"{where}: duplicate question id (also results[{seen[qid]}]).")
        if allowed is not None and qid not in allowed:
            raise ValueError(f"{where}: the question id is not one of the given question_ids.")
        seen[qid] = index
        results.append({"question_id": qid, "answer": answer})
    return results


def _listed(data, key, what):
    """A list of records from a list, or from a file dict holding `key`."""
    if isinstance(data, Mapping) and key in data:
        data = data[key]
    if not isinstance(data, (list, tuple)):
        raise ValueError(f"`{what}` must be a list of dicts (or a dict with a {key!r} list); "
                         f"received {type(data).__name__}.")
    for i, record in enumerate(data):
        if not isinstance(record, Mapping) or "question_id" not in record:
            raise ValueError(f"`{what}`[{i}] must be a dict with a 'question_id'; "
                             f"received {record!r:.100}.")
    return data


def _indexed(records, what):
    """{question_id: record}, refusing duplicated ids."""
    index = {}
    for record in records:
        qid = record["question_id"]
        if qid in index:
            raise ValueError(f"`{what}`: question id {qid!r} appears more than once.")
        index[qid] = record
    return index


def _predictions(results):
    """{question_id: answer} from the official list or a {qid: answer} dict."""
    if isinstance(results, Mapping) and "annotations" not in results:
        # JSON turns int ids into strings; take them back.
        return {int(k) if isinstance(k, str) and k.isdigit() else k: v
                for k, v in results.items()}
    index = _indexed(_listed(results, "annotations", "results"), "results")
    for qid, record in index.items():
        if "answer" not in record:
            raise ValueError(f"`results`: question id {qid!r} has no 'answer'.")
    return {qid: record["answer"] for qid, record in index.items()}


def _same_ids(have, want, have_name, want_name):
    """Upstream asserts that the result ids are exactly the annotation ids."""
    missing = [q for q in want if q not in have]
    extra = [q for q in have if q not in want]
    if missing:
        raise ValueError(f"`{have_name}` lack {len(missing)} question id(s) of `{want_name}`, "
                         f"e.g. question id {missing[0]!r}.")
    if extra:
        raise ValueError(f"`{have_name}` have {len(extra)} question id(s) not in "
                         f"`{want_name}`, e.g. question id {extra[0]!r}.")


def _mean_percent(values):
    # Upstream: round(100*float(sum(acc))/len(acc), n), evaluated left to right.
    return 100 * float(sum(values)) / len(values)


def evaluate_vqa(annotations, results, *, questions=None, version="2021",
                 normalization="official"):
    """Scores VQA results as upstream `VQAEval.evaluate()` does.

    Args:
        annotations: VQA annotation records (`question_id`, `question_type`,
            `answer_type`, `answers`: a list of `{"answer", ...}`), as a list
            or as the annotation file's dict. Not modified (upstream
            normalises them in place).
        results: the official results list `[{"question_id", "answer"}]`,
            or a dict `{question_id: answer}` (string keys of digits are
            taken as ints, as JSON writes them).
        questions: optional question records (or the question file's
            dict); only their ids are checked against `annotations`.
        version: "2021" (default) or "pre2021", see `docs/vqa_metrics.md`.
        normalization: "official" (default) or "corrected" (both sides
            always lower-cased and normalised; `version` then changes
            nothing).

    Returns:
        A `VQAScores`; its types are in the order of `annotations`.

    Raises:
        ValueError: when the result ids are not exactly the annotation ids
            (naming a missing or extra id and how many), on a duplicated id,
            or on a malformed record.
    """
    _check_mode(version, normalization)
    records = _listed(annotations, "annotations", "annotations")
    if not records:
        raise ValueError("`annotations` is empty: no question to score.")
    gts = _indexed(records, "annotations")
    if questions is not None:
        asked = _indexed(_listed(questions, "questions", "questions"), "questions")
        _same_ids(asked, gts, "questions", "annotations")
    predictions = _predictions(results)
    _same_ids(predictions, gts, "results", "annotations")

    per_question_exact = {}
    by_answer_type = {}
    by_question_type = {}
    accuracies = []
    for qid, record in gts.items():
        for key in ("question_type", "answer_type", "answers"):
            if key not in record:
                raise ValueError(f"`annotations`: question id {qid!r} has no {key!r}.")
        answer_dicts = record["answers"]
        if not answer_dicts:
            raise ValueError(f"`annotations`: question id {qid!r} has no answers.")
        prediction = predictions[qid]
        if not isinstance(prediction, str):
            raise ValueError(f"`results`: the answer of question id {qid!r} must be a string; "
                             f"received {prediction!r:.100}.")
        prediction, answers = _normalise(prediction, [a["answer"] for a in answer_dicts],
                                         version, normalization)
        if normalization == "official":
            # Whole normalised records, for upstream's record-equality
            # leave-one-out.
            same = [dict(d, answer=a) for d, a in zip(answer_dicts, answers)]
            accuracy = _leave_one_out(prediction, answers, same)
        else:
            accuracy = _leave_one_out(prediction, answers)
        accuracies.append(accuracy)
        per_question_exact[qid] = 100 * accuracy
        by_answer_type.setdefault(record["answer_type"], []).append(accuracy)
        by_question_type.setdefault(record["question_type"], []).append(accuracy)

    answer_types = {k: _mean_percent(v) for k, v in by_answer_type.items()}
    question_types = {k: _mean_percent(v) for k, v in by_question_type.items()}
    overall = _mean_percent(accuracies)
    return VQAScores(
        overall=round(overall, 2),
        per_answer_type={k: round(v, 2) for k, v in answer_types.items()},
        per_question_type={k: round(v, 2) for k, v in question_types.items()},
        per_question={k: round(v, 2) for k, v in per_question_exact.items()},
        overall_exact=overall,
        per_answer_type_exact=answer_types,
        per_question_type_exact=question_types,
        per_question_exact=per_question_exact,
        answer_type_counts={k: len(v) for k, v in by_answer_type.items()},
        question_type_counts={k: len(v) for k, v in by_question_type.items()},
        version=version,
        normalization=normalization,
    )
