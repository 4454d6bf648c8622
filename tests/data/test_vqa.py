"""VQA v2 files, MCAN's question tokenizer, answer vocabulary and soft scores.

A tiny Shapes world is written and read back against its JSON read with
`json`; malformed copies check that every error names the file and the
question id (or the list index). The tokenizer is checked against MCAN's
rule written as a character loop, the soft scores against a brute-force
count.
"""

import json
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_structattn.data.shapes_world import generate
from keras_structattn.data.shapes_world.writers import write
from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.decoding.tokens import PAD_ID
from keras_structattn.decoding.tokens import UNK_ID
from keras_structattn.metrics.vqa_accuracy import read_vqa_results
from keras_structattn.tasks.vqa.vqa import AnswerVocab
from keras_structattn.tasks.vqa.vqa import VQARecord
from keras_structattn.tasks.vqa.vqa import question_batch
from keras_structattn.tasks.vqa.vqa import read_vqa
from keras_structattn.tasks.vqa.vqa import records_report
from keras_structattn.tasks.vqa.vqa import soft_score_batch
from keras_structattn.tasks.vqa.vqa import soft_scores
from keras_structattn.tasks.vqa.vqa import tokenize_question


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("shapes_world_vqa")
    write(generate(train=6, val=2, test=2, tasks="vqa", seed=0), str(out), compress=False)
    return out


def _paths(world_dir, split="train"):
    return (
        str(world_dir / "vqa" / f"questions_{split}.json"),
        str(world_dir / "vqa" / f"annotations_{split}.json"),
    )


def _load(world_dir, split="train"):
    q, a = _paths(world_dir, split)
    with open(q) as f, open(a) as g:
        return json.load(f), json.load(g)


def _dump(tmp_path, questions, annotations):
    q, a = tmp_path / "q.json", tmp_path / "a.json"
    q.write_text(json.dumps(questions))
    a.write_text(json.dumps(annotations))
    return str(q), str(a)


def _mcan_loop(text):
    """MCAN's rule, character by character: delete, space, split."""
    chars = []
    for c in text.lower():
        if c in ".,'!?\"()*#:;":
            continue
        chars.append(" " if c in "-/" else c)
    return "".join(chars).split()


def test_read_shapes_world_round_trip(world_dir):
    questions, annotations = _load(world_dir)
    records, report = read_vqa(*_paths(world_dir))
    assert [r.question_id for r in records] == [q["question_id"] for q in questions["questions"]]
    by_id = {a["question_id"]: a for a in annotations["annotations"]}
    for record, q in zip(records, questions["questions"]):
        a = by_id[q["question_id"]]
        assert record.image_id == q["image_id"] and record.question == q["question"]
        assert record.tokens == _mcan_loop(q["question"])
        assert record.question_type == a["question_type"]
        assert record.answer_type == a["answer_type"]
        assert record.multiple_choice_answer == a["multiple_choice_answer"]
        assert record.answers == tuple(x["answer"] for x in a["answers"])
    n = len(questions["questions"])
    assert report["questions"] == report["questions_in_file"] == n
    assert "nothing skipped" in records_report(report)
    # Without annotations (a test split): no answers.
    test_records, _ = read_vqa(_paths(world_dir, "test")[0])
    assert test_records and all(r.answers == () and r.question_type is None for r in test_records)


@pytest.mark.parametrize(
    "defect, where, needle",
    [
        ("unknown", "a", "question id 999"),
        ("count", "a", "expected 10 answers, found 9"),
        ("duplicate", "q", "duplicate question id"),
        ("missing_key", "q", "missing key 'question'"),
        ("bad_id", "q", "questions[1]"),
        ("not_string", "a", "answers[0]"),
        ("without", "q", "no annotation"),
    ],
)
def test_malformed_files_name_file_and_id(world_dir, tmp_path, defect, where, needle):
    questions, annotations = _load(world_dir)
    qs, anns = questions["questions"], annotations["annotations"]
    qid = qs[1]["question_id"]
    ann = next(a for a in anns if a["question_id"] == qid)
    if defect == "unknown":
        anns.append(dict(ann, question_id=999))
        qid = 999
    elif defect == "count":
        ann["answers"] = ann["answers"][:9]
    elif defect == "duplicate":
        qs.append(dict(qs[1]))
    elif defect == "missing_key":
        del qs[1]["question"]
    elif defect == "bad_id":
        qs[1]["question_id"] = "x"
    elif defect == "not_string":
        ann["answers"][0]["answer"] = 3
    elif defect == "without":
        anns.remove(ann)
    q, a = _dump(tmp_path, questions, annotations)
    with pytest.raises(ValueError) as info:
        read_vqa(q, a)
    message = str(info.value)
    assert (q if where == "q" else a) in message
    assert needle in message
    if defect != "bad_id":
        assert f"question id {qid}" in message


