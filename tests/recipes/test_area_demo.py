"""The area attention demo recipe: its command line and its claim (its task:
tests/test_run_of_three.py)."""

import json
import subprocess
import sys

from recipes import area_demo


def test_too_few_epochs_warn_and_stdout_holds_the_results_only(tmp_path):
    """Item 17 of issue 17: one epoch may not show the contrast; the recipe says so."""
    from tests.recipes.conftest import ROOT

    result = subprocess.run(
        [sys.executable, "-m", "recipes.area_demo", "--epochs", "1", "--train_size", "128",
         "--test_size", "32", "--output_dir", str(tmp_path / "demo")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "warning: --epochs 1: area attention needs about 3 epochs" in result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("Test accuracy on the run-of-three task")


def test_the_default_run_shows_what_the_docstring_claims(tmp_path):
    """The default (5 epochs, seed 0): area attention finds the runs, regular
    attention without positions stays near chance (docstring's figures)."""
    out = tmp_path / "demo"
    results = area_demo.main(["--output_dir", str(out)])
    assert results["area attention (width 3)"]["accuracy"] >= 0.99
    assert results["regular attention (width 1)"]["accuracy"] <= 0.55
    # What it writes: the results, TensorBoard event files and the history
    # of both variants.
    assert json.loads((out / "results.json").read_text()) == results
    for variant in ("regular", "area"):
        assert list((out / variant / "logs").rglob("events.out.tfevents.*"))
        assert (out / variant / "history.csv").exists()
