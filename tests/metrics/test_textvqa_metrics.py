"""TextVQA accuracy and ANLS: hand-computed cases, brute-force references
(mmf's leave-one-out loop, a recursive Levenshtein distance), the two ANLS
threshold rules, id errors, and the readers' messages on malformed files."""

import functools
import json
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_structattn.metrics import TextVQAScores
from keras_structattn.metrics import anls
from keras_structattn.metrics import evaluate_textvqa
from keras_structattn.metrics import levenshtein
from keras_structattn.metrics import normalize_evalai_answer
from keras_structattn.metrics import read_textvqa_annotations
from keras_structattn.metrics import read_textvqa_results
from keras_structattn.metrics import textvqa_accuracy
from keras_structattn.metrics import write_textvqa_scores_json

# --- TextVQA accuracy -------------------------------------------------------

@pytest.mark.parametrize("matches, expected",
                         [(0, 0.0), (1, 0.3), (2, 0.6), (3, 0.9), (4, 1.0), (10, 1.0)])
def test_accuracy_ladder(matches, expected):
    # m of 10 match: (m·min(1, (m-1)/3) + (10-m)·min(1, m/3)) / 10, by hand.
    answers = ["cafe"] * matches + ["bar"] * (10 - matches)
    assert textvqa_accuracy("cafe", answers) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("text, expected", [
    ("Two", "2"),
    ("the cafe", "cafe"),
    ("The Cafe.", "cafe"),
    ("  CAFE\n", "cafe"),
    ("coca-cola", "coca cola"),  # "-" not next to a space: a space
    ("coca - cola", "coca cola"),  # next to a space: deleted, words re-joined
    ("1,000", "1000"),  # commas are deleted first (EvalAI), not a VQA rule
    ("what's up?", "what 's up"),  # "'s" split off, "?" deleted
    ("why?not", "whynot"),  # "?" and "," deleted outright (VQA: "why not")
    ("x,y", "xy"),
    ("3.5", "3.5"),  # a period before a digit stays
    ("dont", "don't"),
])
def test_evalai_normalisation(text, expected):
    assert normalize_evalai_answer(text) == expected


def test_normalisation_in_accuracy():
    # Four answers each differ from the prediction only in number words,
    # articles, punctuation or case: all match.
    answers = ["2", "two", "Two.", "the two"] + ["3"] * 6
    assert textvqa_accuracy("TWO", answers) == 1.0
    assert textvqa_accuracy("a cafe!", ["Cafe"] * 3 + ["x"] * 7) == pytest.approx(0.9)
    # No all-identical exception (VQA 2021 scores this 0).
    assert textvqa_accuracy("Yes", ["yes"] * 10) == 1.0


def _mmf_leave_one_out(prediction, answers):
    # mmf's `_compute_answer_scores` loop, written out: each (index, answer)
    # pair left out in turn, matches counted among the others.
    pairs = list(enumerate(answers))
    accs = []
    for left_out in pairs:
        others = [p for p in pairs if p != left_out]
        accs.append(min(1, len([p for p in others if p[1] == prediction]) / 3))
    return sum(accs) / len(accs)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["b", "c", "bc", "The C", "C."]), min_size=10, max_size=10),
       st.sampled_from(["b", "c", "the c", "x"]))
def test_accuracy_matches_mmf_loop(answers, prediction):
    normalised = [normalize_evalai_answer(a) for a in answers]
    expected = _mmf_leave_one_out(normalize_evalai_answer(prediction), normalised)
    assert textvqa_accuracy(prediction, answers) == expected


@pytest.mark.parametrize("answers, expected", [
    (["cafe"], 0.0),  # the only answer is always the one left out
    (["cafe"] * 3, 2 / 3),  # each left out: 2 matches of 3 needed
    (["cafe", "x", "y", "z"], 0.25),  # (0 + 3 * 1/3) / 4
    (["cafe"] * 4 + ["x"] * 16, 1.0),
])
def test_accuracy_other_answer_counts(answers, expected):
    assert textvqa_accuracy("cafe", answers) == pytest.approx(expected)


