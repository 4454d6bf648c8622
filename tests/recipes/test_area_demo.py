"""Smoke test of the area attention demo recipe (the README's main job)."""

import json

import numpy as np

from recipes import area_demo


def test_dataset_labels_match_the_rule_and_are_balanced():
    tokens, labels = area_demo.make_dataset(400, seed=3)
    assert tokens.shape == (400, 24) and labels.shape == (400,)
    runs = [area_demo._has_run(seq) for seq in tokens]
    np.testing.assert_array_equal(np.array(runs, dtype="int32"), labels)
    assert 0.35 < labels.mean() < 0.65
    # Negatives still contain zeros, so counting them does not solve the task.
    assert all((seq == 0).sum() >= 3 for seq in tokens[labels == 0])


def test_dataset_is_deterministic_for_a_seed():
    a = area_demo.make_dataset(50, seed=7)
    b = area_demo.make_dataset(50, seed=7)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_recipe_runs_end_to_end_and_writes_results(tmp_path):
    out = tmp_path / "demo"
    args = ["--epochs", "1", "--train_size", "256", "--test_size", "64"]
    results = area_demo.main(args + ["--out", str(out)])
    saved = json.loads((out / "results.json").read_text())
    assert saved == results
    for result in results.values():
        assert 0.0 <= result["accuracy"] <= 1.0
    # TensorBoard event files for both variants.
    assert list((out / "regular" / "logs").rglob("events.out.tfevents.*"))
    assert list((out / "area" / "logs").rglob("events.out.tfevents.*"))
