"""RefCOCO refs (JSON and pickle), box IoU, grounding targets and accuracy.

A tiny Shapes world's refs are read back against the files read with
`json`; IoU is checked against a brute-force loop, the targets against
their definition.
"""

import json
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_structattn.data.shapes_world import generate
from keras_structattn.data.shapes_world.writers import write
from keras_structattn.tasks.grounding.refcoco import box_iou
from keras_structattn.tasks.grounding.refcoco import grounding_accuracy
from keras_structattn.tasks.grounding.refcoco import grounding_targets
from keras_structattn.tasks.grounding.refcoco import read_refs


@pytest.fixture(scope="module")
def refs_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("shapes_world_refs")
    write(generate(train=4, val=2, test=2, tasks="refs", seed=0), str(out), compress=False)
    return out / "refs"


def _load(refs_dir):
    with open(refs_dir / "refs.json") as f, open(refs_dir / "instances.json") as g:
        return json.load(f), json.load(g)


def _iou_loop(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


@pytest.mark.parametrize("fmt", ["json", "pickle"])
def test_reads_refs_with_boxes(refs_dir, tmp_path, fmt):
    refs, instances = _load(refs_dir)
    refs_path = refs_dir / "refs.json"
    if fmt == "pickle":
        refs_path = tmp_path / "refs(unc).p"
        with open(refs_path, "wb") as f:
            pickle.dump(refs, f)
    expressions, report = read_refs(refs_path, refs_dir / "instances.json")
    anns = {a["id"]: a for a in instances["annotations"]}
    sizes = {i["id"]: (i["width"], i["height"]) for i in instances["images"]}
    expected = [(r, s) for r in refs for s in r["sentences"]]
    assert len(expressions) == len(expected) == report["sentences"]
    for e, (r, s) in zip(expressions, expected):
        x, y, w, h = anns[r["ann_id"]]["bbox"]
        assert (e.ref_id, e.sent_id, e.ann_id, e.split) == (
            r["ref_id"], s["sent_id"], r["ann_id"], r["split"]
        )
        assert e.box == (x, y, x + w, y + h) and e.image_size == sizes[r["image_id"]]
        assert e.tokens == [t.lower() for t in s["tokens"]] and e.sentence == s["raw"]
        np.testing.assert_allclose(
            e.normalized_box(), np.array(e.box) / np.tile(e.image_size, 2), rtol=1e-6
        )
    assert report["refs"] == len(refs)

    kept, report = read_refs(refs_path, refs_dir / "instances.json", splits=["val"])
    assert {e.split for e in kept} == {"val"}
    assert report["outside_splits"] == sum(r["split"] != "val" for r in refs)
    with pytest.raises(ValueError, match=r"testA.*splits in the file"):
        read_refs(refs_path, refs_dir / "instances.json", splits="testA")


def test_test_is_testA_and_testB_where_the_file_has_no_test(refs_dir, tmp_path):
    """The refer toolkit's RefCOCO / RefCOCO+ splits: train, val, testA, testB."""
    refs, _ = _load(refs_dir)
    tests = [r for r in refs if r["split"] == "test"]
    assert len(tests) >= 2
    for k, ref in enumerate(tests):
        ref["split"] = "testA" if k % 2 == 0 else "testB"
    renamed = tmp_path / "refs(unc).p"
    with open(renamed, "wb") as f:
        pickle.dump(refs, f)
    instances = refs_dir / "instances.json"
    both, report = read_refs(renamed, instances, splits=["train", "test"])
    want = [(r["ref_id"], s["sent_id"]) for r in tests for s in r["sentences"]]
    assert [(e.ref_id, e.sent_id) for e in both if e.split == "test"] == want
    assert report["split/test"] == len(want) and "split/testA" not in report
    only_a, _ = read_refs(renamed, instances, splits="testA")
    assert {e.ref_id for e in only_a} == {r["ref_id"] for r in tests if r["split"] == "testA"}
    # A file that has a `test` (RefCOCOg umd, Shapes world) keeps its own.
    own, _ = read_refs(refs_dir / "refs.json", instances, splits="test")
    assert {e.ref_id for e in own} == {r["ref_id"] for r in tests}


@pytest.mark.parametrize(
    "defect, needle",
    [
        ("ann_id", "ann_id 77 is not in"),
        ("sent_ids", "sent_id 5 of 'sent_ids' has no sentence"),
        ("box", "has a box of size"),
        ("image", "image_id 42 is not in"),
    ],
)
def test_errors_name_file_and_ref(refs_dir, tmp_path, defect, needle):
    refs, instances = _load(refs_dir)
    ref = refs[1]
    if defect == "ann_id":
        ref["ann_id"] = 77
    elif defect == "sent_ids":
        ref["sent_ids"].append(5)
    elif defect == "box":
        next(a for a in instances["annotations"] if a["id"] == ref["ann_id"])["bbox"][2] = 0
    elif defect == "image":  # the ref and its instance on an image not in "images"
        ref["image_id"] = 42
        next(a for a in instances["annotations"] if a["id"] == ref["ann_id"])["image_id"] = 42
    refs_path, inst_path = tmp_path / "refs.json", tmp_path / "instances.json"
    refs_path.write_text(json.dumps(refs))
    inst_path.write_text(json.dumps(instances))
    with pytest.raises(ValueError) as info:
        read_refs(refs_path, inst_path)
    message = str(info.value)
    assert str(refs_path) in message and f"ref_id {ref['ref_id']}" in message
    assert needle in message
    expressions, report = read_refs(refs_path, inst_path, skip_invalid=True)
    assert report["refs"] == len(refs) - 1 and sum(
        v for k, v in report.items() if k.startswith("skipped/")
    ) == 1
    assert ref["ref_id"] not in {e.ref_id for e in expressions}


def test_tokens_fall_back_to_the_sentence(refs_dir, tmp_path):
    refs, _ = _load(refs_dir)
    del refs[0]["sentences"][0]["tokens"]
    refs[0]["sentences"][0]["sent"] = "The left-most Circle."
    path = tmp_path / "refs.json"
    path.write_text(json.dumps(refs))
    expressions, _ = read_refs(path, refs_dir / "instances.json")
    assert expressions[0].tokens == ["the", "left", "most", "circle"]


box = st.tuples(
    st.integers(0, 8), st.integers(0, 8), st.integers(0, 4), st.integers(0, 4)
).map(lambda t: (t[0], t[1], t[0] + t[2], t[1] + t[3]))


@settings(max_examples=40, deadline=None)
@given(st.lists(box, min_size=1, max_size=4), st.lists(box, min_size=1, max_size=3))
def test_box_iou_vs_loop(a, b):
    iou = box_iou(a, b)
    assert iou.dtype == np.float32 and iou.shape == (len(a), len(b))
    expected = [[_iou_loop(x, y) for y in b] for x in a]
    np.testing.assert_allclose(iou, expected, rtol=1e-6, atol=1e-7)


def test_grounding_targets():
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 0.6, (3, 5, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(0.1, 0.4, (3, 5, 2))], -1)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], bool)
    gt = boxes[[0, 1, 2], [1, 4, 0]] + 0.01
    out = grounding_targets(boxes, mask, gt)
    for b in range(3):
        iou = np.array([_iou_loop(boxes[b, n], gt[b]) if mask[b, n] else 0 for n in range(5)])
        np.testing.assert_allclose(out["iou"][b], iou, rtol=1e-5)
        np.testing.assert_allclose(out["target_distribution"][b], iou / iou.sum(), rtol=1e-5)
        assert out["best_region"][b] == np.argmax(iou)
    assert np.all(out["target_distribution"][~mask] == 0)
    np.testing.assert_allclose(out["target_distribution"].sum(1), 1, rtol=1e-6)
    # No overlap at all: all mass on the region whose centre is nearest.
    far = np.array([[0, 0, 1, 1], [5, 5, 6, 6], [2, 2, 3, 3], [2.5, 2.5, 3.5, 3.5]], float)
    single = grounding_targets(far, np.array([1, 1, 1, 0], bool), [3.2, 3.2, 3.6, 3.6])
    assert single["best_region"] == 2 and single["iou"].shape == (4,)
    assert single["target_distribution"].tolist() == [0, 0, 1, 0]
    with pytest.raises(ValueError, match=r"example\(s\) \[0\]"):
        grounding_targets(far[None], np.zeros((1, 4), bool), [[0, 0, 1, 1]])


