"""What the over-seeds benchmarks share: one recipe run per model and seed.

Each run trains a recipe in a subprocess, in its own folder under
`--output_dir`; a run whose result file is there already is reused, so a
rerun of the benchmark (or one extended with more seeds) only runs what is
missing. The Shapes world of the first run is copied into the others
(same sizes and `--world_seed`: the same data) instead of generated again.
"""

import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_comparison(doc, models, name, jobs=False):
    """The flags every seed comparison takes: `--seeds`, `--models` (of
    `models`), `--epochs`, `--world_seed`, `--output_dir` (runs/<name>), and
    `--jobs` with `jobs`; prints the preamble.

    Returns:
        `(args, seeds, names)`: the flags, the seeds and the model names.
    """
    import argparse

    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--models", default=",".join(models))
    parser.add_argument("--epochs", type=int, default=None,
                        help="default: the recipe's (the hparams set's epochs)")
    parser.add_argument("--world_seed", type=int, default=1)
    if jobs:
        parser.add_argument("--jobs", type=int, default=1, help="runs at a time")
    parser.add_argument("--output_dir", default=os.path.join("runs", name))
    args = parser.parse_args()
    print_preamble(name)
    return args, [int(s) for s in args.seeds.split(",")], args.models.split(",")


def ledger_parser(doc, name, ledger, seeds="1,2,3,4,5"):
    """The flags of a comparison kept in a `Ledger`: `--seeds`,
    `--world_seed`, `--output_dir` (runs/<name>), `--ledger` (default
    `ledger`) and, after `--`, recipe flags for every arm. Returns the
    parser, for the comparison's own flags."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--seeds", default=seeds)
    parser.add_argument("--world_seed", type=int, default=1)
    parser.add_argument("--output_dir", default=os.path.join("runs", name))
    parser.add_argument("--ledger", default=ledger,
                        help="the finished runs' results (JSON), kept as each run ends; "
                        "'' for none")
    parser.add_argument("recipe_flags", nargs="*", help="after --: flags for every arm")
    return parser


def seed_run(recipe, args, name, seed, flags=()):
    """The folder and `train` command of one seed of a comparison: run
    `name` (its model `flags`) with `--seed seed` on the shared world
    (`args.world_seed`), `--epochs args.epochs` if set, quietly.

    Returns:
        `(out, command)`: the run folder under `args.output_dir` and the
        arguments after `python -m`.
    """
    out = os.path.join(args.output_dir, f"{name}_seed{seed}")
    command = [f"recipes.{recipe}", "train", "--output_dir", out, *flags, "--seed", str(seed),
               "--world_seed", str(args.world_seed), "--verbose", "0"]
    if getattr(args, "epochs", None):
        command += ["--epochs", str(args.epochs)]
    return out, command


def train_run(out, done, world, command, **run_kwargs):
    """Runs one recipe's `command` (its output folder `out`) unless the file
    `done` exists.

    Args:
        out: the run folder.
        done: the file a finished run leaves (e.g. its test scores).
        world: None, or a generated Shapes world folder to copy into `out`.
        command: the recipe's arguments after `python -m`.
        **run_kwargs: for `subprocess.run` (e.g. `stdout`, `env`).

    Returns:
        `(result, seconds)`: the `subprocess.CompletedProcess` and the wall
        seconds it took; `(None, None)` for a reused run.
    """
    if os.path.exists(done):
        return None, None
    if world and not os.path.exists(os.path.join(out, "shapes_world")):
        os.makedirs(out, exist_ok=True)
        shutil.copytree(world, os.path.join(out, "shapes_world"))
    start = time.time()
    result = subprocess.run([sys.executable, "-m", *command], cwd=ROOT, check=True,
                            **run_kwargs)
    return result, time.time() - start


class Ledger:
    """A comparison's finished runs, kept in a JSON file as each ends.

    The file (`benchmarks/results_<name>_runs.json`, committed beside the
    results file) maps a run's name (`regular_seed3`) to what the comparison
    reads of it (test scores, best and last step, seconds). A run found there
    is not trained again, so a comparison stopped anywhere, its run folders
    gone with the machine, resumes from the file; each write replaces the
    file whole (a temporary file, then `os.replace`), so a kill leaves the
    last complete ledger; several processes (seeds split between cores) may
    share one file.

    Args:
        path: the JSON file, or None for no ledger (every run from its folder).
    """

    def __init__(self, path):
        self.path = path
        self.entries = {}
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                self.entries = json.load(f)

    def get(self, name):
        """The entry of run `name`, or None if it has not finished."""
        return self.entries.get(name)

    def put(self, name, entry):
        """Records run `name`'s `entry` and rewrites the file, merged with
        what other processes of the comparison (other seeds) wrote to it
        meanwhile, under a lock."""
        self.entries[name] = entry
        if not self.path:
            return
        import fcntl

        with open(f"{self.path}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if os.path.exists(self.path):
                with open(self.path, encoding="utf-8") as f:
                    self.entries = dict(json.load(f), **{name: entry})
            partial = f"{self.path}.partial"
            with open(partial, "w", encoding="utf-8") as f:
                json.dump(self.entries, f, indent=1, sort_keys=True)
                f.write("\n")
            os.replace(partial, self.path)


def kept_scores(scores):
    """What a ledger keeps of a caption run's `test_scores.json`: the model's
    entry and the floors' (constant captions, biggest shape: the same for
    every run of one world), not the oracles'."""
    return {n: e for n, e in scores.items()
            if n == "model" or n.startswith(("constant", "biggest"))}


