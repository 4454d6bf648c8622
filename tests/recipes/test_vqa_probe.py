"""The VQA recipe prints the learnability probe's scores only beside a run
on the probe's own world (`recipes.vqa.commands.probe_lines`)."""

import argparse
import json
import os

import numpy as np

from recipes.vqa.commands import PROBE_REFERENCE
from recipes.vqa.commands import probe_lines


def _write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f)


def _run(tmp_path, seed=1, test=500, bias=None):
    out = tmp_path / f"run_{seed}_{test}_{bias}"
    config = dict(seed=seed, bias=bias, layout="default", region_geometry=True)
    splits = {"train": {"scenes": 2000}, "val": {"scenes": 200}, "test": {"scenes": test}}
    _write(str(out / "shapes_world" / "manifest.json"),
           dict(config=config, summary=dict(splits=splits)))
    return argparse.Namespace(output_dir=str(out))


def _reference(tmp_path):
    path = str(tmp_path / "probe.json")
    _write(path, dict(world=dict(seed=1, train=2000, val=200, test=500), epochs=30,
                      date="2026-12-02", scores={"count": 79.5, "overall": 85.25}))
    return path


def test_probe_printed_beside_a_run_on_its_world(tmp_path):
    (line,) = probe_lines(_run(tmp_path), _reference(tmp_path))
    assert line.startswith("probe (")
    assert "count 79.50" in line and "overall 85.25" in line


def test_no_probe_for_another_world(tmp_path):
    reference = _reference(tmp_path)
    assert probe_lines(_run(tmp_path, seed=2), reference) == []
    assert probe_lines(_run(tmp_path, test=300), reference) == []
    assert probe_lines(_run(tmp_path, bias="circle=red:0.9"), reference) == []
    # A real-data run has no world folder.
    assert probe_lines(argparse.Namespace(output_dir=str(tmp_path / "real")), reference) == []


def test_the_committed_reference_is_of_the_default_world():
    with open(PROBE_REFERENCE, encoding="utf-8") as f:
        probe = json.load(f)
    assert probe["world"] == dict(seed=1, train=2000, val=200, test=500)
    assert set(probe["scores"]) >= {"count", "color", "shape", "exist", "relation", "overall"}


def test_the_probe_without_positions_sees_no_box():
    """`shapes_world_probe.py --positions off`: the objects are the
    appearance features of a world generated without region geometry, and
    no box is appended (with positions: the 30-d features, then the box)."""
    from benchmarks import shapes_world_probe as probe
    from keras_structattn.data import shapes_world as sw

    inputs = {}
    for positions in (True, False):
        world = sw.generate(6, 2, 2, seed=3, tasks=["vqa"], region_geometry=positions)
        split = world.splits["train"]
        records = probe.split_records(split)
        vocab = probe.build_vocab(records)
        answers = {a: i for i, a in enumerate(sorted({r["answer"] for _, r in records}))}
        x, _ = probe.encode(split, records, vocab, answers, 14, positions)
        inputs[positions] = (x["objects"], split.features)
    with_boxes, features = inputs[True]
    assert with_boxes.shape[-1] == features["obj_features"].shape[-1] + 4
    appearance, features = inputs[False]
    np.testing.assert_array_equal(appearance[0], features["obj_features"][0])
    assert appearance.shape[-1] == with_boxes.shape[-1] - 9  # no box or area, no appended box
