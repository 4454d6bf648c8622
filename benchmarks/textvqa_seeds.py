"""SA-M4C against M4C on Shapes world TextVQA, at convergence, paired by seed.

Kant et al. (2020, arXiv:2007.12146, Table 2) report that SA-M4C (2 plain +
4 spatially aware layers) beats M4C† 6N, an M4C of the same depth and
parameters (+1.1 accuracy on TextVQA val), and that the same layers on a
random graph lose that gain. This comparison runs the four arms of that
table at `m4c_tiny`'s size (d 96, 12 heads of 8):

- `m4c`: `m4c_tiny`, M4C's own 4 plain layers (Hu et al., 2020,
  arXiv:1911.06258);
- `m4c_6n`: `m4c_6n_tiny`, 6 plain layers: the paper's baseline;
- `sa_m4c`: `sa_m4c_tiny`, 2 plain + 4 spatial layers (c = 3);
- `sa_m4c_random`: the same on a random graph (`--graph random`).

Every run is `python -m recipes.textvqa train` on one world shared by every
run (`--world_seed`), whose question relations are not the graph's and
whose graph is built from jittered, detector-like boxes (docs/textvqa.md),
with the same targets for every arm, early stopping on the validation
TextVQA accuracy (patience 6 epochs, the best checkpoint kept) and a time
cap of 7 minutes (`TRAINING`), on a world of 1,000 training scenes
(`WORLD`). Each run is scored on the test split: TextVQA accuracy
overall, on the OCR answers, on the `direction` and `written_on`
questions. The script prints per-seed numbers, the floors ("first OCR
token", majority answer of the type), each arm's mean and range, and the
paired differences with a 95% bootstrap interval of their mean. A run whose
table is in its folder is reused; each finished run also goes to a ledger
committed beside the results (`--ledger`,
`benchmarks/results_textvqa_cpu_runs.json`), so a stopped comparison
resumes from it when the run folders are gone; two processes with other
`--seeds` may share it (one per core).

Usage:
    python -m benchmarks.textvqa_seeds [--seeds 1,2,3,4,5] \\
        [--arms m4c,m4c_6n,sa_m4c,sa_m4c_random] [--output_dir runs/textvqa_seeds] \\
        [-- more recipe flags for every arm]
"""

import os
import subprocess

from benchmarks._seeds import Ledger
from benchmarks._seeds import early_stopped_steps
from benchmarks._seeds import ledger_parser
from benchmarks._seeds import paired_lines
from benchmarks._seeds import print_preamble
from benchmarks._seeds import seed_line
from benchmarks._seeds import train_run

LEDGER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "results_textvqa_cpu_runs.json")
ARMS = {
    "m4c": ["--model", "m4c", "--hparams_set", "m4c_tiny"],
    "m4c_6n": ["--model", "m4c", "--hparams_set", "m4c_6n_tiny"],
    "sa_m4c": ["--model", "sa_m4c", "--hparams_set", "sa_m4c_tiny"],
    "sa_m4c_random": ["--model", "sa_m4c", "--hparams_set", "sa_m4c_tiny",
                      "--graph", "random"],
}
# A smaller world than the recipe's 4,500 training scenes, so that 20 runs
# fit in about an hour on 2 cores: on 1,000 scenes (1.7k questions, 54
# steps an epoch) the plain arms stop on patience within minutes, and the
# `direction` and `written_on` questions, the spatial ones, are still half
# of the test split. The 7-minute cap is short for SA-M4C: 4 of its 5 runs
# of 2026-12-02 ended there, still learning (docs/textvqa.md, "Results").
WORLD = ("--world_train", "1000")
TRAINING = ("--epochs", "400", "--early_stopping", "accuracy:6", "--max_minutes", "7")
ROWS = ("overall", "[ocr]", "[vocab]", "direction", "written_on")
PAIRS = (("sa_m4c", "m4c_6n"), ("sa_m4c", "sa_m4c_random"), ("m4c_6n", "m4c"))


