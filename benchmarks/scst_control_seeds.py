"""Self-critical training against a matched cross-entropy control, paired by seed.

For each seed, two arms on the same Shapes world (`--world_seed`) from the
same cross-entropy model:

- `scst`: the default captioning run, `--train_steps T` cross-entropy steps
  then `--scst_steps N` self-critical steps (Rennie et al., 2017,
  arXiv:1612.00563; the recipe's defaults: mean-of-samples baseline,
  dropout-free gradient steps, gradients clipped to +-0.1);
- `xe`: the same run continued with cross-entropy for the same N extra
  steps instead (the `scst` run's folder up to step T, copied, then
  `--train_steps T+N --scst_steps 0`), so both arms make T + N updates.

Each arm's test split is scored with beam 3 (`recipes.caption evaluate`):
CIDEr-D and fact F1 (`keras_structattn.data.shapes_world.claims`). The
script prints per-seed numbers, each arm's mean and range, and the paired
difference (scst - xe) with a bootstrap interval over seeds. A run whose
`test_scores.json` exists is reused, so a stopped comparison resumes where
it was.

Usage:
    python -m benchmarks.scst_control_seeds [--seeds 1,2,3,4,5] \\
        [--train_steps 1500] [--scst_steps 600] [--output_dir runs/scst_control]
"""

import argparse
import json
import os
import shutil
import subprocess

from benchmarks._seeds import paired_interval
from benchmarks._seeds import print_preamble
from benchmarks._seeds import summary
from benchmarks._seeds import train_run

# What the `xe` arm's copy leaves out of the `scst` run: its self-critical
# phase and its test scores.
SCST_ONLY = ("scst_checkpoints", "scst_history.csv", "scst_best.json", "scst_best.weights.h5",
             "logs", "test_scores.json", "test_results.json", "test_scores_cross_entropy.json",
             "train_summary.json", "curves.png")
MEASURES = (("CIDEr-D", lambda e: e["scores"]["CIDEr"]), ("fact F1", lambda e: e["fact_f1"]))


def arm(args, name, seed, world, flags, copy_from=None):
    """Trains and evaluates one arm of one seed; returns its test scores."""
    out = os.path.join(args.output_dir, f"{name}_seed{seed}")
    scores_path = os.path.join(out, "test_scores.json")
    if copy_from and not os.path.exists(out):
        shutil.copytree(copy_from, out, ignore=shutil.ignore_patterns(*SCST_ONLY))
    command = ["recipes.caption", "train", "--output_dir", out, "--seed", str(seed),
               "--world_seed", str(args.world_seed), *flags, "--examples", "0",
               "--verbose", "0"]
    _, seconds = train_run(out, scores_path, world, command, stdout=subprocess.DEVNULL)
    if seconds is not None:
        print(f"# {name}_seed{seed}: {seconds:.0f} s", flush=True)
    with open(scores_path, encoding="utf-8") as f:
        scores = json.load(f)
    return scores["self-critical" if name == "scst" else "model"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--train_steps", type=int, default=1500)
    parser.add_argument("--scst_steps", type=int, default=600)
    parser.add_argument("--world_seed", type=int, default=1)
    parser.add_argument("--output_dir", default=os.path.join("runs", "scst_control"))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    print_preamble("scst_control_seeds")
    total = args.train_steps + args.scst_steps
    print(f"# arms: scst = recipes.caption train --train_steps {args.train_steps} --scst_steps "
          f"{args.scst_steps}; xe = the same run's cross-entropy model continued to "
          f"--train_steps {total} --scst_steps 0; --seed S --world_seed {args.world_seed}; "
          "test split (500 images), beam 3", flush=True)
    world, results = None, {}
    for seed in seeds:
        scst = arm(args, "scst", seed, world, ["--train_steps", str(args.train_steps),
                                               "--scst_steps", str(args.scst_steps)])
        first = os.path.join(args.output_dir, f"scst_seed{seed}")
        world = world or os.path.join(first, "shapes_world")
        xe = arm(args, "xe", seed, None, ["--train_steps", str(total), "--scst_steps", "0"],
                 copy_from=first)
        results[seed] = {"scst": scst, "xe": xe}
        print(f"# seed {seed}: " + "; ".join(
            f"{label} scst {value(scst):.4f} xe {value(xe):.4f}" for label, value in MEASURES),
            flush=True)
    print(f"test split, over seeds {args.seeds}: mean (min-max); difference = scst - xe, "
          "paired by seed, 95% bootstrap interval of its mean")
    for label, value in MEASURES:
        a = [value(results[s]["scst"]) for s in seeds]
        b = [value(results[s]["xe"]) for s in seeds]
        differences = [x - y for x, y in zip(a, b)]
        low, high = paired_interval(differences)
        print(f"{label:8s} scst {summary(a, 3)} | xe {summary(b, 3)} | difference "
              f"{summary(differences, 3)} [{low:+.3f}, {high:+.3f}] | per seed "
              + ", ".join(f"{d:+.3f}" for d in differences))


if __name__ == "__main__":
    main()