def test_grounding_accuracy_threshold_is_strict():
    gt = [[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 1, 1]]
    pred = [[0, 0, 2, 1], [0, 0, 1, 1.5], [5, 5, 6, 6]]  # IoU 0.5, 2/3, 0
    accuracy, correct = grounding_accuracy(pred, gt)
    assert correct.tolist() == [False, True, False] and accuracy == pytest.approx(1 / 3)
    accuracy, correct = grounding_accuracy(pred, gt, strict=False)
    assert correct.tolist() == [True, True, False]


def test_paper_target_is_a_softmax_of_the_thresholded_iou():
    """MUAN Sec. III-B: s* = IoU above eta else 0, softmax over the real regions."""
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 6], [20, 20, 30, 30], [0, 0, 1, 1]], float)
    mask = np.array([True, True, True, False])
    gt = np.array([0, 0, 10, 10], float)
    got = grounding_targets(boxes, mask, gt, target="paper", threshold=0.5)
    # IoUs: 1.0, 0.6, 0.0 (and padding); all above 0.5 kept but the third.
    expected = np.exp([1.0, 0.6, 0.0])
    expected /= expected.sum()
    np.testing.assert_allclose(got["target_distribution"][:3], expected, rtol=1e-6)
    assert got["target_distribution"][3] == 0
    high = grounding_targets(boxes, mask, gt, target="paper", threshold=0.7)
    expected = np.exp([1.0, 0.0, 0.0])
    np.testing.assert_allclose(high["target_distribution"][:3], expected / expected.sum(),
                               rtol=1e-6)