@pytest.mark.parametrize("prediction, answers, match", [
    ("x", [], "empty"), ("x", "cafe", "list"), (3, ["x"], "prediction"),
    ("x", ["a", None], r"answers`\[1\]"),
])
def test_accuracy_errors(prediction, answers, match):
    with pytest.raises(ValueError, match=match):
        textvqa_accuracy(prediction, answers)


# --- Levenshtein and ANLS ---------------------------------------------------

@functools.lru_cache(maxsize=None)
def _recursive_levenshtein(a, b):
    # The textbook recursion, exponential without the cache.
    if not a or not b:
        return len(a) + len(b)
    return min(_recursive_levenshtein(a[1:], b) + 1,
               _recursive_levenshtein(a, b[1:]) + 1,
               _recursive_levenshtein(a[1:], b[1:]) + (a[0] != b[0]))


_SHORT = st.text(alphabet="abcé", max_size=7)


@settings(max_examples=150, deadline=None)
@given(_SHORT, _SHORT)
def test_levenshtein_matches_recursion(a, b):
    assert levenshtein(a, b) == _recursive_levenshtein(a, b)


@settings(max_examples=60, deadline=None)
@given(_SHORT, st.lists(_SHORT, min_size=1, max_size=3))
def test_anls_matches_definition(prediction, answers):
    # Biten et al. 2019, Eq. 1, from the recursive distance.
    def normalized(text):
        # Lower-cased and stripped, but space-sensitive: whitespace alone stays.
        return text.lower().strip() or text.lower()

    def score(a):
        p, a = normalized(prediction), normalized(a)
        if not p and not a:
            return 1.0
        nl = _recursive_levenshtein(p, a) / max(len(p), len(a))
        return 1 - nl if nl < 0.5 else 0.0
    assert anls(prediction, answers) == max(score(a) for a in answers)


@pytest.mark.parametrize("prediction, answers, st_vqa, mmf", [
    ("Coca", ["coca"], 1.0, 1.0),  # exact after lower-casing
    (" coca ", ["COCA"], 1.0, 1.0),  # and stripping
    ("coca", ["cola"], 0.75, 0.75),  # one edit in a 4-letter word
    ("ab", ["ac"], 0.0, 0.5),  # NL exactly 0.5: the two rules differ
    ("abcdef", ["abcxyz"], 0.0, 0.5),
    ("abcde", ["abxyz"], 0.0, 0.0),  # NL 0.6
    ("", ["coca"], 0.0, 0.0),  # empty prediction: NL 1
    ("coca", [""], 0.0, 0.0),  # empty answer
    ("", ["", "coca"], 1.0, None),  # both empty: 1 (mmf divides by zero)
    # Whitespace alone is not stripped in "st_vqa" mode (space-sensitive;
    # mmf strips it, and divides by zero).
    ("  ", ["\n"], 0.0, None),  # NL 1
    (" ", ["  "], 0.0, None),  # NL exactly 0.5: 0, not 1
    ("   ", ["    "], 0.75, None),  # NL 0.25
    (" ", [" "], 1.0, None),  # the same string
    (" ", [""], 0.0, None),  # a space is not the empty answer
    ("coca", ["xyzw", "cola", "coke"], 0.75, 0.75),  # the best answer
    ("coca", ["coca", "cola"], 1.0, 1.0),
])
def test_anls_cases(prediction, answers, st_vqa, mmf):
    assert anls(prediction, answers) == st_vqa
    if mmf is None:
        with pytest.raises(ValueError, match="both empty"):
            anls(prediction, answers, mode="mmf")
    else:
        assert anls(prediction, answers, mode="mmf") == mmf


def test_anls_threshold_and_errors():
    assert anls("abcde", ["abxyz"], threshold=0.7) == pytest.approx(0.4)
    for kwargs in ({"mode": "strict"}, {"threshold": 0}, {"threshold": 1.5},
                   {"threshold": True}):
        with pytest.raises(ValueError, match="mode|threshold"):
            anls("a", ["b"], **kwargs)


# --- evaluate_textvqa ---------------------------------------------------------

