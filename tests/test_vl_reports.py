"""The VQA, TextVQA and grounding report helpers of `keras_structattn.tasks`:
score tables, the bias-conflict split, the majority baseline, relation
names, box conversions and MCAN's soft accuracy."""

import numpy as np
import pytest

from keras_structattn.metrics import evaluate_vqa
from keras_structattn.metrics.textvqa import evaluate_textvqa
from keras_structattn.tasks.grounding import refcoco
from keras_structattn.tasks.grounding import report as grounding_report
from keras_structattn.tasks.textvqa import report as textvqa_report
from keras_structattn.tasks.textvqa.textvqa import TextVQARecord
from keras_structattn.tasks.vqa import report as vqa_report
from keras_structattn.tasks.vqa.vqa import VQARecord
from keras_structattn.training.losses import soft_accuracy


def vqa_records():
    return [VQARecord(1, 10, "what color?", ["what", "color"], "what color", "other",
                      ("red",) * 10, "red", bias_conflict=True),
            VQARecord(2, 10, "is it red?", ["is", "it", "red"], "is the", "yes/no",
                      ("yes",) * 10, "yes", bias_conflict=False),
            VQARecord(3, 11, "is it blue?", ["is", "it", "blue"], "is the", "yes/no",
                      ("no",) * 7 + ("yes",) * 3, "no", bias_conflict=False)]


def test_official_annotations():
    first = vqa_report.official_annotations(vqa_records())[0]
    assert first["question_id"] == 1 and first["multiple_choice_answer"] == "red"
    assert first["answers"][:2] == [{"answer": "red", "answer_id": 1},
                                    {"answer": "red", "answer_id": 2}]


def test_majority_answers_breaks_ties_alphabetically():
    per_type, overall = vqa_report.majority_answers(
        [("a", "x"), ("a", "y"), ("a", "y"), ("b", "z"), ("b", "w"), ("b", "x")])
    assert per_type == {"a": "y", "b": "w"} and overall == "x"
    assert vqa_report.majority_answers([]) == ({}, "")


def test_accuracy_and_bias_conflict_tables():
    records = vqa_records()
    annotations = vqa_report.official_annotations(records)
    columns = {
        "model": evaluate_vqa(annotations, [{"question_id": 1, "answer": "red"},
                                            {"question_id": 2, "answer": "no"},
                                            {"question_id": 3, "answer": "yes"}]),
        "baseline": evaluate_vqa(annotations, [{"question_id": q, "answer": "yes"}
                                               for q in (1, 2, 3)]),
    }
    lines = vqa_report.accuracy_table(columns, records)
    assert lines[0].split() == ["question", "type", "questions", "model", "baseline"]
    assert [line.split()[0] for line in lines[1:]] == ["is", "what", "[other]", "[yes/no]",
                                                       "overall"]
    assert lines[2].split()[-3:] == ["1", "100.00", "0.00"]
    assert lines[-1].split()[1] == "3"
    conflict = vqa_report.bias_conflict_accuracy(columns, records)
    assert conflict["model"] == {"conflict": 100.0, "others": 45.0, "conflict_questions": 1,
                                 "other_questions": 2}
    table = vqa_report.bias_conflict_table(conflict)
    assert table[1].split() == ["[bias", "conflict]", "1", "100.00", "0.00"]
    assert vqa_report.bias_conflict_accuracy(columns, [r._replace(bias_conflict=None)
                                                       for r in records]) is None


def textvqa_record(qid, answers, question_type, source):
    return TextVQARecord(qid, qid, None, "what?", ["what"], ["a"], np.zeros((1, 4), "float32"),
                         answers, question_type=question_type, answer_source=source)


def test_textvqa_score_table():
    records = [textvqa_record(1, ["stop"] * 10, "sign", "ocr"),
               textvqa_record(2, ["red"] * 10, "color", "vocab")]
    scores = evaluate_textvqa([{"question_id": r.question_id, "answers": r.answers}
                               for r in records],
                              [{"question_id": 1, "answer": "stop"},
                               {"question_id": 2, "answer": "blue"}])
    lines = textvqa_report.score_table({"model": scores}, records)
    assert lines[0].split() == ["question", "type", "questions", "model", "acc", "model",
                                "anls"]
    assert [line.split()[0] for line in lines[1:]] == ["color", "sign", "[ocr]", "[vocab]",
                                                       "overall"]
    assert lines[2].split()[1:] == ["1", "100.00", "100.00"]
    assert lines[-1].split()[1:3] == ["2", "50.00"]


@pytest.mark.parametrize("labels, expected", [
    ((4, 5), "right/low-right of them"),
    ((2, 12), "inside them / itself"),
    ((0, 10), "unrelated to them / up"),
])
def test_relation_names(labels, expected):
    assert textvqa_report.relation_names(labels) == expected


def test_pixel_xywh_and_biggest_boxes():
    record = refcoco.RefExpression(1, 2, 3, "val", ["a"], "a", (10, 20, 30, 60), (100, 200),
                                   4, 5)
    assert record.pixel_xywh(record.normalized_box()) == [10.0, 20.0, 20.0, 40.0]
    boxes = [np.array([[0, 0, 0.5, 0.5], [0, 0, 1, 0.6]]), np.array([[0.2, 0.2, 0.3, 0.3]])]
    np.testing.assert_allclose(refcoco.biggest_boxes(boxes),
                               [[0, 0, 1, 0.6], [0.2, 0.2, 0.3, 0.3]])


def test_grounding_summary_table_and_picture():
    referred = np.array([[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]])
    predicted = np.array([[0, 0, 0.5, 0.5], [0, 0, 0.2, 0.2]])
    proposals = [np.array([[0, 0, 0.5, 0.5], [0, 0, 0.1, 0.1]]), np.array([[0, 0, 1, 1]])]
    summary, correct = grounding_report.score_summary(predicted, referred, proposals)
    assert summary == {"expressions": 2, "accuracy": 50.0, "baseline": 50.0}
    assert correct.tolist() == [True, False]
    assert grounding_report.score_table("val", summary)[1].split() == ["val", "2", "50.00",
                                                                        "50.00"]
    record = refcoco.RefExpression(1, 2, 3, "val", ["a"], "a", (0, 0, 50, 100), (100, 200),
                                   4, 5)
    picture, iou = grounding_report.draw_expression(
        np.zeros((20, 10, 3), np.uint8), record, proposals[0], np.array([0.9, 0.1]),
        predicted[0])
    assert iou == pytest.approx(1.0) and picture.mode == "RGB"


def test_soft_accuracy_is_the_target_of_the_top_answer():
    y_true = np.array([[0.3, 1.0, 0.0], [0.0, 0.6, 0.9]], "float32")
    y_pred = np.array([[0.1, 2.0, -1.0], [3.0, 0.0, 1.0]], "float32")
    np.testing.assert_allclose(np.asarray(soft_accuracy(y_true, y_pred)), [1.0, 0.0])
