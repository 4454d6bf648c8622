"""The VQA comparisons at convergence (`benchmarks._vqa_seeds` and the
scripts on it): question groups against a hand count, and a comparison
resumed wholly from its ledger (no run trained) printing per seed, the
baseline, the arms' means and the paired differences."""

import json

import numpy as np
import pytest

from benchmarks import _vqa_seeds
from benchmarks import muan_gate_seeds
from benchmarks import pa_vqa_seeds

QUESTIONS = {"questions": [
    {"question_id": 1, "question": "how many red shapes are there?"},
    {"question_id": 2, "question": "is the red circle left of the blue square?"},
    {"question_id": 3, "question": "what color is the shape above the big circle?"},
    {"question_id": 4, "question": "what is below the green triangle?"},
    {"question_id": 5, "question": "what shape is left of the red box?"},
]}
TYPES = {1: "count", 2: "relation", 3: "relation", 4: "relation", 5: "relation"}


def annotations(conflicts=None):
    rows = [{"question_id": q, "question_type": t} for q, t in TYPES.items()]
    if conflicts is not None:
        for row in rows:
            row["bias_conflict"] = row["question_id"] in conflicts
    return {"annotations": rows}


def test_question_groups_and_their_accuracies():
    groups = _vqa_seeds.question_groups(QUESTIONS, annotations())
    assert groups[1] == ["overall", "type/count"]
    assert groups[2] == ["overall", "type/relation", "form/yes_no"]
    assert groups[3][-1] == "form/what_color"
    assert groups[4][-1] == groups[5][-1] == "form/what_shape"
    per_question = {"1": 100.0, "2": 0.0, "3": 30.0, "4": 60.0, "5": 100.0}  # JSON's str keys
    means, counts = _vqa_seeds.grouped_accuracy(per_question, groups)
    assert means["overall"] == pytest.approx(np.mean(list(per_question.values())))
    assert means["type/relation"] == pytest.approx((0 + 30 + 60 + 100) / 4)
    assert means["form/what_shape"] == pytest.approx(80.0)
    assert counts == {"overall": 5, "type/count": 1, "type/relation": 4, "form/yes_no": 1,
                      "form/what_color": 1, "form/what_shape": 2}
    conflict = _vqa_seeds.question_groups(QUESTIONS, annotations(conflicts={1, 3}))
    means, counts = _vqa_seeds.grouped_accuracy({int(k): v for k, v in per_question.items()},
                                                conflict)
    assert means["conflict"] == pytest.approx(65.0) and counts["others"] == 3
    assert means["conflict/relation"] == pytest.approx(30.0)
    assert means["others/relation"] == pytest.approx((0 + 60 + 100) / 3)


def entry(count, overall, baseline=30.0):
    scores = {"overall": overall, "type/count": count, "form/yes_no": overall - 1}
    return {"model": scores, "baseline": {k: baseline for k in scores},
            "questions": {k: 10 for k in scores}, "steps": [100, 200], "seconds": 1.0}


def test_pa_comparison_resumes_from_its_ledger(tmp_path, capsys):
    ledger = tmp_path / "runs.json"
    ledger.write_text(json.dumps({
        "mcan_seed1": entry(50.0, 70.0), "mcan_pa_seed1": entry(52.0, 70.5),
        "mcan_seed2": entry(51.0, 71.0), "mcan_pa_seed2": entry(53.0, 71.0)}))
    results = pa_vqa_seeds.main(["--seeds", "1,2", "--ledger", str(ledger),
                                 "--output_dir", str(tmp_path / "runs")])
    assert results[2]["mcan_pa"]["model"]["type/count"] == 53.0
    out = capsys.readouterr().out
    assert "--world_region_geometry off" in out and "--early_stopping accuracy:12" in out
    lines = out.splitlines()
    assert any(line.startswith("# seed 2 mcan_pa") and "count 53.00" in line for line in lines)
    assert any(line.startswith("baseline") and ": count 30.00 (10 questions)" in line
               for line in lines)
    # Counting first; both seeds differ by +2: the interval is that value.
    measures = [line for line in lines if line.startswith(("count:", "overall:"))]
    assert measures[0].startswith("count: mcan 50.500 (50.000-51.000)")
    pair = lines[lines.index(measures[0]) + 1]
    assert "mcan_pa - mcan" in pair and "[+2.000, +2.000]" in pair
    assert not (tmp_path / "runs").exists()  # nothing trained


def test_gate_comparison_arms_differ_only_in_the_gate():
    from models import registry

    sets = {name: registry.get(flags[flags.index("--hparams_set") + 1])
            for name, flags in muan_gate_seeds.ARMS.items()}
    gated = sets["gated"]
    assert gated.hidden_size == 128 and gated.hidden_size // gated.num_heads >= 32
    assert sets["ungated"].values() == gated.override(qk_gate=False).values()
    assert sets["gated_bias4"].values() == gated.override(gate_bias_init=4.0).values()