ANNOTATIONS = [
    {"question_id": 1, "answers": ["coca cola"] * 10},
    {"question_id": 2, "answers": ["cafe"] * 2 + ["bar"] * 8},
    {"question_id": 3, "answers": ["stop"] * 10},
]
RESULTS = [
    {"question_id": 3, "answer": "stip"},  # accuracy 0, ANLS 0.75
    {"question_id": 1, "answer": "Coca-Cola"},  # normalised "coca cola": 1; ANLS 8/9
    {"question_id": 2, "answer": "cafe"},  # accuracy 0.6, ANLS 1
]


def test_evaluate_means_and_json(tmp_path):
    scores = evaluate_textvqa(iter(ANNOTATIONS), RESULTS)
    assert isinstance(scores, TextVQAScores) and scores.count == 3
    assert list(scores.per_question) == [1, 2, 3]  # annotation order
    assert scores.per_question[1] == {"accuracy": 1.0, "anls": pytest.approx(8 / 9)}
    assert scores.per_question[2]["accuracy"] == pytest.approx(0.6)
    assert scores.per_question[3] == {"accuracy": 0.0, "anls": 0.75}
    assert scores.accuracy == pytest.approx(1.6 / 3)
    assert scores.anls == pytest.approx((8 / 9 + 1 + 0.75) / 3)
    # A {question_id: answer} dict with JSON's string keys scores the same.
    as_dict = {str(r["question_id"]): r["answer"] for r in RESULTS}
    assert evaluate_textvqa(ANNOTATIONS, as_dict) == scores

    path = tmp_path / "scores.json"
    write_textvqa_scores_json(scores, path)
    assert os.listdir(tmp_path) == ["scores.json"]  # no temporary file left
    with open(path, encoding="utf-8") as f:
        written = json.load(f)
    assert written == json.loads(json.dumps(scores.to_json()))
    assert set(written) == {"accuracy", "anls", "per_question"}
    assert set(written["per_question"]) == {"1", "2", "3"}


def test_evaluate_mmf_mode():
    annotations = ANNOTATIONS + [{"question_id": 4, "answers": ["ab"] * 10}]
    results = RESULTS + [{"question_id": 4, "answer": "ac"}]
    st_vqa = evaluate_textvqa(annotations, results)
    mmf = evaluate_textvqa(annotations, results, anls_mode="mmf")
    assert st_vqa.per_question[4]["anls"] == 0.0 and mmf.per_question[4]["anls"] == 0.5
    assert mmf.accuracy == st_vqa.accuracy and mmf.anls_mode == "mmf"
    empty = [{"question_id": 5, "answers": [""] * 10}]
    assert evaluate_textvqa(empty, {5: ""}).anls == 1.0
    with pytest.raises(ValueError, match="question id 5: .*both empty"):
        evaluate_textvqa(empty, {5: ""}, anls_mode="mmf")


@pytest.mark.parametrize("annotations, results, match", [
    (ANNOTATIONS, RESULTS[:2], "lack 1 question id.*question id 2"),
    (ANNOTATIONS, RESULTS + [{"question_id": 9, "answer": "x"}], "not in.*question id 9"),
    (ANNOTATIONS, RESULTS + [RESULTS[0]], "results.*question id 3.*more than once"),
    (ANNOTATIONS + [ANNOTATIONS[0]], RESULTS, "annotations.*question id 1.*more than once"),
    ([], [], "empty"),
    ([{"question_id": 1}], {1: "x"}, "question id 1 has no 'answers'"),
    ([{"question_id": 1, "answers": []}], {1: "x"}, "question id 1: .*empty"),
    ([{"question_id": 1, "answers": ["x"]}], {1: 7}, "question id 1: .*prediction"),
])
def test_evaluate_errors(annotations, results, match):
    with pytest.raises(ValueError, match=match):
        evaluate_textvqa(annotations, results)


def test_evaluate_rejects_unknown_mode():
    with pytest.raises(ValueError, match="mode"):
        evaluate_textvqa(ANNOTATIONS, RESULTS, anls_mode="docvqa")


# --- readers ------------------------------------------------------------------

def _entry(qid, answers=("stop",) * 10):
    return {"question_id": qid, "image_id": "0054c91397f2fe05", "question": "what is it?",
            "answers": list(answers), "image_classes": ["sign"], "flickr_300k_url": "u"}