def parse_table(stdout):
    """`{row: {"acc", "anls", "majority_acc", ..., "questions"}}` from the
    recipe's result table (its stdout)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    header = lines[0].split()
    titles = header[3::4]  # "model acc model anls majority acc majority anls ..."
    table = {}
    for line in lines[1:]:
        cells = line.split()
        values = [float(v) for v in cells[2:]]
        row = {"questions": int(cells[1])}
        for k, title in enumerate(titles):
            prefix = "" if title == "model" else f"{title}_"
            row[f"{prefix}acc"], row[f"{prefix}anls"] = values[2 * k], values[2 * k + 1]
        table[cells[0]] = row
    return table


def run_arm(args, ledger, name, seed, world):
    """Trains and evaluates one arm of one seed unless the ledger has it;
    returns its ledger entry `{"table", "steps": [best, last], "seconds"}`."""
    key = f"{name}_seed{seed}"
    done = ledger.get(key)
    if done is not None:
        return done
    out = os.path.join(args.output_dir, key)
    table_path = os.path.join(out, "result_table.txt")
    command = ["recipes.textvqa", "train", "--output_dir", out, *ARMS[name],
               "--seed", str(seed), "--world_seed", str(args.world_seed), *WORLD, *TRAINING,
               *args.recipe_flags, "--verbose", "0"]
    # The recipe prints the table on stdout; the run keeps it as its result.
    result, seconds = train_run(out, table_path, world, command, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    if result is not None:
        with open(table_path, "w", encoding="utf-8") as f:
            f.write(result.stdout)
    with open(table_path, encoding="utf-8") as f:
        table = parse_table(f.read())
    best, last = early_stopped_steps(out)
    if seconds is not None:
        print(f"# {key}: {seconds:.0f} s, best step {best} of {last}", flush=True)
    entry = dict(table=table, steps=[best, last], seconds=seconds)
    ledger.put(key, entry)
    return entry


def _accuracy(row):
    return lambda entry: entry["table"][row]["acc"]


MEASURES = (("accuracy", _accuracy("overall")), ("OCR answers", _accuracy("[ocr]")),
            ("direction", _accuracy("direction")), ("written_on", _accuracy("written_on")))


def floor_line(table):
    """The floors of the test split (the same for every run of one world)."""
    return "floors (test accuracy %): " + "; ".join(
        f"{floor} " + ", ".join(f"{row} {table[row][f'{floor}_acc']:.2f}" for row in ROWS)
        for floor in ("first_ocr", "majority"))


def main():
    parser = ledger_parser(__doc__, "textvqa_seeds", LEDGER)
    parser.add_argument("--arms", default=",".join(ARMS))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    arms = args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        parser.error(f"unknown arms {unknown}; choose from {list(ARMS)}")
    ledger = Ledger(args.ledger or None)
    print_preamble("textvqa_seeds")
    print(f"# arms: python -m recipes.textvqa train ARM --seed S --world_seed "
          f"{args.world_seed} {' '.join(WORLD + TRAINING)} {' '.join(args.recipe_flags)}; ARM: "
          + "; ".join(f"{n}: {' '.join(f)}" for n, f in ARMS.items() if n in arms)
          + "; Shapes world 1000/150/400 images, test split", flush=True)
    world, results = None, {}
    for seed in seeds:
        results[seed] = {}
        for name in arms:
            results[seed][name] = run_arm(args, ledger, name, seed, world)
            folder = os.path.join(args.output_dir, f"{name}_seed{seed}", "shapes_world")
            world = world or (folder if os.path.isdir(folder) else None)
        print(seed_line(seed, results, arms, MEASURES), flush=True)
    print(f"test split, over seeds {args.seeds}: mean (min-max); differences paired by seed, "
          "95% bootstrap interval of their mean")
    print(floor_line(results[seeds[0]][arms[0]]["table"]))
    pairs = [(a, b) for a, b in PAIRS if a in arms and b in arms]
    for line in paired_lines(results, seeds, arms, MEASURES, pairs):
        print(line)


if __name__ == "__main__":
    main()
