"""Captioning on Shapes world over seeds: regular vs 2x2 vs 3x3 area attention.

Runs the captioning recipe (`python -m recipes.caption`, one subprocess per
run, each in its own run folder under `--output_dir`) for each seed and each
of `<set>`, `<set>_area2x2` and `<set>_area3x3` (area attention in the first
2 layers of the encoder self-attention and the caption-to-image attention;
Li et al., 2019, arXiv:1810.10126, Sec. 4.3), with the same flags
otherwise, and prints the test CIDEr-D and ROUGE-L of the cross-entropy
model and of the self-critical model (mean and range over the seeds), then
the self-critical gain per run. The world is generated once and shared
(`--world_seed`: the data are the same for every run; the seed changes the
model's initialisation, dropout, batches and samples).

Usage:
    python -m benchmarks.caption_seeds [--seeds 1,2,3] [--train_steps 500] \\
        [--scst_steps 100] [--output_dir runs/caption_seeds]
"""

import argparse
import json
import os
import subprocess

from benchmarks._seeds import print_preamble
from benchmarks._seeds import train_run

VARIANTS = (("regular", ""), ("area 2x2", "_area2x2"), ("area 3x3", "_area3x3"))
METRICS = (("CIDEr", "CIDEr-D"), ("ROUGE_L", "ROUGE-L"))


def run_one(args, suffix, seed, world):
    """Trains and evaluates one run; returns its saved test scores."""
    out = os.path.join(args.output_dir, f"{args.hparams_set}{suffix}_seed{seed}")
    scores_path = os.path.join(out, "test_scores.json")
    command = ["recipes.caption", "train", "--output_dir", out, "--model", "area",
               "--hparams_set", args.hparams_set + suffix, "--hparams", args.hparams,
               "--seed", str(seed), "--world_seed", str(args.world_seed),
               "--train_steps", str(args.train_steps), "--scst_steps",
               str(args.scst_steps), "--verbose", "0"]
    _, seconds = train_run(out, scores_path, world, command, stdout=subprocess.DEVNULL)
    if seconds is not None:
        print(f"# {os.path.basename(out)}: {seconds:.0f} s", flush=True)
    with open(scores_path, encoding="utf-8") as f:
        final = json.load(f)
    with open(os.path.join(out, "test_scores_cross_entropy.json"), encoding="utf-8") as f:
        before = json.load(f)
    return {"cross-entropy": before["scores"], "self-critical": final["self-critical"]["scores"],
            "baseline": final["biggest_shape"]["scores"]}


def summary(values):
    mean = sum(values) / len(values)
    return f"{mean:.3f} ({min(values):.3f}-{max(values):.3f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--hparams_set", default="captioner_tiny")
    parser.add_argument("--hparams", default="learning_rate_warmup_steps=200",
                        help="the same overrides for every variant")
    parser.add_argument("--train_steps", type=int, default=500)
    parser.add_argument("--scst_steps", type=int, default=100)
    parser.add_argument("--world_seed", type=int, default=1)
    parser.add_argument("--output_dir", default=os.path.join("runs", "caption_seeds"))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    print_preamble("caption_seeds")
    print(f"# recipe: python -m recipes.caption train --model area --hparams_set "
          f"{args.hparams_set}[_area2x2|"
          f"_area3x3] --hparams {args.hparams} --seed S --train_steps {args.train_steps} "
          f"--scst_steps {args.scst_steps} (Shapes world 2000/200/500, beam 3)", flush=True)
    # The world of the first run is copied to the others (same sizes and
    # --world_seed: the same data), instead of generated again.
    world = None
    results = {}
    for seed in seeds:
        for name, suffix in VARIANTS:
            results[name, seed] = run_one(args, suffix, seed, world)
            if world is None:
                world = os.path.join(args.output_dir, f"{args.hparams_set}{suffix}_seed{seed}",
                                     "shapes_world")
            scores = results[name, seed]
            print(f"# seed {seed} {name:8s}: " + ", ".join(
                f"{label} XE {scores['cross-entropy'][key]:.3f} SCST "
                f"{scores['self-critical'][key]:.3f}" for key, label in METRICS), flush=True)
    baseline = results[VARIANTS[0][0], seeds[0]]["baseline"]
    print(f"baseline (describe the biggest shape): CIDEr-D {baseline['CIDEr']:.3f}, "
          f"ROUGE-L {baseline['ROUGE_L']:.3f}")
    print(f"{'model':9s} | {'phase':13s} | " + " | ".join(
        f"{label} mean (min-max)" for _, label in METRICS))
    for name, _ in VARIANTS:
        for phase in ("cross-entropy", "self-critical"):
            cells = [summary([results[name, s][phase][key] for s in seeds]) for key, _ in METRICS]
            print(f"{name:9s} | {phase:13s} | " + " | ".join(f"{c:22s}" for c in cells))
    print("self-critical gain in CIDEr-D (SCST - XE) per run:")
    for name, _ in VARIANTS:
        gains = [results[name, s]["self-critical"]["CIDEr"]
                 - results[name, s]["cross-entropy"]["CIDEr"] for s in seeds]
        print(f"  {name:9s}: " + ", ".join(f"{g:+.3f}" for g in gains))


if __name__ == "__main__":
    main()
