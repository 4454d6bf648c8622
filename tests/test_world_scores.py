"""Shapes world caption scores: per-group CIDEr-D, the floors' entries and
the verdict against them."""

import pytest

from keras_structattn import metrics
from keras_structattn.data import shapes_world as sw
from keras_structattn.data.shapes_world import baselines
from keras_structattn.data.shapes_world import writers
from keras_structattn.tasks.captioning import world_scores


@pytest.fixture(scope="module")
def world():
    return sw.generate(train=40, val=0, test=12, tasks="captions", seed=4)


def test_cider_by_group_scores_each_groups_references_alone(world):
    annotations = writers.coco_captions(world.splits["test"])
    # Every image captioned by its own first reference.
    first = {}
    for a in annotations["annotations"]:
        first.setdefault(a["image_id"], a)
    results = [{"image_id": i, "caption": a["caption"]} for i, a in first.items()]
    by_group = world_scores.cider_by_group(annotations, results)
    for group, value in by_group.items():
        kept = [a for a in annotations["annotations"] if a["group"] == group]
        ids = {a["image_id"] for a in kept}
        expected = metrics.evaluate_captions(
            dict(annotations, annotations=kept,
                 images=[i for i in annotations["images"] if i["id"] in ids]),
            [r for r in results if r["image_id"] in ids], metrics=["CIDEr"])
        assert value == pytest.approx(expected.scores["CIDEr"])
    # Captions copied from a group score highest against that group.
    groups = {a["group"] for a in first.values()}
    best = max(by_group, key=by_group.get)
    assert best in groups


def test_entries_of_floors_and_a_model(world):
    test = world.splits["test"]
    annotations = writers.coco_captions(test)
    outputs = baselines.caption_floors(world.splits["train"], test)
    # A "model" that copies each image's first reference: only true claims.
    outputs = {"model": [{"image_id": s.image_id, "caption": cs[0]["caption"]}
                         for s, cs in zip(test.scenes, test.tasks["captions"])], **outputs}
    scenes = [s.to_dict() for s in test.scenes]
    entries = world_scores.score_captioners(annotations, outputs, scenes, models=("model",))
    assert list(entries) == list(outputs)
    assert entries["model"]["facts"]["precision"] == 1.0
    assert entries["biggest_shape"]["facts"]["precision"] == 1.0
    assert entries["oracle_count"]["facts"]["count_precision"] == 1.0
    assert entries["constant"]["facts"]["precision"] < 1.0
    for entry in entries.values():
        assert entry["fact_f1"] == entry["facts"]["f1"]
        assert entry["hallucination"]["captions"] == len(test.scenes)
    assert "METEOR" not in entries["constant"]["scores"]
    assert [n for n in entries if world_scores.is_floor(n)] == [
        n for n in outputs if n.startswith("constant") or n == "biggest_shape"]


def entry(cider, f1):
    return {"scores": {"CIDEr": cider}, "fact_f1": f1}


@pytest.mark.parametrize("model, beats", [
    (entry(0.67, 0.45), True),
    (entry(0.67, 0.43), False),  # fact F1 under 1.1x the best floor's 0.40
    (entry(0.65, 0.50), False),  # CIDEr-D under 1.1x 0.60
])
def test_verdict_needs_ten_percent_over_the_best_floor_on_both(model, beats):
    entries = {"model": model, "constant": entry(0.3, 0.40), "biggest_shape": entry(0.6, 0.1),
               "oracle_count": entry(5.0, 0.9)}  # oracles are not floors
    result, lines = world_scores.verdict(entries, "model")
    assert result is beats and len(lines) == 2
    assert "biggest_shape 0.6000" in lines[0] and "constant 0.4000" in lines[1]
