"""TextVQA on Shapes world over seeds: M4C vs SA-M4C vs SA-M4C on a random graph.

Runs the TextVQA recipe (`python -m recipes.textvqa train`, one subprocess
per run, each in its own run folder under `--output_dir`) for each seed and
each model with the recipe's defaults otherwise (the embedded default run),
and prints the test TextVQA accuracy and ANLS (%) overall, on the OCR-answer
questions, and on the `direction` questions (the sign in a spatial relation
to a shape, where the graph should matter): mean and range (min-max) over
the seeds, then every run. The world is generated once and shared
(`--world_seed`: the same data for every run; the seed changes the
initialisation, dropout, batch order and answer sequences drawn).

Usage:
    python -m benchmarks.textvqa_seeds [--seeds 1,2,3] [--models m4c,sa_m4c,sa_m4c_random] \\
        [--output_dir runs/textvqa_seeds] [--epochs N] [--jobs 1]
"""

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

from benchmarks._seeds import parse_comparison
from benchmarks._seeds import seed_run
from benchmarks._seeds import summary
from benchmarks._seeds import train_run

MODELS = {
    "m4c": ["--model", "m4c"],
    "sa_m4c": ["--model", "sa_m4c"],
    "sa_m4c_random": ["--model", "sa_m4c", "--graph", "random"],
}
ROWS = ("overall", "[ocr]", "[vocab]", "direction", "written_on")


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


def run_one(args, name, seed, world):
    """Trains and evaluates one run; returns `(table, seconds)`."""
    out, command = seed_run("textvqa", args, name, seed, MODELS[name])
    table_path = os.path.join(out, "result_table.txt")
    # The recipe prints the table; the benchmark keeps it as the run's result.
    result, seconds = train_run(out, table_path, world, command, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    if result is not None:
        with open(table_path, "w", encoding="utf-8") as f:
            f.write(result.stdout)
    with open(table_path, encoding="utf-8") as f:
        return parse_table(f.read()), seconds


def main():
    args, seeds, names = parse_comparison(__doc__, MODELS, "textvqa_seeds", jobs=True)
    print("# recipe: python -m recipes.textvqa train --model M [--graph random] --seed S "
          "(Shapes world 1500/150/400 images, the recipe's defaults)", flush=True)
    # The first run generates the world; the others copy it.
    first, world = (names[0], seeds[0]), None
    results = {first: run_one(args, *first, None)}
    world = os.path.join(args.output_dir, f"{first[0]}_seed{first[1]}", "shapes_world")
    rest = [(n, s) for s in seeds for n in names if (n, s) != first]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for key, result in zip(rest, pool.map(lambda k: run_one(args, *k, world), rest)):
            results[key] = result
    for seed in seeds:
        for name in names:
            table, seconds = results[name, seed]
            took = f" ({seconds:.0f} s)" if seconds else ""
            print(f"# seed {seed} {name:14s}: accuracy {table['overall']['acc']:.2f}, ANLS "
                  f"{table['overall']['anls']:.2f}, direction {table['direction']['acc']:.2f}"
                  f"{took}", flush=True)
    tables = {key: table for key, (table, _) in results.items()}
    reference = tables[first]
    print(f"test TextVQA accuracy / ANLS (%), mean (min-max) over seeds {args.seeds}; "
          "questions per row: " + ", ".join(f"{r} {reference[r]['questions']}" for r in ROWS))
    header = f"{'model':14s} {'metric':6s} | " + " | ".join(f"{r:21s}" for r in ROWS)
    print(header)
    print("-" * len(header))
    for baseline in ("majority", "first_ocr"):
        for metric in ("acc", "anls"):
            cells = [f"{reference[r][f'{baseline}_{metric}']:6.2f}" for r in ROWS]
            print(f"{baseline:14s} {metric:6s} | " + " | ".join(f"{c:21s}" for c in cells))
    for name in names:
        for metric in ("acc", "anls"):
            cells = [summary([tables[name, s][r][metric] for s in seeds]) for r in ROWS]
            print(f"{name:14s} {metric:6s} | " + " | ".join(cells))
    print("overall accuracy per run (seed order):")
    for name in names:
        print(f"  {name:14s}: " + ", ".join(f"{tables[name, s]['overall']['acc']:.2f}"
                                              for s in seeds))
    if "m4c" in names:
        for name in names:
            if name != "m4c":
                deltas = [tables[name, s]["overall"]["acc"] - tables["m4c", s]["overall"]["acc"]
                          for s in seeds]
                print(f"  {name} - m4c, paired by seed: "
                      + ", ".join(f"{d:+.2f}" for d in deltas))


if __name__ == "__main__":
    main()