def test_skip_invalid_counts_every_skip(world_dir, tmp_path):
    questions, annotations = _load(world_dir)
    qs, anns = questions["questions"], annotations["annotations"]
    by_id = {a["question_id"]: a for a in anns}
    ids = [q["question_id"] for q in qs]
    by_id[ids[0]]["answers"] = by_id[ids[0]]["answers"][:3]  # answer_count
    anns.remove(by_id[ids[2]])  # without_annotation
    anns.append(dict(by_id[ids[3]], question_id=123))  # unknown_question_id
    qs.append(dict(qs[4]))  # duplicate_question_id
    del qs[5]["image_id"]  # missing_key (its annotation is then unknown)
    q, a = _dump(tmp_path, questions, annotations)
    records, report = read_vqa(q, a, skip_invalid=True)
    expected = [i for k, i in enumerate(ids) if k not in (0, 2, 5)]
    assert [r.question_id for r in records] == expected
    assert report["skipped/answer_count"] == 1
    assert report["skipped/without_annotation"] == 1
    assert report["skipped/unknown_question_id"] == 2  # id 123 and the question of qs[5]
    assert report["skipped/duplicate_question_id"] == 1
    assert report["skipped/missing_key"] == 1
    assert report["questions"] == len(expected)
    assert report["questions_in_file"] == len(ids) + 1
    assert "skipped: " in records_report(report) and "answer_count 1" in records_report(report)


@pytest.mark.parametrize(
    "text, tokens",
    [
        ("What's the man's name?", ["whats", "the", "mans", "name"]),
        ("Is it black-and-white/gray?", ["is", "it", "black", "and", "white", "gray"]),
        ('How many (3.5) items: #1; *a*, "b"!', ["how", "many", "35", "items", "1", "a", "b"]),
        ("Tabs\tand  Spaces\n", ["tabs", "and", "spaces"]),
        ("x@y & z~ e.g.", ["x@y", "&", "z~", "eg"]),
        ("--/", []),
    ],
)
def test_tokenize_question_cases(text, tokens):
    assert tokenize_question(text) == tokens


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet="aB .,'!?\"()*#:;-/@\t1", max_size=30))
def test_tokenize_question_matches_the_rule(text):
    assert tokenize_question(text) == _mcan_loop(text)


def test_answer_vocab_min_count_order_and_save(tmp_path):
    answers = ["yes"] * 9 + ["no"] * 8 + ["b"] * 10 + ["a"] * 10 + ["c"] * 12
    vocab = AnswerVocab.build(answers, min_count=9)
    assert vocab.answers == ["c", "a", "b", "yes"]  # count down, ties alphabetical
    assert vocab.index("no") == -1 and vocab.index("yes") == 3 and vocab.answer(0) == "c"
    assert len(AnswerVocab.build(answers, min_count=8)) == 5
    # Normalised before counting: two surfaces of "yes" reach 9 together.
    vocab = AnswerVocab.build(["Yes"] * 4 + ["yes "] * 5, min_count=9,
                              normalize=lambda s: s.strip().lower())
    assert vocab.answers == ["yes"] and vocab.counts == [9]
    path = tmp_path / "answers.json"
    vocab.save(path)
    assert os.listdir(tmp_path) == ["answers.json"]  # no temp file left
    loaded = AnswerVocab.load(path)
    assert loaded.answers == vocab.answers and loaded.counts == vocab.counts
    bad = tmp_path / "bad.json"
    bad.write_text('{"answers": ["a"]}')
    with pytest.raises(ValueError, match="bad.json"):
        AnswerVocab.load(bad)
    with pytest.raises(ValueError, match="most frequent seen 8 times"):
        AnswerVocab.build(["no"] * 8, min_count=9)


def test_answer_vocab_with_prepare_answer():
    prepare = pytest.importorskip("keras_structattn.metrics.vqa_accuracy").prepare_answer
    vocab = AnswerVocab.build(["Two", "two", "2", "the dog", "dog"], min_count=2,
                              normalize=prepare)
    assert vocab.answers == ["2", "dog"]
    scores = soft_scores(["two", "2", "Two.", "a dog", "cat"], vocab, prepare)
    np.testing.assert_allclose(scores, [0.9, 0.3], rtol=0, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "A", "d"]), min_size=10, max_size=10))
