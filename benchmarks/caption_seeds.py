"""Area attention against regular attention in captioning, at convergence, paired by seed.

Li et al. (2019, arXiv:1810.10126, Sec. 4.3, Table 5) report that area
attention over rectangles of grid cells improves a Transformer captioner
(COCO40 CIDEr 1.032 -> 1.060; 3x3 best on Flickr). This comparison runs
where the mechanism can matter: Shapes world's `large_objects` layout
(`--world_layout large_objects`: 2-4 shapes, large ones 3-5 cells of the
8x8 feature grid a side, captions stating the size, colour and shape of
each shape they name and relations between them; docs/captioning.md, "Area
vs regular attention"). For each seed, three arms:

- `regular`: `captioner_tiny` (2 + 2 layers of 128, 4 heads);
- `area2x2`, `area3x3`: the same with area attention over rectangles of up
  to 2x2 / 3x3 cells in the first of the two layers (encoder
  self-attention and caption-to-image attention), where the paper puts
  it (the first 2 of 6 layers), mean keys and summed values (Eq. 3-4).

Every run is `python -m recipes.caption train` with cross-entropy only
(the paper's training), early stopping on the validation CIDEr-D of greedy
captions (checked every 250 steps, patience 4, the best checkpoint kept)
and a time cap, on one world shared by every run (`--world_seed`); each run
is scored on the 500 test images with beam 3: CIDEr-D, fact F1 and the
precision of its size and shape claims (`keras_structattn.data.shapes_world
.claims`). The script prints per-seed numbers, each arm's mean and range,
and the differences to `regular` paired by seed with a 95% bootstrap
interval of their mean. A run whose `test_scores.json` exists is reused, so
a stopped comparison resumes where it was; each finished run's scores also
go to a ledger committed beside the results (`--ledger`,
`benchmarks/results_caption_area_cpu_runs.json`), so the comparison
resumes from it when the run folders are gone.

Usage:
    python -m benchmarks.caption_seeds [--seeds 1,2,3,4,5] \\
        [--output_dir runs/caption_seeds] [-- more recipe flags for every arm]
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
from benchmarks._seeds import seed_line
from benchmarks._seeds import train_run

LEDGER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "results_caption_area_cpu_runs.json")
ARMS = {"regular": "captioner_tiny", "area2x2": "captioner_tiny_area2x2",
        "area3x3": "captioner_tiny_area3x3"}
TRAINING = ("--world_layout", "large_objects", "--train_steps", "20000", "--scst_steps", "0",
            "--steps_per_checkpoint", "250", "--early_stopping", "cider:4",
            "--max_minutes", "60")


def _category(name, key):
    return lambda e: e["facts"][f"{name}_{key}"]


MEASURES = (("CIDEr-D", lambda e: e["scores"]["CIDEr"]), ("fact F1", lambda e: e["fact_f1"]),
            ("size precision", _category("size", "precision")),
            ("shape precision", _category("shape", "precision")),
            ("relation precision", _category("relation", "precision")))


def run_arm(args, ledger, name, seed, world):
    """Trains and evaluates one arm of one seed unless the ledger has it;
    returns `(test scores, (best step, last step))`."""
    done = ledger.get(f"{name}_seed{seed}")
    if done is not None:
        return done["scores"], tuple(done["steps"])
    out = os.path.join(args.output_dir, f"{name}_seed{seed}")
    scores_path = os.path.join(out, "test_scores.json")
    command = ["recipes.caption", "train", "--output_dir", out, "--model", "area",
               "--hparams_set", ARMS[name], "--seed", str(seed),
               "--world_seed", str(args.world_seed), *TRAINING, *args.recipe_flags,
               "--examples", "0", "--verbose", "0"]
    _, seconds = train_run(out, scores_path, world, command, stdout=subprocess.DEVNULL)
    with open(scores_path, encoding="utf-8") as f:
        scores = json.load(f)
    best, last = early_stopped_steps(out)
    if seconds is not None:
        print(f"# {name}_seed{seed}: {seconds:.0f} s, best step {best} of {last}",
              flush=True)
    scores = kept_scores(scores)
    ledger.put(f"{name}_seed{seed}", dict(scores=scores, steps=[best, last], seconds=seconds))
    return scores, (best, last)


def floor_lines(scores):
    """The floors of the first run's test split, one line."""
    floors = {n: e for n, e in scores.items() if n != "model"}
    blind = {n: e for n, e in floors.items() if n.startswith("constant")}
    best_blind = max(blind, key=lambda n: blind[n]["scores"]["CIDEr"])
    best_f1 = max(blind, key=lambda n: blind[n]["fact_f1"])
    return [f"floors: {best_blind} CIDEr-D {blind[best_blind]['scores']['CIDEr']:.3f}; "
            f"{best_f1} fact F1 {blind[best_f1]['fact_f1']:.3f}; biggest_shape CIDEr-D "
            f"{floors['biggest_shape']['scores']['CIDEr']:.3f}, fact F1 "
            f"{floors['biggest_shape']['fact_f1']:.3f}"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--world_seed", type=int, default=1)
    parser.add_argument("--output_dir", default=os.path.join("runs", "caption_seeds"))
    parser.add_argument("--ledger", default=LEDGER,
                        help="the finished runs' results (JSON), kept as each run ends; "
                        "'' for none")
    parser.add_argument("recipe_flags", nargs="*", help="after --: flags for every arm")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    ledger = Ledger(args.ledger or None)
    print_preamble("caption_seeds")
    print(f"# arms: python -m recipes.caption train --model area --hparams_set SET --seed S "
          f"--world_seed {args.world_seed} {' '.join(TRAINING)} {' '.join(args.recipe_flags)}"
          f"; SET: " + ", ".join(f"{n} {s}" for n, s in ARMS.items())
          + "; test split (500 images), beam 3", flush=True)
    world, results, first = None, {}, None
    for seed in seeds:
        results[seed] = {}
        for name in ARMS:
            scores, steps = run_arm(args, ledger, name, seed, world)
            first = first or (scores if "biggest_shape" in scores else None)
            folder = os.path.join(args.output_dir, f"{name}_seed{seed}", "shapes_world")
            world = world or (folder if os.path.isdir(folder) else None)
            results[seed][name] = dict(scores["model"], steps=steps)
        print(seed_line(seed, results, ARMS, MEASURES), flush=True)
    print(f"test split, over seeds {args.seeds}: mean (min-max); differences paired by seed, "
          "95% bootstrap interval of their mean")
    for line in floor_lines(first) + paired_lines(
            results, seeds, list(ARMS), MEASURES, [("area2x2", "regular"),
                                                  ("area3x3", "regular")]):
        print(line)


if __name__ == "__main__":
    main()
