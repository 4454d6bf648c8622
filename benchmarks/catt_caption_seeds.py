"""The captioning confounder test at convergence: Transformer, CATT, w/o Init, Up-Down(+CATT).

Shapes world with a shape -> colour bias in train and val (`--bias`, by
default 95% of the circles red) and an unbiased test split. For each seed
(paired: the same world, `--world_seed`, for every run) five arms, each
`python -m recipes.caption train --model M --seed S` with cross-entropy
only, early stopping on the validation CIDEr-D of greedy captions (every 250
steps, patience 4, the best checkpoint kept) and a time cap:

- `transformer`: the CATT captioner's twin (`transformer_captioner_tiny`);
- `catt`: Transformer+CATT (`catt_captioner_tiny`, K = 64 entries a
  dictionary), the dictionaries fitted by K-means over the model's
  embeddings of the training set after a 500-step warm-up
  (`--dictionary_warmup`, docs/catt_attention.md);
- `catt_noinit`: the same with the uniform(0, 0.01) dictionaries of the
  released code, the paper's "w/o Init" (Table 6);
- `butd`, `butd_catt`: Up-Down and Up-Down+CATT (K = 64), fitted alike.

Each run is scored on the test split with beam 3 (`recipes.caption
evaluate`): CIDEr-D, fact F1 (`keras_structattn.data.shapes_world.claims`),
the colour probe (`keras_structattn.tasks.captioning.bias_probe`:
teacher-forced log p(true colour) - log p(biased colour) at the colour word
before the biased shape on the conflict images, and the share of those
positions where the biased colour is the likelier), colour-shape claims per
caption and the share of conflict images captioned with the biased pair.
The script prints per-seed numbers, each arm's mean and range, and the
paired differences (CATT - twin, CATT - w/o Init, Up-Down+CATT - Up-Down)
with a 95% bootstrap interval of their mean. The paper (Yang et al., 2021,
arXiv:2103.03493) reports +3.2 CIDEr-D for Transformer+CATT on COCO
(Table 3), -1.9 without the K-means initialisation (Table 6) and fewer
hallucinated objects (CHAIR_s 12.1 -> 9.7). A run whose `test_scores.json`
exists is reused, so a stopped comparison resumes where it was; each
finished run also goes to a ledger committed beside the results
(`--ledger`, `benchmarks/results_catt_caption_cpu_runs.json`), from which
the comparison resumes when the run folders are gone.

Usage:
    python -m benchmarks.catt_caption_seeds [--seeds 1,2,3,4,5] [--models transformer,...] \\
        [--bias circle=red:0.95] [--output_dir runs/catt_caption_seeds] [-- recipe flags]
"""

import argparse
import json
import os
import subprocess

from benchmarks._seeds import Ledger
from benchmarks._seeds import early_stopped_steps
from benchmarks._seeds import kept_scores
from benchmarks._seeds import paired_lines
from benchmarks._seeds import print_preamble
from benchmarks._seeds import train_run

LEDGER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "results_catt_caption_cpu_runs.json")
# name -> recipe flags
MODELS = {
    "transformer": ["--model", "transformer"],
    "catt": ["--model", "catt"],
    "catt_noinit": ["--model", "catt", "--dictionary_init", "uniform"],
    "butd": ["--model", "butd"],
    "butd_catt": ["--model", "butd_catt"],
}
PAIRS = (("catt", "transformer"), ("catt", "catt_noinit"), ("butd_catt", "butd"))
TRAINING = ("--train_steps", "20000", "--scst_steps", "0", "--steps_per_checkpoint", "250",
            "--early_stopping", "cider:4", "--max_minutes", "60")


def _rate(key):
    return lambda e: e["hallucination"][key]


MEASURES = (
    ("CIDEr-D", lambda e: e["scores"]["CIDEr"]),
    ("fact F1", lambda e: e["fact_f1"]),
    ("colour log-odds (true - biased)", lambda e: e["bias_probe"]["log_odds"]),
    ("biased colour likelier", lambda e: e["bias_probe"]["biased_preferred"]),
    ("colour-shape claims / caption",
     lambda e: e["hallucination"]["claims"] / max(1, e["hallucination"]["captions"])),
    ("biased pair on conflict images", _rate("biased_pair_conflict")),
    ("CHAIR_s", _rate("chair_s")),
)


