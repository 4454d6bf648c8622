"""Shapes world: determinism, pixels, stated facts, formats and arguments.

The checks are independent of the generator's own bookkeeping: boxes are
compared with the rendered pixels, every fact a caption, question, answer or
referring expression states is re-derived from the scene's shapes and signs
(relations with `spatial_relations_numpy` on just the two boxes plus
explicit NumPy geometry), and the written files are read back with the
formats' reference readers (pycocotools `COCO`, plain JSON / NumPy for VQA
and the imdb, PIL for the PNGs).
"""

import json
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_structattn.data import shapes_world as sw
from keras_structattn.data.shapes_world import describe
from keras_structattn.data.shapes_world import report
from keras_structattn.data.shapes_world.scenes import COLORS
from keras_structattn.data.shapes_world.scenes import shape_mask
from keras_structattn.ops.spatial_graph import spatial_relations_numpy

PLATE_RGB = (240, 240, 240)
INK_RGB = (0, 0, 0)
# The direction sectors of the spatial graph (docs/graph_attention.md; y down): labels whose
# 45-degree sectors border due left / right / up / down.
SECTORS = {"left of": {7, 8}, "right of": {11, 4}, "above": {9, 10}, "below": {5, 6}}
OPPOSITE = {
    "left of": "right of", "right of": "left of", "above": "below", "below": "above",
    "inside": "contains", "contains": "inside",
}
# VQA v2 annotation keys (as in the official VQA evaluation's annotations file).
VQA_ANNOTATION_KEYS = {
    "question_id", "image_id", "question_type", "answer_type",
    "multiple_choice_answer", "answers",
}
VQA_ANSWER_KEYS = {"answer", "answer_confidence", "answer_id"}


@pytest.fixture(scope="module")
def world():
    return sw.generate(train=240, val=12, test=30, seed=3)


@pytest.fixture(scope="module")
def written(world, tmp_path_factory):
    out = tmp_path_factory.mktemp("shapes_world")
    sw.write(world, str(out), png=True)
    return out


# --------------------------------------------------------------------------
# Independent geometry.


def node_boxes(scene):
    """name -> pixel box, rebuilt from the scene's shapes and signs."""
    boxes = {f"o{i}": o.box for i, o in enumerate(scene.shapes)}
    boxes.update({f"s{k}": s.box for k, s in enumerate(scene.signs)})
    tokens = [b for s in scene.signs for b in s.token_boxes]
    boxes.update({f"t{t}": b for t, b in enumerate(tokens)})
    return boxes


def relation_ok(scene, a, relation, b):
    """Whether "a relation b" holds: the op's label of the pair plus the
    documented separation, cross-checked with explicit centre geometry."""
    if a == b:
        return False
    boxes = node_boxes(scene)
    box_a, box_b = np.array(boxes[a]), np.array(boxes[b])
    label = int(spatial_relations_numpy(np.stack([box_a, box_b]) / scene.canvas)[0, 1])
    strictly_inside = (box_a[:2] > box_b[:2]).all() and (box_a[2:] < box_b[2:]).all()
    strictly_contains = (box_a[:2] < box_b[:2]).all() and (box_a[2:] > box_b[2:]).all()
    if relation == "inside":
        assert (label == 2) == strictly_inside
        return strictly_inside
    if relation == "contains":
        assert (label == 1) == strictly_contains
        return strictly_contains
    separated = {
        "left of": box_a[2] <= box_b[0],
        "right of": box_a[0] >= box_b[2],
        "above": box_a[3] <= box_b[1],
        "below": box_a[1] >= box_b[3],
    }[relation]
    ok = label in SECTORS[relation] and separated
    if ok:
        dx = (box_a[0] + box_a[2]) - (box_b[0] + box_b[2])
        dy = (box_a[1] + box_a[3]) - (box_b[1] + box_b[3])
        # Centre of a within 45 degrees of the stated direction from b's.
        if relation in ("left of", "right of"):
            assert abs(dy) <= abs(dx) and (dx < 0) == (relation == "left of")
        else:
            assert abs(dx) <= abs(dy) and (dy < 0) == (relation == "above")
    return ok


def node_pixels(scene, name):
    """bool `[canvas, canvas]`: the pixels of shape "o<i>" (its mask drawn
    in its box, occlusion ignored) or sign plate "s<k>" (its box)."""
    out = np.zeros((scene.canvas, scene.canvas), bool)
    if name[0] == "o":
        shape = scene.shapes[int(name[1:])]
        x1, y1, x2, y2 = shape.box
        out[y1:y2, x1:x2] = shape_mask(shape.shape, x2 - x1)
    else:
        x1, y1, x2, y2 = scene.signs[int(name[1:])].box
        out[y1:y2, x1:x2] = True
    return out