def print_preamble(script, backend=None):
    """The first two lines of a benchmark's output: the date, machine and
    backend (`backend`, else `KERAS_BACKEND`'s), then the command line."""
    backend = backend or os.environ.get("KERAS_BACKEND", "tensorflow")
    print(f"# {datetime.date.today()} {platform.machine()} {os.cpu_count()} cores, "
          f"{platform.processor() or 'cpu'}; KERAS_BACKEND={backend}")
    print(f"# command: python -m benchmarks.{script} {' '.join(sys.argv[1:])}")


def summary(values, digits=2):
    """`mean (min-max)` of `values`, six characters each."""
    mean = sum(values) / len(values)
    return f"{mean:6.{digits}f} ({min(values):6.{digits}f}-{max(values):6.{digits}f})"


def paired_interval(differences, *, draws=10_000, level=0.95, seed=0):
    """A percentile bootstrap interval of the mean of paired differences.

    The seeds are resampled with replacement (`draws` times, a seeded
    generator, so the interval is reproducible); with few seeds the interval
    is wide and only as good as the seeds are a sample.

    Args:
        differences: per-seed differences (arm A - arm B of the same seed).
        draws: bootstrap resamples.
        level: the interval's coverage.
        seed: the resampling generator's seed.

    Returns:
        `(low, high)`.
    """
    import numpy as np

    values = np.asarray(differences, np.float64)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), (draws, len(values)))].mean(axis=1)
    tail = (1 - level) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


def paired_lines(results, seeds, arms, measures, pairs):
    """Summary lines of a comparison paired by seed.

    Args:
        results: `{seed: {arm: entry}}`.
        seeds: the seeds, in order.
        arms: the arms, in order.
        measures: `[(label, value(entry))]`.
        pairs: `[(a, b)]`: the differences `a - b` to show.

    Returns:
        Lines: per measure, the arms' `mean (min-max)`, then per pair the
        paired differences' mean (min-max), the 95% bootstrap interval of
        their mean (`paired_interval`) and the per-seed differences.
    """
    lines = []
    for label, value in measures:
        per_arm = {name: [value(results[s][name]) for s in seeds] for name in arms}
        lines.append(f"{label}: " + " | ".join(
            f"{name} {summary(v, 3)}" for name, v in per_arm.items()))
        for a, b in pairs:
            differences = [x - y for x, y in zip(per_arm[a], per_arm[b])]
            low, high = paired_interval(differences)
            lines.append(f"  {a + ' - ' + b:24s} {summary(differences, 3)} [{low:+.3f}, "
                         f"{high:+.3f}] | per seed " + ", ".join(f"{d:+.3f}" for d in differences))
    return lines


def seed_line(seed, results, arms, measures):
    """One seed's line: each measure of each arm, then each arm's best and
    last step (`results[seed][arm]["steps"]`, `early_stopped_steps`)."""
    row = results[seed]
    return (f"# seed {seed}: " + "; ".join(
        f"{label} " + " ".join(f"{n} {value(row[n]):.4f}" for n in arms)
        for label, value in measures) + "; best step of last " + " ".join(
        f"{n} {row[n]['steps'][0]}/{row[n]['steps'][1]}" for n in arms))


def early_stopped_steps(out, history="history.csv", best="best.json"):
    """`(best step, last step)` of a run trained with `--early_stopping`:
    the step of its best checkpoint and the last step it trained (the
    history's last row), for the results file to show that it stopped
    early rather than at a cap."""
    import csv
    import json

    with open(os.path.join(out, best), encoding="utf-8") as f:
        best_step = json.load(f)["step"]
    with open(os.path.join(out, history), encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    return best_step, int(float(rows[-1]["step"]))
