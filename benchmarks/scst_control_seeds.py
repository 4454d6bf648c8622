"""Self-critical training against a matched cross-entropy control, paired by seed.

For each seed, three arms on the same Shapes world (`--world_seed`) from the
same cross-entropy model (`--train_steps T` steps of the default captioning
run):

- `scst`: the default run, then `--scst_steps N` self-critical steps
  (Rennie et al., 2017, arXiv:1612.00563; the recipe's defaults: the
  mean-of-samples baseline, dropout-free sampling and gradient steps,
  gradients clipped to +-0.1);
- `scst_greedy`: the same N steps with the paper's baseline, the reward of
  the greedy caption (`--scst_baseline greedy`, Eq. 9);
- `xe`: the same cross-entropy run continued for the same N extra steps
  instead (`--train_steps T+N --scst_steps 0`), so every arm makes T + N
  updates.

The other arms start from a copy of the `scst` run's folder up to step T
(its cross-entropy checkpoints). Each arm's test split is scored with beam 3
(`recipes.caption evaluate`): CIDEr-D and fact F1
(`keras_structattn.data.shapes_world.claims`). The script prints per-seed
numbers, each arm's mean and range, and the paired differences against
`scst` with a bootstrap interval over seeds. A run whose `test_scores.json`
exists is reused, so a stopped comparison resumes where it was.

Usage:
    python -m benchmarks.scst_control_seeds [--seeds 1,2,3,4,5] \\
        [--train_steps T] [--scst_steps N] [--output_dir runs/scst_control] \\
        [-- recipe flags for every arm, e.g. --model area]
"""

import argparse
import json
import os
import shutil
import subprocess

from benchmarks._seeds import paired_lines
from benchmarks._seeds import print_preamble
from benchmarks._seeds import train_run

# What a copy of the `scst` run leaves out: its self-critical phase and its
# test scores.
SCST_ONLY = ("scst_checkpoints", "scst_history.csv", "scst_best.json", "scst_best.weights.h5",
             "logs", "test_scores.json", "test_results.json", "test_scores_cross_entropy.json",
             "train_summary.json", "curves.png")
MEASURES = (("CIDEr-D", lambda e: e["scores"]["CIDEr"]), ("fact F1", lambda e: e["fact_f1"]))
ARMS = ("scst", "scst_greedy", "xe")


def arm(args, name, seed, world, flags, copy_from=None):
    """Trains and evaluates one arm of one seed; returns its test scores."""
    out = os.path.join(args.output_dir, f"{name}_seed{seed}")
    scores_path = os.path.join(out, "test_scores.json")
    if copy_from and not os.path.exists(out):
        shutil.copytree(copy_from, out, ignore=shutil.ignore_patterns(*SCST_ONLY))
    command = ["recipes.caption", "train", "--output_dir", out, "--seed", str(seed),
               "--world_seed", str(args.world_seed), *args.recipe_flags, *flags,
               "--examples", "0", "--verbose", "0"]
    _, seconds = train_run(out, scores_path, world, command, stdout=subprocess.DEVNULL)
    if seconds is not None:
        print(f"# {name}_seed{seed}: {seconds:.0f} s", flush=True)
    with open(scores_path, encoding="utf-8") as f:
        scores = json.load(f)
    return scores["model" if name == "xe" else "self-critical"]


def arm_flags(args):
    """`{arm: flags}`: each arm's step counts and baseline."""
    total = args.train_steps + args.scst_steps
    scst = ["--train_steps", str(args.train_steps), "--scst_steps", str(args.scst_steps)]
    return {"scst": scst, "scst_greedy": [*scst, "--scst_baseline", "greedy"],
            "xe": ["--train_steps", str(total), "--scst_steps", "0"]}


def comparison_lines(results, seeds):
    """The summary lines: each measure's arms and their paired differences
    against `scst` (mean (min-max) [95% bootstrap interval] | per seed)."""
    return paired_lines(results, seeds, ARMS, MEASURES, [("scst", other) for other in ARMS[1:]])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--train_steps", type=int, default=None,
                        help="default: the recipe's --train_steps")
    parser.add_argument("--scst_steps", type=int, default=None,
                        help="default: the recipe's --scst_steps")
    parser.add_argument("--world_seed", type=int, default=1)
    parser.add_argument("--output_dir", default=os.path.join("runs", "scst_control"))
    parser.add_argument("recipe_flags", nargs="*", help="after --: flags for every arm")
    args = parser.parse_args()
    if args.train_steps is None or args.scst_steps is None:
        from recipes.caption import build_parser

        defaults = build_parser().parse_args(["train"])
        for name in ("train_steps", "scst_steps"):
            if getattr(args, name) is None:
                setattr(args, name, getattr(defaults, name))
    seeds = [int(s) for s in args.seeds.split(",")]
    print_preamble("scst_control_seeds")
    flags = arm_flags(args)
    common = " ".join(["recipes.caption train", *args.recipe_flags, "--seed S",
                       f"--world_seed {args.world_seed}"])
    print(f"# arms ({common}): "
          + "; ".join(f"{name}: {' '.join(f)}" for name, f in flags.items())
          + "; test split (500 images), beam 3", flush=True)
    world, results = None, {}
    for seed in seeds:
        scst = arm(args, "scst", seed, world, flags["scst"])
        first = os.path.join(args.output_dir, f"scst_seed{seed}")
        world = world or os.path.join(first, "shapes_world")
        results[seed] = {"scst": scst}
        for name in ARMS[1:]:
            results[seed][name] = arm(args, name, seed, None, flags[name], copy_from=first)
        print(f"# seed {seed}: " + "; ".join(
            f"{label} " + " ".join(f"{name} {value(results[seed][name]):.4f}" for name in ARMS)
            for label, value in MEASURES), flush=True)
    print(f"test split, over seeds {args.seeds}: mean (min-max); differences paired by seed, "
          "95% bootstrap interval of their mean")
    for line in comparison_lines(results, seeds):
        print(line)


if __name__ == "__main__":
    main()
