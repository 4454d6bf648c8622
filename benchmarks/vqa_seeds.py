"""VQA on Shapes world over seeds: MCAN vs MCAN+PA vs MUAN (and MUAN without its gate).

Runs the VQA recipe (`python -m recipes.vqa train`, one subprocess per run,
each in its own run folder under `--output_dir`) for each seed and each
model, with the recipe's defaults otherwise (the embedded default run), and
prints the test accuracy (official VQA accuracy, %) overall and per question
type: mean and range (min-max) over the seeds, then every run. The world is
generated once and shared (`--world_seed`: the same data for every run; the
seed changes the initialisation, dropout and batch order).

The comparisons at convergence (early stopping, 5 seeds, ledger, paired
intervals) are `benchmarks.pa_vqa_seeds` (MCAN vs MCAN+PA without the box
in the features), `benchmarks.muan_gate_seeds` (MUAN's gate at d 128) and
`benchmarks.catt_vqa` (docs/vqa.md, "Comparisons at convergence").

Usage:
    python -m benchmarks.vqa_seeds [--seeds 1,2,3] [--models mcan,mcan_pa,muan,muan_nogate] \\
        [--output_dir runs/vqa_seeds] [--epochs N]
"""

import json
import os
import subprocess

from benchmarks._seeds import parse_comparison
from benchmarks._seeds import seed_run
from benchmarks._seeds import summary
from benchmarks._seeds import train_run

# name -> recipe flags
MODELS = {
    "mcan": ["--model", "mcan"],
    "mcan_pa": ["--model", "mcan_pa"],
    "muan": ["--model", "muan"],
    "muan_nogate": ["--model", "muan", "--hparams_set", "muan_tiny_nogate"],
}
TYPES = ("count", "color", "shape", "exist", "relation")


def run_one(args, name, seed, world):
    """Trains and evaluates one run; returns `(scores, baseline scores, seconds)`."""
    out, command = seed_run("vqa", args, name, seed, MODELS[name])
    scores_path = os.path.join(out, "test_scores.json")
    _, seconds = train_run(out, scores_path, world, command, stdout=subprocess.DEVNULL)
    with open(scores_path, encoding="utf-8") as f:
        scores = json.load(f)
    with open(os.path.join(out, "test_baseline_scores.json"), encoding="utf-8") as f:
        baseline = json.load(f)
    return scores, baseline, seconds


def main():
    args, seeds, names = parse_comparison(__doc__, MODELS, "vqa_seeds")
    print("# recipe: python -m recipes.vqa train --model M --seed S (Shapes world "
          "2000/200/500 images, the recipe's defaults)", flush=True)
    world = None
    results = {}
    for seed in seeds:
        for name in names:
            scores, baseline, seconds = run_one(args, name, seed, world)
            results[name, seed] = scores
            if world is None:
                world = os.path.join(args.output_dir, f"{name}_seed{seed}", "shapes_world")
            took = f" ({seconds:.0f} s)" if seconds else ""
            print(f"# seed {seed} {name:12s}: overall {scores['overall']:.2f}, relation "
                  f"{scores['perQuestionType']['relation']:.2f}{took}", flush=True)
    print(f"test accuracy (%), mean (min-max) over seeds {args.seeds}; baseline: the "
          "per-type majority answer of the training split")
    header = f"{'model':12s} | {'overall':21s} | " + " | ".join(f"{t:21s}" for t in TYPES)
    print(header)
    print("-" * len(header))
    cells = [f"{baseline['overall']:6.2f}"] + [
        f"{baseline['perQuestionType'][t]:6.2f}" for t in TYPES]
    print(f"{'baseline':12s} | " + " | ".join(f"{c:21s}" for c in cells))
    for name in names:
        runs = [results[name, s] for s in seeds]
        cells = [summary([r["overall"] for r in runs])] + [
            summary([r["perQuestionType"][t] for r in runs]) for t in TYPES]
        print(f"{name:12s} | " + " | ".join(cells))
    print("relation accuracy per run (seed order):")
    for name in names:
        print(f"  {name:12s}: " + ", ".join(
            f"{results[name, s]['perQuestionType']['relation']:.2f}" for s in seeds))


if __name__ == "__main__":
    main()