def _write_json(tmp_path, data, name="TextVQA_0.5.1_val.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _textvqa_file(entries):
    return {"dataset_type": "val", "dataset_name": "textvqa", "dataset_version": "0.5.1",
            "data": entries}


def test_read_official_json_and_evaluate(tmp_path):
    path = _write_json(tmp_path, _textvqa_file([_entry(7), _entry(8, ["go"] * 10)]))
    records = read_textvqa_annotations(path)
    assert records == [
        {"question_id": 7, "answers": ["stop"] * 10, "image_id": "0054c91397f2fe05",
         "question": "what is it?"},
        {"question_id": 8, "answers": ["go"] * 10, "image_id": "0054c91397f2fe05",
         "question": "what is it?"},
    ]
    results_path = _write_json(tmp_path, [{"question_id": 8, "answer": "Go", "image_id": "i"},
                                          {"question_id": 7, "answer": "stop"}], "res.json")
    scores = evaluate_textvqa(records, read_textvqa_results(results_path))
    assert (scores.accuracy, scores.anls) == (1.0, 1.0)


@pytest.mark.parametrize("entries, match", [
    ([_entry(7), "oops"], r"data\[1\]: expected a JSON object"),
    ([_entry(7), dict(_entry(8), question_id="8")], r"data\[1\]: 'question_id' must be"),
    ([_entry(7), {k: v for k, v in _entry(8).items() if k != "answers"}],
     r"question id 8 \(data\[1\]\): missing key 'answers'"),
    ([_entry(7, [])], r"question id 7 \(data\[0\]\): .*empty"),
    ([_entry(7, ["a", 3])], r"question id 7 \(data\[0\]\): .*answers`\[1\]"),
    ([dict(_entry(7), image_id=None)], r"question id 7 \(data\[0\]\): 'image_id'"),
    ([_entry(7), _entry(7)], r"question id 7 \(data\[1\]\): duplicate .*data\[0\]"),
])
def test_read_json_malformed(tmp_path, entries, match):
    path = _write_json(tmp_path, _textvqa_file(entries))
    with pytest.raises(ValueError, match=match) as info:
        read_textvqa_annotations(path)
    assert path in str(info.value)


def _write_imdb(tmp_path, items):
    path = tmp_path / "imdb_val.npy"
    array = np.empty(len(items), dtype=object)
    array[:] = items
    np.save(path, array, allow_pickle=True)
    return str(path)


HEADER = {"version": 1, "dataset_name": "textvqa", "dataset_type": "val", "has_answer": True}


def test_read_imdb(tmp_path):
    second = dict(_entry(0), question_id=np.int64(12), image_id=np.int64(3),
                  answers=np.array(["go"] * 10))
    records = read_textvqa_annotations(_write_imdb(tmp_path, [HEADER, _entry(11), second]))
    assert [r["question_id"] for r in records] == [11, 12]
    assert type(records[1]["question_id"]) is int and records[1]["image_id"] == 3
    assert records[1]["answers"] == ["go"] * 10
    assert all(type(a) is str for a in records[1]["answers"])


@pytest.mark.parametrize("items, match", [
    ([HEADER, _entry(1), {k: v for k, v in _entry(2).items() if k != "answers"}],
     r"question id 2 \(imdb\[2\]\): missing key 'answers'"),
    ([HEADER, _entry(1), ["not", "a", "dict"]], r"imdb\[2\]: expected"),
    ([HEADER, _entry(1), _entry(1)], r"question id 1 \(imdb\[2\]\): duplicate .*imdb\[1\]"),
    ([_entry(1), _entry(2)], r"imdb\[0\]: expected the header"),
    ([dict(HEADER, has_answer=False), _entry(1)], "has_answer=False"),
])
def test_read_imdb_malformed(tmp_path, items, match):
    path = _write_imdb(tmp_path, items)
    with pytest.raises(ValueError, match=match) as info:
        read_textvqa_annotations(path)
    assert path in str(info.value)


def test_read_results_malformed(tmp_path):
    path = _write_json(tmp_path, [{"question_id": 1, "answer": "x"}, {"question_id": 2}],
                       "res.json")
    with pytest.raises(ValueError, match=r"results\[1\]\): missing key 'answer'") as info:
        read_textvqa_results(path)
    assert path in str(info.value)
