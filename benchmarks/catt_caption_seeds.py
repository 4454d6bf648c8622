"""The captioning confounder test: Transformer, +CATT, CATT w/o Init; Up-Down, Up-Down+CATT.

Shapes world with a shape -> colour bias in train and val (`--world_bias`,
e.g. 95% of the circles red), an unbiased test split. For each model and
seed the captioning recipe trains a run (`python -m recipes.caption train
--model M --seed S`, one subprocess per run, each in its own folder under
`--output_dir`; the world generated once and shared: `--world_seed`) and
evaluates it on the test split, and this script prints CIDEr-D and the
CHAIR-style colour-shape hallucination rates of `recipes.caption evaluate`
(`keras_structattn.data.shapes_world.hallucination`): CHAIR_s (captions
stating a colour-shape pair the image lacks), CHAIR_i (such claims among
all claims), and the biased pair claimed on images without it, over all
test images and over the *conflict* images (the biased shape present in
other colours only): mean and range (min-max) over the seeds, then every
run. The paper (Yang et al., 2021, arXiv:2103.03493, Tables 3 and 6)
reports +3.2 CIDEr-D for Transformer+CATT on COCO and -1.9 without the
K-means initialisation.

Usage:
    python -m benchmarks.catt_caption_seeds [--seeds 1,2,3] [--models transformer,catt,...] \\
        [--bias circle=red:0.95] [--train_steps 200] [--output_dir runs/catt_caption_seeds]
"""

import argparse
import json
import os
import subprocess

from benchmarks._seeds import print_preamble
from benchmarks._seeds import train_run

# name -> recipe flags
MODELS = {
    "transformer": ["--model", "transformer"],
    "catt": ["--model", "catt"],
    "catt_noinit": ["--model", "catt", "--dictionary_init", "uniform"],
    "butd": ["--model", "butd"],
    "butd_catt": ["--model", "butd_catt"],
}
RATES = (("claims/cap", "claims_per_caption"), ("CHAIR_s", "chair_s"), ("CHAIR_i", "chair_i"),
         ("biased", "biased_pair"), ("biased@cf", "biased_pair_conflict"))


def run_one(args, name, seed, world):
    """Trains and evaluates one run; returns `(test scores json, seconds)`."""
    out = os.path.join(args.output_dir, f"{name}_seed{seed}")
    scores_path = os.path.join(out, "test_scores.json")
    command = ["recipes.caption", "train", "--output_dir", out, *MODELS[name],
               "--seed", str(seed), "--world_seed", str(args.world_seed),
               "--world_bias", args.bias, *world_flags(args),
               "--train_steps", str(args.train_steps), "--scst_steps", "0",
               "--steps_per_checkpoint", str(args.train_steps), "--examples", "0",
               "--verbose", "0"]
    _, seconds = train_run(out, scores_path, world, command, stdout=subprocess.DEVNULL,
                           env=dict(os.environ, KERAS_BACKEND="tensorflow"))
    with open(scores_path, encoding="utf-8") as f:
        return json.load(f), seconds


def rates_of(column):
    """The hallucination rates of a scores column, with the colour-shape
    claims per caption (a model that states no colour is never wrong)."""
    rates = dict(column["hallucination"])
    rates["claims_per_caption"] = rates["claims"] / max(1, rates["captions"])
    return rates


def world_flags(args):
    return ["--world_train", str(args.world_train), "--world_val", str(args.world_val),
            "--world_test", str(args.world_test)]


def fmt(key, value):
    return f"{value:.2f}" if key == "claims_per_caption" else f"{100 * value:.2f}%"


def row(values, percent=False):
    scale = 100 if percent else 1
    values = [scale * v for v in values if v is not None]
    if not values:
        return f"{'-':21s}"
    mean = sum(values) / len(values)
    return f"{mean:6.3f} ({min(values):6.3f}-{max(values):6.3f})" if not percent else (
        f"{mean:6.2f} ({min(values):6.2f}-{max(values):6.2f})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--bias", default="circle=red:0.95")
    parser.add_argument("--train_steps", type=int, default=200)
    parser.add_argument("--world_train", type=int, default=1000)
    parser.add_argument("--world_val", type=int, default=20)
    parser.add_argument("--world_test", type=int, default=300)
    parser.add_argument("--world_seed", type=int, default=1)
    parser.add_argument("--output_dir", default=os.path.join("runs", "catt_caption_seeds"))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    names = args.models.split(",")
    print_preamble("catt_caption_seeds", backend="tensorflow")
    print(f"# recipe: python -m recipes.caption train --model M --seed S --world_bias {args.bias} "
          f"{' '.join(world_flags(args))} --train_steps {args.train_steps} --scst_steps 0 "
          "(cross-entropy only; beam 3 on the unbiased test split)", flush=True)
    world = None
    results = {}
    for seed in seeds:
        for name in names:
            scores, seconds = run_one(args, name, seed, world)
            results[name, seed] = scores
            if world is None:
                world = os.path.join(args.output_dir, f"{name}_seed{seed}", "shapes_world")
            model = scores["model"]
            rates = rates_of(model)
            took = f" ({seconds:.0f} s)" if seconds else ""
            print(f"# seed {seed} {name:12s}: CIDEr-D {model['scores']['CIDEr']:.3f}, "
                  + ", ".join(f"{label} {fmt(key, rates[key])}" for label, key in RATES
                              if rates.get(key) is not None) + took, flush=True)
    baseline = results[names[0], seeds[0]].get("biggest_shape")
    print(f"test split, mean (min-max) over seeds {args.seeds}; rates in %; claims/cap: "
          "colour-shape pairs stated per caption")
    header = f"{'model':12s} | {'CIDEr-D':21s} | " + " | ".join(f"{lab:21s}" for lab, _ in RATES)
    print(header)
    print("-" * len(header))
    if baseline:
        rates = rates_of(baseline)
        print(f"{'biggest':12s} | {baseline['scores']['CIDEr']:<21.3f} | " + " | ".join(
            f"{row([rates.get(key)], key != 'claims_per_caption'):21s}" for _, key in RATES))
    for name in names:
        runs = [results[name, s]["model"] for s in seeds]
        cells = [row([r["scores"]["CIDEr"] for r in runs])] + [
            row([rates_of(r).get(key) for r in runs], key != "claims_per_caption")
            for _, key in RATES]
        print(f"{name:12s} | " + " | ".join(f"{c:21s}" for c in cells))
    print("conflict images (biased shape, other colours only): "
          f"{results[names[0], seeds[0]]['model']['hallucination'].get('conflict_images')}")


if __name__ == "__main__":
    main()