def extent_ok(scene, a, relation, b):
    """TextVQA's direction rule from the pixels: every pixel of a beside
    every pixel of b in the stated direction, sharing a row (left, right)
    or a column (above, below); no distance limit."""
    pa, pb = node_pixels(scene, a), node_pixels(scene, b)
    cols_a, cols_b = np.flatnonzero(pa.any(0)), np.flatnonzero(pb.any(0))
    rows_a, rows_b = np.flatnonzero(pa.any(1)), np.flatnonzero(pb.any(1))
    share_row = bool(np.intersect1d(rows_a, rows_b).size)
    share_col = bool(np.intersect1d(cols_a, cols_b).size)
    return {
        "right of": share_row and cols_a.min() > cols_b.max(),
        "left of": share_row and cols_a.max() < cols_b.min(),
        "above": share_col and rows_a.max() < rows_b.min(),
        "below": share_col and rows_a.min() > rows_b.max(),
    }[relation]


def written_on_ok(scene, sign, host):
    """Whether sign "s<k>" is drawn on shape "o<i>": its plate is all plate
    or ink pixels and the one-pixel ring around it is the host's colour,
    inside the host's mask."""
    x1, y1, x2, y2 = scene.signs[int(sign[1:])].box
    shape = scene.shapes[int(host[1:])]
    plate = scene.image[y1:y2, x1:x2]
    if not ((plate == PLATE_RGB).all(-1) | (plate == INK_RGB).all(-1)).all():
        return False
    ring = np.zeros((scene.canvas, scene.canvas), bool)
    ring[y1 - 1:y2 + 1, x1 - 1:x2 + 1] = True
    ring[y1:y2, x1:x2] = False
    on_host = (scene.image[ring] == COLORS[shape.color]).all(-1).all()
    return bool(on_host and node_pixels(scene, host)[ring].all())


def matches(shape, f):
    return all(getattr(shape, k) == v for k, v in f.items())


def check_fact(scene, fact):
    shapes = scene.shapes
    kind = fact["kind"]
    if kind == "count":
        if fact["of"] == "signs":
            assert len(scene.signs) == fact["count"]
        else:
            assert sum(matches(o, fact["filter"]) for o in shapes) == fact["count"]
    elif kind == "attributes":
        assert matches(shapes[int(fact["node"][1:])], fact["values"])
    elif kind == "unique":
        hits = [i for i, o in enumerate(shapes) if matches(o, fact["filter"])]
        assert hits == [int(fact["node"][1:])]
    elif kind == "exists":
        assert any(matches(o, fact["filter"]) for o in shapes) == fact["value"]
    elif kind == "relation":
        assert relation_ok(scene, fact["a"], fact["relation"], fact["b"]), fact
    elif kind == "only":
        if fact["among"] == "signs":
            pool = [f"s{k}" for k in range(len(scene.signs))]
        else:
            pool = [f"o{i}" for i, o in enumerate(shapes) if matches(o, fact["filter"])]
        hits = [n for n in pool if relation_ok(scene, n, fact["relation"], fact["b"])]
        assert hits == [fact["node"]], fact
    elif kind == "extent":
        assert extent_ok(scene, fact["a"], fact["relation"], fact["b"]), fact
        if fact["only"]:
            hits = [f"s{k}" for k in range(len(scene.signs))
                    if extent_ok(scene, f"s{k}", fact["relation"], fact["b"])]
            assert hits == [fact["a"]], fact
    elif kind == "written_on":
        assert written_on_ok(scene, fact["node"], fact["b"]), fact
        if fact["only"]:
            hits = [f"s{k}" for k in range(len(scene.signs))
                    if written_on_ok(scene, f"s{k}", fact["b"])]
            assert hits == [fact["node"]], fact
    elif kind == "text":
        assert " ".join(scene.signs[int(fact["node"][1:])].words) == fact["text"]
    elif kind == "unique_text":
        texts = [" ".join(s.words) for s in scene.signs]
        assert texts.count(fact["text"]) == 1
    elif kind == "biggest":
        areas = [(o.box[2] - o.box[0]) * (o.box[3] - o.box[1]) for o in shapes]
        i = int(fact["node"][1:])
        assert all(areas[i] > a for j, a in enumerate(areas) if j != i)
    else:
        raise AssertionError(f"unknown fact {fact}")


def all_facts(world_or_split):
    if hasattr(world_or_split, "splits"):
        splits = world_or_split.splits.values()
    else:
        splits = [world_or_split]
    for split in splits:
        for task, per_scene in split.tasks.items():
            for scene, records in zip(split.scenes, per_scene):
                for record in records:
                    yield task, scene, record