def run_one(args, ledger, name, seed, world):
    """Trains and evaluates one run unless the ledger has it; returns its
    test scores, `(best step, last step)` and the dictionaries it fitted
    (None for the twins and w/o Init)."""
    done = ledger.get(f"{name}_seed{seed}")
    if done is not None:
        return done["scores"], tuple(done["steps"]), done["dictionaries"]
    out = os.path.join(args.output_dir, f"{name}_seed{seed}")
    scores_path = os.path.join(out, "test_scores.json")
    command = ["recipes.caption", "train", "--output_dir", out, *MODELS[name],
               "--seed", str(seed), "--world_seed", str(args.world_seed),
               "--world_bias", args.bias, *TRAINING, *args.recipe_flags, "--examples", "0",
               "--verbose", "0"]
    _, seconds = train_run(out, scores_path, world, command, stdout=subprocess.DEVNULL,
                           env=dict(os.environ, KERAS_BACKEND="tensorflow"))
    with open(scores_path, encoding="utf-8") as f:
        scores = json.load(f)
    best, last = early_stopped_steps(out)
    fitted = os.path.join(out, "dictionaries.json")
    dictionaries = None
    if os.path.exists(fitted):
        with open(fitted, encoding="utf-8") as f:
            dictionaries = json.load(f)["dictionaries"]
    if seconds is not None:
        print(f"# {name}_seed{seed}: {seconds:.0f} s, best step {best} of {last}",
              flush=True)
    scores = kept_scores(scores)
    ledger.put(f"{name}_seed{seed}", dict(scores=scores, steps=[best, last], seconds=seconds,
                                          dictionaries=dictionaries))
    return scores, (best, last), dictionaries


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--bias", default="circle=red:0.95")
    parser.add_argument("--world_seed", type=int, default=1)
    parser.add_argument("--output_dir", default=os.path.join("runs", "catt_caption_seeds"))
    parser.add_argument("--ledger", default=LEDGER,
                        help="the finished runs' results (JSON), kept as each run ends; "
                        "'' for none")
    parser.add_argument("recipe_flags", nargs="*", help="after --: flags for every arm")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    ledger = Ledger(args.ledger or None)
    names = args.models.split(",")
    print_preamble("catt_caption_seeds", backend="tensorflow")
    print(f"# recipe: python -m recipes.caption train --model M --seed S --world_seed "
          f"{args.world_seed} --world_bias {args.bias} {' '.join(TRAINING)} "
          f"{' '.join(args.recipe_flags)} (cross-entropy only; beam 3 on the unbiased test "
          "split)", flush=True)
    world, results, first = None, {}, None
    for seed in seeds:
        results[seed] = {}
        for name in names:
            scores, (best, last), fitted = run_one(args, ledger, name, seed, world)
            first = first or (scores if "biggest_shape" in scores else None)
            folder = os.path.join(args.output_dir, f"{name}_seed{seed}", "shapes_world")
            world = world or (folder if os.path.isdir(folder) else None)
            results[seed][name] = dict(scores["model"], best_step=best)
            usage = "" if fitted is None else "; dictionaries " + ", ".join(
                f"{d}: {v['entries_used']} entries used ({v['entries_used_per_batch']:.1f} per "
                f"batch) of {v['rows']} vectors, {v['distinct_rows']} distinct"
                for d, v in fitted.items())
            print(f"# seed {seed} {name:12s}: " + ", ".join(
                f"{label} {value(results[seed][name]):.4f}" for label, value in MEASURES)
                + f"; best step {best} of {last}{usage}", flush=True)
    model = first["model"]
    floors = {n: e for n, e in first.items() if n.startswith(("constant", "biggest"))}
    best_blind = max((n for n in floors if n.startswith("constant")),
                     key=lambda n: floors[n]["scores"]["CIDEr"])
    print(f"test split: {model['bias_probe']['images']} conflict images "
          f"({model['bias_probe']['positions']} probed colour words); floors: {best_blind} "
          f"CIDEr-D {floors[best_blind]['scores']['CIDEr']:.3f} fact F1 "
          f"{floors[best_blind]['fact_f1']:.3f}; biggest_shape CIDEr-D "
          f"{floors['biggest_shape']['scores']['CIDEr']:.3f} fact F1 "
          f"{floors['biggest_shape']['fact_f1']:.3f}")
    print(f"over seeds {args.seeds}: mean (min-max); differences paired by seed, 95% "
          "bootstrap interval of their mean")
    pairs = [(a, b) for a, b in PAIRS if a in names and b in names]
    for line in paired_lines(results, seeds, names, MEASURES, pairs):
        print(line)


if __name__ == "__main__":
    main()