def test_soft_scores_ladder_vs_brute_force(answers):
    vocab = AnswerVocab(["a", "b", "c", "e"])
    normalize = str.lower
    scores = soft_scores(answers, vocab, normalize)
    assert scores.dtype == np.float32 and scores.shape == (4,)
    for i, candidate in enumerate(vocab.answers):
        count = sum(normalize(h) == candidate for h in answers)
        expected = {0: 0.0, 1: 0.3, 2: 0.6, 3: 0.9}.get(count, 1.0)
        assert abs(scores[i] - expected) < 1e-6
    record = VQARecord(1, 2, "q", ["q"], "t", "a", tuple(answers), answers[0])
    batch = soft_score_batch([record, answers], vocab, normalize)
    assert batch.shape == (2, 4) and np.array_equal(batch[0], scores)
    assert np.array_equal(batch[1], scores)


def test_soft_score_batch_needs_answers():
    record = VQARecord(7, 2, "q", ["q"])
    with pytest.raises(ValueError, match="Question 7"):
        soft_score_batch([record], AnswerVocab(["a"]))


def test_question_batch_truncates_and_pads():
    token_lists = [["is", "it", "red"], ["what", "color", "is", "the", "big", "square"], []]
    vocab = WordVocab.build(token_lists, min_count=1)
    batch = question_batch(token_lists + [["zebra"]], vocab, max_length=4)
    assert batch.dtype == np.int32 and batch.shape == (4, 4)
    for row, tokens in enumerate(token_lists + [["zebra"]]):
        ids = [vocab.encode([t])[0] for t in tokens][:4]
        assert batch[row].tolist() == ids + [PAD_ID] * (4 - len(ids))
    assert batch[3, 0] == UNK_ID
    assert question_batch([["a"] * 20], vocab).shape == (1, 14)


def test_read_vqa_results(tmp_path):
    path = tmp_path / "results.json"

    def check(data, needle, **kwargs):
        path.write_text(json.dumps(data))
        with pytest.raises(ValueError) as info:
            read_vqa_results(path, **kwargs)
        assert str(path) in str(info.value) and needle in str(info.value)

    good = [{"question_id": 5, "answer": "yes", "extra": 1}, {"question_id": 3, "answer": "2"}]
    path.write_text(json.dumps(good))
    assert read_vqa_results(path, question_ids={3, 5, 9}) == [
        {"question_id": 5, "answer": "yes"}, {"question_id": 3, "answer": "2"}
    ]
    check({"question_id": 5}, "expected a JSON list")
    check([{"question_id": 5}], "question id 5")
    check([{"question_id": "5", "answer": "a"}], "results[0]")
    check(good + [{"question_id": 5, "answer": "no"}], "question id 5 (results[2]): duplicate")
    check(good, "question id 3", question_ids={5})


def test_relation_form_is_the_form_the_generator_drew():
    """`relation_form` of each generated relation question, against the form
    its generator was asked for (the private makers called with each form),
    and on the written records the answers agree with the form."""
    from keras_structattn.data.shapes_world import vqa as world_vqa
    from keras_structattn.data.shapes_world.scenes import COLOR_NAMES
    from keras_structattn.data.shapes_world.scenes import SHAPES

    world = generate(train=40, val=0, test=0, tasks="vqa", seed=3)
    rng = np.random.default_rng(0)
    seen = set()
    for scene in world.splits["train"].scenes:
        landmarks = world_vqa._landmarks(scene)
        for form in ("what_shape", "what_color", "yes_no"):
            made = (world_vqa._relation_yes_no(scene, rng, landmarks) if form == "yes_no"
                    else world_vqa._relation_what(scene, rng, landmarks, form))
            if made is not None:
                assert world_vqa.relation_form(made[0]) == form, made[0]
                seen.add(form)
    assert seen == set(world_vqa.RELATION_FORMS)
    answers = {"yes_no": {"yes", "no"}, "what_color": set(COLOR_NAMES),
               "what_shape": set(SHAPES)}
    for records in world.splits["train"].tasks["vqa"]:
        for record in records:
            if record["question_type"] == "relation":
                assert record["answer"] in answers[world_vqa.relation_form(record["question"])]
    with pytest.raises(ValueError, match="relation question"):
        world_vqa.relation_form("how many red shapes are there?")