def vqa_accuracy(prediction, answers):
    """The VQA formula, written out: leave-one-out mean of min(1, m / 3)."""
    total = 0.0
    for i in range(len(answers)):
        others = answers[:i] + answers[i + 1 :]
        total += min(1.0, sum(a == prediction for a in others) / 3.0)
    return total / len(answers)


# --------------------------------------------------------------------------
# Determinism.


def test_same_seed_same_data_other_seed_other_data():
    a = sw.generate(train=4, val=2, test=2, seed=11)
    b = sw.generate(train=4, val=2, test=2, seed=11)
    c = sw.generate(train=4, val=2, test=2, seed=12)
    for name in ("train", "val", "test"):
        for key, value in a.splits[name].features.items():
            np.testing.assert_array_equal(value, b.splits[name].features[key])
        assert a.splits[name].tasks == b.splits[name].tasks
    assert not np.array_equal(
        a.splits["train"].features["images"], c.splits["train"].features["images"]
    )


def test_split_sizes_and_task_choice_do_not_change_other_data():
    small = sw.generate(train=2, val=3, test=0, seed=5, tasks="vqa")
    large = sw.generate(train=5, val=3, test=1, seed=5)
    np.testing.assert_array_equal(
        small.splits["val"].features["images"], large.splits["val"].features["images"]
    )
    np.testing.assert_array_equal(
        small.splits["train"].features["images"], large.splits["train"].features["images"][:2]
    )
    assert small.splits["val"].tasks["vqa"] == large.splits["val"].tasks["vqa"]
    assert "test" not in small.splits


def test_written_files_are_deterministic(tmp_path):
    for name in ("a", "b"):
        sw.write(sw.generate(train=3, val=1, test=1, seed=2), str(tmp_path / name))
    a_files = sorted(
        p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file()
    )
    b_files = sorted(
        p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file()
    )
    assert a_files == b_files
    for rel in a_files:
        a, b = tmp_path / "a" / rel, tmp_path / "b" / rel
        if rel.name == "manifest.json":  # holds timings
            continue
        if rel.suffix == ".npz":  # zip entries carry a timestamp
            with np.load(a) as x, np.load(b) as y:
                assert sorted(x.files) == sorted(y.files)
                for k in x.files:
                    np.testing.assert_array_equal(x[k], y[k])
        else:
            assert a.read_bytes() == b.read_bytes(), rel


# --------------------------------------------------------------------------
# Pixels.


