"""The official VQA accuracy: every number of the fixture computed by the
upstream `vqaEval.py` (two versions), the leave-one-out mean against a
brute-force loop, the `corrected` option, id errors, and MCAN's
`prep_ans` on cases worked out by hand from the reference rules."""

import json
import os

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_structattn.metrics import VQAScores
from keras_structattn.metrics import evaluate_vqa
from keras_structattn.metrics import prepare_answer
from keras_structattn.metrics import process_digit_article
from keras_structattn.metrics import process_punctuation
from keras_structattn.metrics import vqa_accuracy
from keras_structattn.metrics import write_vqa_scores_json

FIXTURES = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "vqa_eval")


def _load(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


ANNOTATIONS = _load("annotations.json")
QUESTIONS = _load("questions.json")
EXPECTED = _load("expected_accuracy.json")
ANSWERS = {a["question_id"]: [d["answer"] for d in a["answers"]]
           for a in ANNOTATIONS["annotations"]}


@pytest.mark.parametrize("version", ["2021", "pre2021"])
@pytest.mark.parametrize("result_set", "ABCD")
def test_fixture_matches_upstream_exactly(version, result_set):
    results = _load(f"results_{result_set}.json")
    scores = evaluate_vqa(ANNOTATIONS["annotations"], results, questions=QUESTIONS,
                          version=version)
    expected = EXPECTED[version][result_set]
    official = scores.to_official()
    assert official["overall"] == expected["overall"]
    assert official["perAnswerType"] == expected["perAnswerType"]
    assert official["perQuestionType"] == expected["perQuestionType"]
    assert {str(k): v for k, v in official["perQuestion"].items()} == expected["perQuestion"]
    # The dict form of results and the whole file dicts give the same.
    as_dict = {str(r["question_id"]): r["answer"] for r in results}
    assert evaluate_vqa(ANNOTATIONS, as_dict, version=version).to_official() == official
    assert abs(scores.overall_exact - scores.overall) <= 0.005


# (question id, prediction): (2021, pre2021), from the fixture README.
SPOT_VALUES = {
    (458752000, "net"): (100, 100), (458752000, "netting"): (30, 30),
    (458752000, "Net."): (100, 100), (458752000, "fence"): (0, 0),
    (458752001, "catcher"): (30, 30), (458752001, "the pitcher"): (100, 100),
    (458752001, "pitcher\n"): (100, 100),
    (458752002, "Orange"): (0, 100), (458752002, "orange."): (0, 100),
    (9000002, "Yes"): (0, 100), (9000002, "yes "): (100, 100),
    (9000003, "dont know"): (100, 90), (9000003, "don't know."): (100, 90),
    (9000005, "dog"): (100, 30), (9000005, "a dog"): (100, 30),
    (9000006, "red"): (60, 60), (9000001, "3"): (90, 90), (9000001, "two"): (100, 100),
}


@pytest.mark.parametrize("key", list(SPOT_VALUES), ids=repr)
def test_readme_spot_values(key):
    qid, prediction = key
    for version, expected in zip(("2021", "pre2021"), SPOT_VALUES[key]):
        got = vqa_accuracy(prediction, ANSWERS[qid], version=version)
        assert round(100 * got, 2) == expected, (version, got)


def _brute_force(prediction, answers):
    total = 0.0
    for i in range(len(answers)):
        matches = sum(a == prediction for j, a in enumerate(answers) if j != i)
        total += min(1.0, matches / 3.0)
    return total / len(answers)


# Already-normalised words: no capitals, punctuation, articles or numbers.
WORDS = st.sampled_from(["red", "blue", "cat", "yes"])


@settings(max_examples=60, deadline=None)
@given(st.lists(WORDS, min_size=10, max_size=10), WORDS, st.sampled_from(["2021", "pre2021"]))
def test_leave_one_out_against_brute_force(answers, prediction, version):
    expected = _brute_force(prediction, answers)
    assert vqa_accuracy(prediction, answers, version=version) == pytest.approx(expected, abs=1e-12)
    annotation = {"question_id": 1, "question_type": "what", "answer_type": "other",
                  "answers": [{"answer": a, "answer_id": i + 1} for i, a in enumerate(answers)]}
    scores = evaluate_vqa([annotation], [{"question_id": 1, "answer": prediction}],
                          version=version)
    assert scores.per_question_exact[1] == pytest.approx(100 * expected, abs=1e-9)
    assert scores.per_question[1] == round(100 * expected, 2)


def test_equal_answer_records_are_left_out_together():
    # Upstream drops every record equal to the one left out (dict `!=`), so
    # without answer_ids 4 identical "x" records vanish together: 6/10.
    answers = [{"answer": "x"}] * 4 + [{"answer": "y"}] * 6
    annotation = {"question_id": 7, "question_type": "what", "answer_type": "other",
                  "answers": answers}
    result = [{"question_id": 7, "answer": "x"}]
    assert evaluate_vqa([annotation], result).per_question[7] == 60.0
    assert evaluate_vqa([annotation], result, normalization="corrected").per_question[7] == 100.0
    # The same with unhashable extra fields (compared pairwise).
    annotation["answers"] = [dict(a, tags=["t"]) for a in answers]
    assert evaluate_vqa([annotation], result).per_question[7] == 60.0


def test_corrected_normalisation():
    ten_yes = ["yes"] * 10
    assert vqa_accuracy("Yes", ten_yes) == 0.0
    assert vqa_accuracy("Yes", ten_yes, normalization="corrected") == 1.0
    assert vqa_accuracy("Orange.", ["orange"] * 10, normalization="corrected") == 1.0
    # pre2021 never normalises "Two" among the human answers; corrected does.
    answers = ["Two"] * 5 + ["three"] * 5
    assert vqa_accuracy("2", answers, version="pre2021") == 0.0
    assert vqa_accuracy("2", answers, version="pre2021", normalization="corrected") == 1.0


def _one(qid):
    return {"question_id": qid, "question_type": "what", "answer_type": "other",
            "answers": [{"answer": "a", "answer_id": i} for i in range(10)]}


def test_id_mismatch_errors_name_the_id():
    annotations = [_one(11), _one(12), _one(13)]
    with pytest.raises(ValueError, match=r"lack 2 question id.*question id 12"):
        evaluate_vqa(annotations, [{"question_id": 11, "answer": "a"}])
    with pytest.raises(ValueError, match=r"1 question id.* not in .*question id 99"):
        evaluate_vqa(annotations, {11: "a", 12: "a", 13: "a", 99: "a"})
    with pytest.raises(ValueError, match=r"question id 11 appears more than once"):
        evaluate_vqa(annotations, [{"question_id": q, "answer": "a"} for q in (11, 11, 12, 13)])
    with pytest.raises(ValueError, match=r"`questions` lack 1 .*question id 13"):
        evaluate_vqa(annotations, {11: "a", 12: "a", 13: "a"},
                     questions=[{"question_id": 11}, {"question_id": 12}])
    with pytest.raises(ValueError, match="version"):
        vqa_accuracy("a", ["a"], version="2017")


def test_write_vqa_scores_json(tmp_path):
    scores = evaluate_vqa(ANNOTATIONS, _load("results_D.json"))
    assert isinstance(scores, VQAScores)
    path = tmp_path / "scores.json"
    write_vqa_scores_json(scores, path)
    assert json.loads(path.read_text(encoding="utf-8")) == EXPECTED["2021"]["D"]
    assert os.listdir(tmp_path) == ["scores.json"]


# Worked out by hand from the rules of MCAN's `prep_ans` / upstream's
# helpers (the punctuation list, the period and digit-comma-digit patterns,
# the number-word map, the articles, the contraction map).
PREPARED = {
    "Two dogs.": "2 dogs",          # period not before a digit dropped; number word
    "a man's hat": "man's hat",     # "'" is not punctuation; article dropped
    "Dont know": "don't know",      # contraction, whole word, after lower-casing
    "Im": "im",                     # the map's key is "Im": never reached
    "somebody'd": "somebodyd",      # the map's backwards entry
    "1,000": "1000",                # digit,digit: punctuation deleted, not spaced
    "t-shirt": "t shirt",           # no space next to "-": becomes a space
    "left - right": "left right",   # space next to "-": deleted
    "red, white": "red white",
    "(a) b": "b",                   # "(" spaced, ")" deleted, then "a" is an article
    "3.5": "3.5",
    "12:30": "12:30",               # ":" is not in the list
    "yes!\n": "yes",
    "none": "0",
    "the": "",
}


@pytest.mark.parametrize("text", list(PREPARED), ids=repr)
def test_prepare_answer(text):
    assert prepare_answer(text) == PREPARED[text]


def test_official_helpers():
    # "(?!<=\d)" is a look-ahead, not a look-behind: "5.x" loses its period.
    assert process_punctuation("5.x") == "5x"
    assert process_punctuation("No.1") == "No.1"
    # Only the first 32 periods go (re.UNICODE passed as `count`).
    assert process_punctuation("." * 40 + "x") == "." * 8 + "x"
    # The tests look at the input: "a-b, c" has ", " so "," goes, "-" spaced.
    assert process_punctuation("a-b, c") == "a b c"
    assert process_punctuation("Hi!") == "Hi "
    assert process_digit_article("The  Two   cats") == "2 cats"
