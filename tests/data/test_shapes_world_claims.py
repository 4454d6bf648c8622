"""Fact claims of captions: the parser against hand-written captions, the
checker against hand-made scenes, and both against every generated
reference (which states only true facts by construction)."""

import collections

import pytest

from keras_structattn.data import shapes_world as sw
from keras_structattn.data.shapes_world import baselines
from keras_structattn.data.shapes_world import claims

RED_CIRCLE = (("color", "red"), ("shape", "circle"))
BLUE_SQUARE = (("color", "blue"), ("shape", "square"))


def facts_of(scene):
    return claims.SceneFacts(
        [dict(shape=o.shape, color=o.color, size=o.size, box=o.box) for o in scene.shapes],
        scene.canvas)


# A 100-pixel scene: a small red circle at the left, a large blue square at
# the right, a small blue square inside the large one.
SHAPES = [
    dict(shape="circle", color="red", size="small", box=(5, 40, 25, 60)),
    dict(shape="square", color="blue", size="large", box=(50, 20, 95, 65)),
    dict(shape="square", color="blue", size="small", box=(60, 30, 70, 40)),
]


@pytest.fixture(scope="module")
def scene():
    return claims.SceneFacts(SHAPES, 100)


@pytest.mark.parametrize("caption, expected", [
    ("a small red disc", [("shape", "circle"), ("colour", "red", "circle"),
                          ("size", "small", "red", "circle")]),
    ("two blue boxes, a circle", [
        ("count", BLUE_SQUARE, 2), ("shape", "square"), ("colour", "blue", "square"),
        ("shape", "circle")]),
    ("a picture of three shapes", [("count", (), 3)]),
    ("one shape on a black canvas", [("count", (), 1)]),
    ("no triangles", [("count", (("shape", "triangle"),), 0)]),
    ("a big red square and four smaller shapes", [
        ("shape", "square"), ("colour", "red", "square"), ("size", "large", "red", "square"),
        ("count", (), 5)]),
    ("a red shape", [("colour", "red", None)]),
    # Relations: one direction of each opposite pair, sizes left out.
    ("a red circle to the left of a blue square", [
        ("shape", "circle"), ("colour", "red", "circle"), ("shape", "square"),
        ("colour", "blue", "square"), ("relation", RED_CIRCLE, "left of", BLUE_SQUARE)]),
    ("there is a little blue block on the right of a red disc", [
        ("shape", "square"), ("colour", "blue", "square"), ("size", "small", "blue", "square"),
        ("shape", "circle"), ("colour", "red", "circle"),
        ("relation", RED_CIRCLE, "left of", BLUE_SQUARE)]),
    ("a blue square containing a red circle", [
        ("shape", "square"), ("colour", "blue", "square"), ("shape", "circle"),
        ("colour", "red", "circle"), ("relation", RED_CIRCLE, "inside", BLUE_SQUARE)]),
    # Sign words, "image", "picture" and "it" are no noun phrases: no relation.
    ("an image with five shapes", [("count", (), 5)]),
    ("a sign saying fresh fish left of a red circle", [
        ("shape", "circle"), ("colour", "red", "circle")]),
    ("a blue square with the word cafe on it", [("shape", "square"),
                                               ("colour", "blue", "square")]),
    # Punctuation and case do not matter; repeats count once.
    ("A red circle, a RED circle.", [("shape", "circle"), ("colour", "red", "circle")]),
    ("", []),
])
def test_claims_of_hand_written_captions(caption, expected):
    assert claims.caption_claims(caption) == expected


@pytest.mark.parametrize("caption, truth", [
    ("a red circle", [True, True]),
    ("a blue circle", [True, False]),
    ("a large red circle", [True, True, False]),
    ("three shapes", [True]),
    ("two shapes", [False]),
    ("two blue squares", [True, True, True]),
    ("no triangles", [True]),
    ("a red circle left of a blue square", [True, True, True, True, True]),
    ("a red circle right of a blue square", [True, True, True, True, False]),
    ("a blue square above a red circle", [True, True, True, True, False]),
    ("a small blue square inside a blue square", [True, True, True, True]),
    ("a red circle inside a blue square", [True, True, True, True, False]),
    ("a big blue box and two smaller shapes", [True, True, True, True]),
    ("a big blue box and three smaller shapes", [True, True, True, False]),
])
def test_claims_checked_against_a_hand_made_scene(scene, caption, truth):
    assert [scene.is_true(c) for c in claims.caption_claims(caption)] == truth


def test_every_generated_reference_claims_only_true_facts():
    world = sw.generate(train=150, val=0, test=0, seed=11)
    made = collections.Counter()
    for scene, references in zip(world.splits["train"].scenes,
                                 world.splits["train"].tasks["captions"]):
        facts = facts_of(scene)
        for reference in references:
            found = claims.caption_claims(reference["caption"])
            assert found, reference
            for claim in found:
                made[claim[0]] += 1
                assert facts.is_true(claim), (reference["caption"], claim)
    assert set(made) == set(claims.CATEGORIES) and min(made.values()) > 50


def test_fact_scores_count_by_hand(scene):
    references = {1: ["a red circle left of a blue square", "three shapes"]}
    scenes = {1: scene}
    # 2 true claims (shape, colour of the circle) and 1 false (green square's colour).
    out = claims.fact_scores({1: "a red circle and a green square"}, references, scenes)
    assert out["claims"] == 4 and out["true_claims"] == 3  # shape square is true
    assert out["precision"] == pytest.approx(3 / 4)
    # The references claim 6: circle, red circle, square, blue square, the relation, the count.
    assert out["recall"] == pytest.approx(3 / 6)
    assert out["f1"] == pytest.approx(2 * 0.75 * 0.5 / 1.25)
    assert out["colour_precision"] == pytest.approx(1 / 2)
    assert out["relation_recall"] == 0.0 and out["count_recall"] == 0.0
    assert out["claims_per_caption"] == 4
    perfect = claims.fact_scores({1: "a red circle left of a blue square and three shapes"},
                                 references, scenes)
    assert perfect["precision"] == perfect["recall"] == perfect["f1"] == 1.0
    with pytest.raises(KeyError, match="image 2"):
        claims.fact_scores({2: "a red circle"}, references, scenes)


def test_no_template_is_in_every_images_references():
    world = sw.generate(train=200, val=0, test=0, seed=5)
    captions = world.splits["train"].tasks["captions"]
    for group in {c["group"] for cs in captions for c in cs}:
        having = sum(any(c["group"] == group for c in cs) for cs in captions)
        assert having < len(captions), group


def test_caption_floors_are_blind_or_read_the_scene_as_named():
    world = sw.generate(train=60, val=0, test=8, seed=2)
    train, test = world.splits["train"], world.splits["test"]
    floors = baselines.caption_floors(train, test)
    assert list(floors)[0] == "constant" and "oracle_count" in floors
    counted = collections.Counter(c["caption"] for cs in train.tasks["captions"] for c in cs)
    assert counted[floors["constant"][0]["caption"]] == max(counted.values())
    for name, results in floors.items():
        assert [r["image_id"] for r in results] == [s.image_id for s in test.scenes]
        if name.startswith("constant"):
            assert len({r["caption"] for r in results}) == 1
    for scene, r in zip(test.scenes, floors["oracle_count"]):
        assert facts_of(scene).is_true(claims.caption_claims(r["caption"])[0])
    for scene, r in zip(test.scenes, floors["biggest_shape"]):
        assert all(facts_of(scene).is_true(c) for c in claims.caption_claims(r["caption"]))