def _check_scene_pixels(scene):
    image = scene.image.astype(np.int64)
    canvas = scene.canvas
    assert image.shape == (canvas, canvas, 3)
    shapes = scene.shapes
    order = sorted(range(len(shapes)), key=lambda i: (-(shapes[i].box[2] - shapes[i].box[0]), i))
    rank = {k: r for r, k in enumerate(order)}
    checked = 0
    for i, o in enumerate(shapes):
        x1, y1, x2, y2 = o.box
        assert 0 <= x1 < x2 <= canvas and 0 <= y1 < y2 <= canvas
        assert x2 - x1 == y2 - y1
        covered_later = [
            j for j, p in enumerate(shapes)
            if rank[j] > rank[i] and p.parent != i
            and min(x2, p.box[2]) > max(x1, p.box[0]) and min(y2, p.box[3]) > max(y1, p.box[1])
        ]
        if covered_later:
            continue
        rgb = np.array(COLORS[o.color])
        gx1, gy1 = max(0, x1 - 1), max(0, y1 - 1)
        gx2, gy2 = min(canvas, x2 + 1), min(canvas, y2 + 1)
        own = (image[gy1:gy2, gx1:gx2] == rgb).all(-1)
        ys, xs = np.nonzero(own)
        # The shape's colour fills its box tightly, and nothing of it leaks
        # into the one-pixel ring around the box.
        assert (xs.min() + gx1, ys.min() + gy1, xs.max() + gx1 + 1, ys.max() + gy1 + 1) == o.box
        inner = (image[y1:y2, x1:x2] == rgb).all(-1)
        # Pixels under a nested shape or a sign on this shape count as its.
        for p in shapes:
            if p.parent == i:
                inner[p.box[1] - y1 : p.box[3] - y1, p.box[0] - x1 : p.box[2] - x1] = True
        for s in scene.signs:
            if s.placement == "on" and s.anchor == i:
                inner[s.box[1] - y1 : s.box[3] - y1, s.box[0] - x1 : s.box[2] - x1] = True
        fill = inner.mean()
        bottom = inner[-1].mean()
        side = x2 - x1
        if o.shape == "square":
            assert fill == 1.0
        elif o.shape == "circle":
            assert 0.68 <= fill <= 0.9 and bottom < 0.75
        elif o.shape == "triangle":
            # Half the box, plus about a pixel per row of edge pixels.
            assert 0.45 <= fill <= 0.55 + 1.5 / side and bottom == 1.0 and inner[0].sum() <= 2
        else:
            assert 0.45 <= fill <= 0.55 + 1.5 / side
            assert inner[-1].sum() <= 2 and inner[side // 2].all()
        if o.parent is not None:
            parent = shapes[o.parent]
            assert parent.size == "large" and o.size == "small" and parent.color != o.color
            # Grown by a pixel, the child's box shows only child and parent.
            ring = image[y1 - 1 : y2 + 1, x1 - 1 : x2 + 1]
            allowed = (ring == rgb).all(-1) | (ring == np.array(COLORS[parent.color])).all(-1)
            assert allowed.all()
        checked += 1
    for s in scene.signs:
        x1, y1, x2, y2 = s.box
        plate = image[y1:y2, x1:x2]
        assert ((plate == PLATE_RGB).all(-1) | (plate == INK_RGB).all(-1)).all()
        ring = image[max(0, y1 - 1) : y2 + 1, max(0, x1 - 1) : x2 + 1].copy()
        top, left = (1 if y1 else 0), (1 if x1 else 0)
        ring[top : top + y2 - y1, left : left + x2 - x1] = 0
        assert not (ring == PLATE_RGB).all(-1).any()
        assert len(s.token_boxes) == len(s.words) == len(s.ocr_words)
        last = x1
        for tx1, ty1, tx2, ty2 in s.token_boxes:
            assert last <= tx1 < tx2 <= x2 and y1 <= ty1 < ty2 <= y2
            last = tx2
        if s.placement == "on":
            host = shapes[s.anchor]
            assert host.box[0] < x1 and host.box[1] < y1 and host.box[2] > x2 and host.box[3] > y2
    return checked


def test_boxes_match_rendered_pixels(world):
    checked = sum(_check_scene_pixels(s) for split in world.splits.values() for s in split.scenes)
    assert checked > 500


def test_scenes_have_nesting_overlap_duplicates_and_every_sign_placement(world):
    scenes = world.splits["train"].scenes
    assert all(2 <= len(s.shapes) <= 8 for s in scenes)
    assert {len(s.shapes) for s in scenes} == set(range(2, 9))
    assert sum(o.parent is not None for s in scenes for o in s.shapes) > 50
    overlapping = 0
    duplicates = 0
    for s in scenes:
        boxes = [o.box for o in s.shapes if o.parent is None]
        for a in range(len(boxes)):
            for b in range(a + 1, len(boxes)):
                iw = min(boxes[a][2], boxes[b][2]) - max(boxes[a][0], boxes[b][0])
                ih = min(boxes[a][3], boxes[b][3]) - max(boxes[a][1], boxes[b][1])
                overlapping += iw > 0 and ih > 0
        keys = [(o.shape, o.color, o.size) for o in s.shapes]
        duplicates += len(keys) > len(set(keys))
    assert overlapping > 10 and duplicates > 20
    placements = {g.placement for s in scenes for g in s.signs}
    assert placements == {"on", "next_to", "free"}
    assert {len(g.words) for s in scenes for g in s.signs} == {1, 2, 3}


def test_features_are_what_the_pixels_say(world):
    split = world.splits["val"]
    f = split.features
    assert f["images"].dtype == np.uint8 and f["obj_features"].shape[-1] == sw.REGION_FEATURE_DIM
    assert f["grid_features"].shape[1:] == (8, 8, sw.grid_feature_dim())
    palette = [(25, 25, 25), *COLORS.values(), PLATE_RGB, INK_RGB]
    for k, scene in enumerate(split.scenes):
        n = len(scene.shapes)
        assert f["num_obj"][k] == n and f["image_ids"][k] == scene.image_id
        np.testing.assert_array_equal(
            f["obj_boxes"][k, :n] * scene.canvas, [o.box for o in scene.shapes]
        )
        assert not f["obj_boxes"][k, n:].any() and not f["obj_features"][k, n:].any()
        for i, o in enumerate(scene.shapes):
            x1, y1, x2, y2 = o.box
            crop = scene.image[y1:y2, x1:x2]
            hist = [(crop == rgb).all(-1).mean() for rgb in palette]
            np.testing.assert_allclose(f["obj_features"][k, i, :9], hist, atol=1e-6)
            np.testing.assert_allclose(
                f["obj_features"][k, i, 25:29], np.array(o.box) / scene.canvas, atol=1e-6
            )
        # Grid cell (r, c) sub-cell (0, 0): the 4x4 top-left pixels of the
        # 8x8 cell on a 64-pixel canvas.
        for r, c in ((0, 0), (3, 5), (7, 7)):
            block = scene.image[8 * r : 8 * r + 4, 8 * c : 8 * c + 4]
            hist = [(block == rgb).all(-1).mean() for rgb in palette]
            np.testing.assert_allclose(f["grid_features"][k, r, c, :9], hist, atol=1e-6)


# --------------------------------------------------------------------------
# Stated facts.


def test_every_stated_fact_holds(world):
    kinds = {}
    for _, scene, record in all_facts(world):
        for fact in record["facts"]:
            check_fact(scene, fact)
            key = fact.get("relation", fact["kind"])
            if fact["kind"] == "extent":  # TextVQA's own rule
                key = f"extent {key}"
            kinds[key] = kinds.get(key, 0) + 1
    # The check above is not vacuous: every relation and fact kind occurs.
    for key in ("left of", "right of", "above", "below", "inside", "contains", "count",
                "attributes", "unique", "exists", "text", "unique_text", "biggest",
                "extent left of", "extent right of", "extent above", "extent below",
                "written_on"):
        assert kinds.get(key, 0) >= 10, (key, kinds)


def test_answers_follow_from_the_facts(world):
    for task, scene, r in all_facts(world):
        facts = r["facts"]
        if task == "captions":
            continue
        if task == "refs":
            target = scene.shapes[r["target"]]
            assert f"o{r['target']}" in {f.get("node") for f in facts}
            same = [
                o for o in scene.shapes
                if (o.shape, o.color, o.size) == (target.shape, target.color, target.size)
            ]
            assert r["needs_relation"] == (len(same) > 1)
            continue
        answers = [a for a, _ in r["answers"]]
        assert len(answers) == 10 and answers.count(r["answer"]) >= 6
        assert all(isinstance(a, str) and a == a.strip().lower() for a in answers)
        qt = r["question_type"]
        if qt in ("count", "count_signs"):
            assert r["answer"] == str(facts[0]["count"])
        elif qt == "exist":
            assert r["answer"] == ("yes" if facts[0]["value"] else "no")
        elif qt in ("written_on", "direction"):
            sign = scene.signs[int(next(f["node"] for f in facts if f["kind"] == "text")[1:])]
            assert r["answer"] == " ".join(sign.words)
            tokens = [w for s in scene.signs for w in s.words]
            assert [tokens[t] for t in r["answer_tokens"]] == r["answer"].split()
            assert 1 <= len(r["answer_tokens"]) <= 3
        elif r["answer"] in ("yes", "no"):
            # A relation yes/no question asks the true relation (yes) or its
            # opposite (no).
            rel = next(f for f in facts if f["kind"] == "relation")
            said = rel["relation"] if r["answer"] == "yes" else OPPOSITE[rel["relation"]]
            assert any(f" {w} " in r["question"] for w in describe.RELATION_WORDS[said])
        else:
            attr = next(f for f in facts if f["kind"] == "attributes")
            assert r["answer"] in attr["values"].values()


def test_caption_texts_state_their_facts(world):
    for task, _, r in all_facts(world):
        if task != "captions":
            continue
        text = " " + r["caption"] + " "
        for fact in r["facts"]:
            if fact["kind"] == "relation":
                words = describe.RELATION_WORDS[fact["relation"]]
                if fact["a"][0] == "s":  # a sign inside a shape is "on" it
                    words += ("on",)
                assert any(f" {w} " in text for w in words), (text, fact)
            if fact["kind"] == "count" and fact["filter"] == {} and fact["count"] > 1:
                # "biggest" captions count the others: "a red square and six
                # smaller shapes".
                k = fact["count"] - (r["group"] == "biggest")
                assert f" {describe.NUMBER_WORDS[k]} " in text
            if fact["kind"] == "attributes" and "color" in fact["values"]:
                assert f" {fact['values']['color']} " in text


def test_five_distinct_captions_from_several_groups(world):
    for _, captions in zip(world.splits["train"].scenes, world.splits["train"].tasks["captions"]):
        assert len(captions) == 5 and len({c["caption"] for c in captions}) == 5
        assert len({c["group"] for c in captions}) >= 3
    groups = [c["group"] for cs in world.splits["train"].tasks["captions"] for c in cs]
    assert groups.count("relation") > 150 and groups.count("text") > 30


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), canvas=st.sampled_from([32, 48, 64, 96]))
def test_property_pixels_and_facts_hold_for_any_seed(seed, canvas):
    world = sw.generate(train=3, val=0, test=0, seed=seed, canvas_size=canvas)
    for scene in world.splits["train"].scenes:
        _check_scene_pixels(scene)
    for _, scene, record in all_facts(world):
        for fact in record["facts"]:
            check_fact(scene, fact)


