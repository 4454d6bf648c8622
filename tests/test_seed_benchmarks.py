"""The paired bootstrap interval of the over-seeds benchmarks."""

import numpy as np
import pytest

from benchmarks._seeds import paired_interval


def test_interval_of_equal_differences_is_that_difference():
    assert paired_interval([0.25] * 5) == pytest.approx((0.25, 0.25))


def test_interval_holds_the_mean_within_the_range_and_is_reproducible():
    differences = [0.1, -0.05, 0.2, 0.0, 0.15]
    low, high = paired_interval(differences)
    assert min(differences) <= low < np.mean(differences) < high <= max(differences)
    assert paired_interval(differences) == (low, high)
    # A wider coverage gives a wider interval.
    wide = paired_interval(differences, level=0.99)
    assert wide[0] <= low and wide[1] >= high


def test_interval_matches_a_plain_resampling_loop():
    differences = [0.3, -0.1, 0.05]
    rng = np.random.default_rng(0)
    picks = rng.integers(0, 3, (10_000, 3))
    means = [np.mean([differences[i] for i in row]) for row in picks]
    assert paired_interval(differences) == pytest.approx(
        (np.quantile(means, 0.025), np.quantile(means, 0.975)))


def test_scst_control_arms_make_the_same_number_of_updates_and_pair_by_seed():
    import argparse

    from benchmarks import scst_control_seeds as control

    flags = control.arm_flags(argparse.Namespace(train_steps=100, scst_steps=40))
    steps = {name: dict(zip(f[::2], f[1::2])) for name, f in flags.items()}
    for name, given in steps.items():
        assert int(given["--train_steps"]) + int(given["--scst_steps"]) == 140, name
    assert steps["scst_greedy"]["--scst_baseline"] == "greedy"
    assert "--scst_baseline" not in steps["scst"]
    entry = lambda cider, f1: {"scores": {"CIDEr": cider}, "fact_f1": f1}  # noqa: E731
    results = {1: {"scst": entry(1.0, 0.5), "scst_greedy": entry(0.8, 0.5), "xe": entry(0.7, 0.4)},
               2: {"scst": entry(1.2, 0.4), "scst_greedy": entry(1.0, 0.5), "xe": entry(0.9, 0.4)}}
    lines = control.comparison_lines(results, [1, 2])
    greedy = next(line for line in lines if "scst - scst_greedy" in line)
    # CIDEr-D: both seeds differ by +0.2, so the interval is that value.
    assert "+0.200, +0.200" in greedy and "per seed +0.200, +0.200" in greedy
    assert lines[0].startswith("CIDEr-D: scst  1.100") and len(lines) == 6


def test_ledger_keeps_finished_runs_across_processes_and_kills(tmp_path):
    """Two ledgers on one file (two processes' seeds) merge their entries;
    a new ledger reads them back; a write leaves no partial file."""
    from benchmarks._seeds import Ledger
    from benchmarks._seeds import kept_scores

    path = str(tmp_path / "runs.json")
    first, second = Ledger(path), Ledger(path)
    first.put("regular_seed1", {"steps": [3, 5]})
    second.put("regular_seed4", {"steps": [2, 4]})
    reread = Ledger(path)
    assert reread.get("regular_seed1") == {"steps": [3, 5]}
    assert reread.get("regular_seed4") == {"steps": [2, 4]}
    assert reread.get("regular_seed2") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.json", "runs.json.lock"]
    assert Ledger(None).get("regular_seed1") is None
    scores = {"model": 1, "constant_count": 2, "biggest_shape": 3, "count_oracle": 4}
    assert kept_scores(scores) == {"model": 1, "constant_count": 2, "biggest_shape": 3}


def test_textvqa_comparison_reads_the_table_and_resumes_from_its_ledger(tmp_path):
    """The TextVQA arms: Table 2's four, one training for all; a run in the
    ledger is not trained again (its folder gone); the recipe's table is
    read by column title."""
    import argparse

    from benchmarks import textvqa_seeds as tv
    from benchmarks._seeds import Ledger

    assert set(tv.ARMS) == {"m4c", "m4c_6n", "sa_m4c", "sa_m4c_random"}
    sets = {n: f[f.index("--hparams_set") + 1] for n, f in tv.ARMS.items()}
    assert sets == {"m4c": "m4c_tiny", "m4c_6n": "m4c_6n_tiny", "sa_m4c": "sa_m4c_tiny",
                    "sa_m4c_random": "sa_m4c_tiny"}
    assert tv.ARMS["sa_m4c_random"][-2:] == ["--graph", "random"]
    assert "--early_stopping" in tv.TRAINING and "--max_minutes" in tv.TRAINING
    table = tv.parse_table(
        "question type    questions      model acc     model anls   majority acc  majority anls"
        "  first_ocr acc first_ocr anls\n"
        "direction              350          22.14          30.37           1.11           2.24"
        "          25.97          32.73\n"
        "[ocr]                  435          24.11          31.96           0.97           2.42"
        "          28.28          34.98\n")
    assert table["[ocr]"] == {"questions": 435, "acc": 24.11, "anls": 31.96,
                              "majority_acc": 0.97, "majority_anls": 2.42,
                              "first_ocr_acc": 28.28, "first_ocr_anls": 34.98}
    path = str(tmp_path / "runs.json")
    entry = {"table": table, "steps": [240, 560], "seconds": 500.0}
    Ledger(path).put("sa_m4c_seed2", entry)
    args = argparse.Namespace(output_dir=str(tmp_path / "gone"), world_seed=1, recipe_flags=[])
    assert tv.run_arm(args, Ledger(path), "sa_m4c", 2, None) == entry
    assert not (tmp_path / "gone").exists()  # nothing trained