# --------------------------------------------------------------------------
# Distributions and baselines.


def test_answer_distributions_are_not_degenerate(world):
    for task in ("vqa", "textvqa"):
        records = [r for rs in world.splits["train"].tasks[task] for r in rs]
        by_type = {}
        for r in records:
            by_type.setdefault(r["question_type"], []).append(r["answer"])
        for qt, answers in by_type.items():
            if len(answers) < 50:
                continue  # too few for a share to mean anything
            share = max(answers.count(a) for a in set(answers)) / len(answers)
            assert share <= report.ANSWER_SHARE_CAPS[task][qt], (task, qt, share)
        if task == "vqa":
            assert set(by_type) == {"count", "color", "shape", "exist", "relation"}
            overall = [r["answer"] for r in records]
            assert max(overall.count(a) for a in set(overall)) / len(overall) <= 0.2
        else:
            ocr = sum(r["answer_source"] == "ocr" for r in records)
            assert 0.4 <= ocr / len(records) <= 0.9


def test_vqa_accuracy_formula_and_baselines(world):
    # Known values of the official VQA accuracy formula.
    assert sw.vqa_accuracy("red", ["red", "red", "blue", "blue", "green", "green",
                                   "pink", "pink", "white", "white"]) == pytest.approx(0.6)
    assert sw.vqa_accuracy("catcher", ["pitcher"] * 9 + ["catcher"]) == pytest.approx(0.3)
    assert sw.vqa_accuracy("pitcher", ["pitcher"] * 9 + ["catcher"]) == 1.0
    baselines = sw.trivial_baselines(world)
    assert 10.0 < baselines["vqa"]["overall"] < 60.0
    assert baselines["vqa"]["per_type"]["exist"] > 40.0
    assert 0.0 <= baselines["textvqa"]["overall"] < 50.0
    assert 0.0 <= baselines["refs"]["accuracy"] < 60.0
    assert 0.0 < baselines["captions"]["CIDEr"] < 2.0


# --------------------------------------------------------------------------
# Written formats.


def test_coco_captions_load_with_pycocotools(world, written):
    from pycocotools.coco import COCO

    split = world.splits["test"]
    coco = COCO(str(written / "captions" / "captions_test.json"))
    assert sorted(coco.getImgIds()) == sorted(s.image_id for s in split.scenes)
    for scene, captions in zip(split.scenes, split.tasks["captions"]):
        anns = coco.loadAnns(coco.getAnnIds(imgIds=scene.image_id))
        assert [a["caption"] for a in anns] == [c["caption"] for c in captions]
        image = coco.loadImgs(scene.image_id)[0]
        assert (image["width"], image["height"]) == (64, 64)
    results = coco.loadRes(
        [{"image_id": s.image_id, "caption": "a red circle"} for s in split.scenes]
    )
    assert len(results.getImgIds()) == len(split.scenes)


def test_vqa_files_have_the_v2_layout_and_perfect_answers_score_100(world, written):
    questions = json.loads((written / "vqa" / "questions_train.json").read_text())
    annotations = json.loads((written / "vqa" / "annotations_train.json").read_text())
    assert annotations["task_type"] == "Open-Ended" and questions["data_subtype"] == "train"
    qs = {q["question_id"]: q for q in questions["questions"]}
    anns = annotations["annotations"]
    assert len(qs) == len(anns) == sum(len(r) for r in world.splits["train"].tasks["vqa"])
    partial = 0
    for ann in anns:
        assert VQA_ANNOTATION_KEYS <= set(ann)
        assert qs[ann["question_id"]]["image_id"] == ann["image_id"]
        assert ann["answer_type"] in ("yes/no", "number", "other")
        assert len(ann["answers"]) == 10
        assert all(set(a) == VQA_ANSWER_KEYS for a in ann["answers"])
        assert [a["answer_id"] for a in ann["answers"]] == list(range(1, 11))
        gts = [a["answer"] for a in ann["answers"]]
        assert vqa_accuracy(ann["multiple_choice_answer"], gts) == 1.0
        noisy = [a for a in set(gts) if a != ann["multiple_choice_answer"]]
        partial += any(0.0 < vqa_accuracy(a, gts) < 1.0 for a in noisy)
    # The noise makes the formula matter: some noisy answers earn partial credit.
    assert partial > 50


def test_textvqa_imdb_layout(world, written):
    imdb = np.load(written / "textvqa" / "imdb_val.npy", allow_pickle=True)
    header, entries = imdb[0], imdb[1:]
    assert header["dataset_type"] == "val" and header["has_answer"] and "image_id" not in header
    split = world.splits["val"]
    assert len(entries) == sum(len(r) for r in split.tasks["textvqa"])
    rows = {s.image_id: k for k, s in enumerate(split.scenes)}
    for e in entries:
        scene = split.scenes[e["feature_index"]]
        assert rows[e["image_id"]] == e["feature_index"]
        assert len(e["ocr_tokens"]) == len(e["ocr_info"]) == len(e["ocr_normalized_boxes"])
        assert e["obj_normalized_boxes"].shape == (len(scene.shapes), 4)
        for info, box in zip(e["ocr_info"], e["ocr_normalized_boxes"]):
            bb = info["bounding_box"]
            assert bb["top_left_x"] == pytest.approx(box[0])
            assert bb["width"] == pytest.approx(box[2] - box[0])
        assert len(e["answers"]) == 10 and e["question_tokens"] == e["question"][:-1].split()
        if e["answer_source"] == "ocr":
            # Without OCR noise the answer tokens spell the majority answer.
            assert e["answers"].count(" ".join(e["ocr_tokens"][t] for t in e["answer_tokens"])) >= 6
        else:
            assert e["answer_tokens"] == []


def test_refs_and_instances_load_with_pycocotools(world, written):
    from pycocotools.coco import COCO

    coco = COCO(str(written / "refs" / "instances.json"))
    refs = json.loads((written / "refs" / "refs.json").read_text())
    assert len(refs) == sum(len(r) for s in world.splits.values() for r in s.tasks["refs"])
    assert {r["split"] for r in refs} == {"train", "val", "test"}
    scenes = {s.image_id: s for split in world.splits.values() for s in split.scenes}
    assert sum(r["needs_relation"] for r in refs) > 20
    for r in refs:
        ann = coco.anns[r["ann_id"]]
        assert ann["image_id"] == r["image_id"] and ann["category_id"] == r["category_id"]
        x, y, w, h = ann["bbox"]
        assert (x, y, x + w, y + h) in [o.box for o in scenes[r["image_id"]].shapes]
        shape = scenes[r["image_id"]].shapes[r["ann_id"] % 100].shape
        assert coco.cats[r["category_id"]]["name"] == shape
        assert 1 <= len(r["sentences"]) == len(r["sent_ids"]) <= 2
        for s in r["sentences"]:
            assert s["tokens"] == s["sent"].split() and s["raw"] == s["sent"]


def test_npz_and_png_hold_the_images(world, written):
    from PIL import Image

    split = world.splits["val"]
    with np.load(written / "features_val.npz") as f:
        np.testing.assert_array_equal(f["images"], split.features["images"])
        np.testing.assert_array_equal(f["image_ids"], [s.image_id for s in split.scenes])
    for scene in split.scenes[:4]:
        name = f"shapes_world_val_{scene.index:06d}.png"
        with Image.open(written / "images" / "val" / name) as png:
            np.testing.assert_array_equal(np.asarray(png.convert("RGB")), scene.image)
    manifest = json.loads((written / "manifest.json").read_text())
    assert manifest["summary"]["splits"]["val"]["scenes"] == len(split.scenes)
    for paths in manifest["files"].values():
        assert all(os.path.exists(written / p) for p in paths)


# --------------------------------------------------------------------------
# Bias.


def test_bias_holds_in_train_and_breaks_at_test():
    biased = sw.generate(train=150, val=0, test=150, seed=4, tasks="vqa", bias="circle=red:0.9")
    plain = sw.generate(train=0, val=0, test=150, seed=4, tasks="vqa")

    def red_share(split):
        circles = [o for s in split.scenes for o in s.shapes if o.shape == "circle"]
        return np.mean([o.color == "red" for o in circles])

    assert red_share(biased.splits["train"]) > 0.8
    assert red_share(biased.splits["test"]) < 0.35
    # The unbiased split is exactly the unbiased generator's.
    np.testing.assert_array_equal(
        biased.splits["test"].features["images"], plain.splits["test"].features["images"]
    )
    flagged = 0
    for _, scene, r in all_facts(biased.splits["test"]):
        named = {int(n[1:]) for f in r["facts"] for n in (f.get("node"), f.get("a"), f.get("b"))
                 if isinstance(n, str) and n[0] == "o"}
        filters = [f.get("filter") or f.get("values") or {} for f in r["facts"]]
        conflict = any(
            scene.shapes[i].shape == "circle" and scene.shapes[i].color != "red" for i in named
        ) or any(f.get("shape") == "circle" and f.get("color", "red") != "red" for f in filters)
        assert r["bias_conflict"] == conflict
        flagged += conflict
    assert flagged > 20


# --------------------------------------------------------------------------
# Arguments.


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"min_objects": 0}, "min_objects"),
        ({"max_objects": 0}, "max_objects"),
        ({"max_objects": 11}, "max_objects"),
        ({"canvas_size": 16}, "canvas_size.*>= 32"),
        ({"tasks": "caption"}, "tasks.*captions"),
        ({"tasks": []}, "tasks"),
        ({"train": -1}, "train"),
        ({"train": 0, "val": 0, "test": 0}, "must not all be 0"),
        ({"bias": "hexagon=red"}, "bias.shape"),
        ({"bias": "circle=pink:0.9"}, "bias.color"),
        ({"bias": "circle=red:1.5"}, "bias.strength"),
        ({"bias": "circle"}, "SHAPE=COLOR"),
        ({"answer_noise": 0.9}, "answer_noise"),
        ({"ocr_noise": 1.0}, "ocr_noise"),
        ({"grid_size": 0}, "grid_size"),
        ({"max_signs": 5}, "max_signs"),
        ({"seed": -3}, "seed"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, match):
    args = {"train": 1, "val": 0, "test": 0, **kwargs}
    with pytest.raises(ValueError, match=match):
        sw.generate(**args)


def test_one_shape_scenes_count_what_they_cannot_ask():
    world = sw.generate(train=6, val=0, test=0, seed=1, min_objects=1, max_objects=1, max_signs=0)
    split = world.splits["train"]
    assert all(len(s.shapes) == 1 and not s.signs for s in split.scenes)
    assert split.counters["vqa_skipped/relation"] == 6
    assert split.counters["textvqa_no_text"] == 6
    assert all(len(c) == 5 for c in split.tasks["captions"])
    distinct = sum(len({c["caption"] for c in cs}) for cs in split.tasks["captions"])
    assert distinct + split.counters["caption_duplicates"] == 30


def test_ocr_noise_changes_tokens_not_answers():
    world = sw.generate(train=40, val=0, test=0, seed=8, tasks="textvqa", ocr_noise=0.5)
    scenes = world.splits["train"].scenes
    pairs = [(w, r) for s in scenes for g in s.signs for w, r in zip(g.words, g.ocr_words)]
    changed = sum(w != r for w, r in pairs)
    assert 0.3 * len(pairs) < changed < 0.7 * len(pairs)
    for _, scene, r in all_facts(world):
        for fact in r["facts"]:
            check_fact(scene, fact)


# --------------------------------------------------------------------------
# CLI.


def test_cli_writes_the_chosen_tasks_and_reports(tmp_path, capsys):
    from recipes import shapes_world as recipe

    out = tmp_path / "cli"
    result = recipe.main([
        "--output_dir", str(out), "--task", "vqa,refs", "--train", "20", "--val", "4",
        "--test", "6", "--seed", "9", "--baselines",
    ])
    printed = capsys.readouterr().out
    assert "vqa answers per question type (train)" in printed
    assert "vqa majority per type" in printed and "grounding biggest box" in printed
    assert "retries / fallbacks / skipped items" in printed
    assert (out / "vqa" / "annotations_test.json").exists()
    assert (out / "refs" / "refs.json").exists()
    assert not (out / "captions").exists() and not (out / "textvqa").exists()
    assert json.loads((out / "baselines.json").read_text()) == result["baselines"]
    assert result["summary"]["splits"]["train"]["scenes"] == 20


def test_textvqa_directions_are_not_the_graph_sectors():
    from keras_structattn.data.shapes_world.relations import DIRECTION_LABELS
    from keras_structattn.data.shapes_world.relations import extent_direction

    def graph(a, b):
        return int(spatial_relations_numpy(np.array([a, b], np.float64) / 64)[0, 1])

    tall, small = (10, 10, 30, 60), (0, 30, 6, 40)
    cases = [
        # beside the tall shape's top rows: right of by extents, the graph's
        # upper-right sector (10, a sector of "above")
        ((31, 10, 35, 14), tall, "right of", 10),
        # far right of a small shape, sharing rows: right of, and no graph
        # relation (beyond the distance threshold)
        ((56, 30, 64, 34), small, "right of", 0),
        # right and above, no row in common: no direction; the graph says right (11)
        ((40, 4, 64, 8), tall, None, 11),
        # touching the shape's last column (x2 exclusive): right of; one column in: none
        ((30, 20, 40, 24), tall, "right of", 11),
        ((29, 20, 40, 24), tall, None, 11),
        ((12, 61, 20, 64), tall, "below", 6),
        ((0, 0, 9, 4), tall, None, 9),
    ]
    for box, shape, direction, label in cases:
        assert extent_direction(box, shape) == direction, box
        assert graph(box, shape) == label, box
        if direction is not None:
            assert extent_direction(shape, box) == OPPOSITE[direction]
    # Not vacuous: the graph sector and the extent rule disagree on some cases.
    assert any(d is None and label in DIRECTION_LABELS["right of"] for *_, d, label in cases)
    assert any(d == "right of" and label not in DIRECTION_LABELS["right of"]
               for *_, d, label in cases)
