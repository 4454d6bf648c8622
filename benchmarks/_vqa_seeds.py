"""What the VQA comparisons at convergence share: one arm's run, its scores
by question group, and the comparison's loop and summary.

Each arm of each seed is `python -m recipes.vqa train` (a subprocess, its
own folder under `--output_dir`, TensorFlow) on one Shapes world shared by
every run (`--world_seed`; the first run's world is copied into the
others), trained to convergence: `TRAINING`, i.e. up to 96 epochs with
early stopping on the validation split's official VQA accuracy (checked
every epoch; patience 12 epochs; the best checkpoint is kept and scored on
the test split) and an hour's cap. The hparams' schedule (48 epochs for the
tiny MCAN pair and `muan_d128*`: warm-up 4, the rate x0.2 at epochs 37 and
44) runs unchanged; the epochs beyond it stay at its last rate, so a run
still learning at 48 goes on, and the patience is longer than the gaps
between the schedule's steps, so a run does not stop on the plateau before
a decay.

The test split's per-question accuracies (`test_scores.json`'s official
`perQuestion`, and the majority baseline's, `test_baseline_scores.json`)
are averaged over groups of questions (`question_groups`): every question,
each question type, relation questions by form (yes/no, what-shape,
what-colour: `keras_structattn.data.shapes_world.vqa.relation_form`) and,
on a confounded world, the bias-conflict questions and the others, overall
and per type. What a comparison reads of a run (those group accuracies,
the model's and the baseline's, the best and last step, the seconds) goes
to a JSON ledger committed beside the results file (`_seeds.Ledger`), so a
stopped comparison resumes from it when the run folders are gone.
"""

import argparse
import collections
import json
import os
import subprocess

from benchmarks._seeds import Ledger
from benchmarks._seeds import early_stopped_steps
from benchmarks._seeds import paired_lines
from benchmarks._seeds import print_preamble
from benchmarks._seeds import train_run

TRAINING = ("--epochs", "96", "--early_stopping", "accuracy:12", "--max_minutes", "60")
TYPES = ("count", "color", "shape", "exist", "relation")


def question_groups(questions, annotations):
    """`{question_id: [group, ...]}` of a VQA split: "overall",
    "type/<question type>", "form/<relation form>" for relation questions,
    and with `bias_conflict` annotations "conflict" or "others" and
    "conflict/<type>" or "others/<type>".

    Args:
        questions: the questions JSON (`{"questions": [...]}`).
        annotations: the annotations JSON (`{"annotations": [...]}`).
    """
    from keras_structattn.data.shapes_world.vqa import relation_form

    text = {q["question_id"]: q["question"] for q in questions["questions"]}
    groups = {}
    for a in annotations["annotations"]:
        kind, qid = a["question_type"], a["question_id"]
        names = ["overall", f"type/{kind}"]
        if kind == "relation":
            names.append(f"form/{relation_form(text[qid])}")
        if a.get("bias_conflict") is not None:
            side = "conflict" if a["bias_conflict"] else "others"
            names += [side, f"{side}/{kind}"]
        groups[qid] = names
    return groups


def grouped_accuracy(per_question, groups):
    """`{group: mean accuracy (%)}` of `per_question` (`{question_id: %}`,
    keys int or str as JSON leaves them) over `question_groups`' groups,
    plus `{group}_questions` counts under the key "questions"."""
    values = collections.defaultdict(list)
    for qid, names in groups.items():
        accuracy = per_question[qid] if qid in per_question else per_question[str(qid)]
        for name in names:
            values[name].append(float(accuracy))
    return ({name: sum(v) / len(v) for name, v in sorted(values.items())},
            {name: len(v) for name, v in sorted(values.items())})


def run_scores(out, split="test"):
    """The group accuracies of a finished run folder: `{"model": {...},
    "baseline": {...}, "questions": {group: count}}`."""
    def read(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    vqa = os.path.join(out, "shapes_world", "vqa")
    groups = question_groups(read(os.path.join(vqa, f"questions_{split}.json")),
                             read(os.path.join(vqa, f"annotations_{split}.json")))
    model, counts = grouped_accuracy(read(os.path.join(out, f"{split}_scores.json"))
                                     ["perQuestion"], groups)
    baseline, _ = grouped_accuracy(read(os.path.join(out, f"{split}_baseline_scores.json"))
                                   ["perQuestion"], groups)
    return {"model": model, "baseline": baseline, "questions": counts}


def run_arm(args, ledger, name, seed, flags, world):
    """Trains and scores one arm of one seed unless the ledger has it;
    returns its ledger entry (`run_scores` plus `steps` [best, last] and
    `seconds`)."""
    done = ledger.get(f"{name}_seed{seed}")
    if done is not None:
        return done
    out = os.path.join(args.output_dir, f"{name}_seed{seed}")
    command = ["recipes.vqa", "train", "--output_dir", out, *flags, "--seed", str(seed),
               "--world_seed", str(args.world_seed), *args.world_flags, *args.training,
               *args.recipe_flags, "--verbose", "0"]
    _, seconds = train_run(out, os.path.join(out, "test_scores.json"), world, command,
                           stdout=subprocess.DEVNULL,
                           env=dict(os.environ, KERAS_BACKEND="tensorflow"))
    best, last = early_stopped_steps(out)
    entry = dict(run_scores(out), steps=[best, last], seconds=seconds)
    if seconds is not None:
        print(f"# {name}_seed{seed}: {seconds:.0f} s, best step {best} of {last}", flush=True)
    ledger.put(f"{name}_seed{seed}", entry)
    return entry


def baseline_line(entry, groups):
    """The majority baseline's accuracy per group (`[(label, group)]`), one
    line (relation forms: the relation type's one majority answer, so 0 on
    the forms it cannot answer)."""
    return ("baseline (the majority answer of the question's type in the training split): "
            + ", ".join(f"{label} {entry['baseline'][g]:.2f} ({entry['questions'][g]} questions)"
                        for label, g in groups if g in entry["baseline"]))


def compare(script, doc, arms, pairs, groups, *, ledger, world_flags=(), seeds="1,2,3,4,5",
            training=TRAINING, argv=None):
    """A comparison's command line, loop and summary.

    Args:
        script: the benchmark's module name (`pa_vqa_seeds`), for the
            preamble and the default `--output_dir` (runs/<script>).
        doc: its docstring (the first line: `--help`'s description).
        arms: `{name: recipe flags}`, in order.
        pairs: `[(a, b)]`: the paired differences `a - b` to show.
        groups: `[(label, group)]`: the measures (`question_groups`' names),
            the primary first.
        ledger: the default ledger file.
        world_flags: the `--world_*` flags of every run (the world).
        seeds: the default `--seeds`.
        training: the budget flags of every run (`TRAINING`).
        argv: the arguments (default `sys.argv[1:]`).

    Returns:
        `{seed: {arm: ledger entry}}`.
    """
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--seeds", default=seeds)
    parser.add_argument("--models", default=",".join(arms))
    parser.add_argument("--world_seed", type=int, default=1)
    parser.add_argument("--output_dir", default=os.path.join("runs", script))
    parser.add_argument("--ledger", default=ledger,
                        help="the finished runs' results (JSON), kept as each run ends; "
                        "'' for none")
    parser.add_argument("recipe_flags", nargs="*",
                        help="after --: flags for every arm (e.g. --epochs 1 for a smoke run)")
    args = parser.parse_args(argv)
    args.world_flags, args.training = list(world_flags), list(training)
    seed_list = [int(s) for s in args.seeds.split(",")]
    names = args.models.split(",")
    book = Ledger(args.ledger or None)
    print_preamble(script, backend="tensorflow")
    print(f"# arms: python -m recipes.vqa train FLAGS --seed S --world_seed {args.world_seed} "
          f"{' '.join(args.world_flags + args.training + args.recipe_flags)}; FLAGS: "
          + "; ".join(f"{n}: {' '.join(arms[n])}" for n in names), flush=True)
    world, results = None, {}
    for seed in seed_list:
        results[seed] = {}
        for name in names:
            entry = run_arm(args, book, name, seed, arms[name], world)
            folder = os.path.join(args.output_dir, f"{name}_seed{seed}", "shapes_world")
            world = world or (folder if os.path.isdir(folder) else None)
            results[seed][name] = entry
            best, last = entry["steps"]
            print(f"# seed {seed} {name:14s}: " + ", ".join(
                f"{label} {entry['model'][g]:.2f}" for label, g in groups
                if g in entry["model"]) + f"; best step {best} of {last}", flush=True)
    first = results[seed_list[0]][names[0]]
    present = [(label, g) for label, g in groups if g in first["model"]]
    print(baseline_line(first, present))
    print(f"test accuracy (%), over seeds {args.seeds}: mean (min-max); differences paired "
          "by seed, 95% bootstrap interval of their mean")
    measures = [(label, lambda e, g=g: e["model"][g]) for label, g in present]
    pairs = [(a, b) for a, b in pairs if a in names and b in names]
    for line in paired_lines(results, seed_list, names, measures, pairs):
        print(line)
    return results


def type_groups(forms=True):
    """`[(label, group)]`: overall, each question type, and the relation
    forms."""
    out = [("overall", "overall")] + [(t, f"type/{t}") for t in TYPES]
    if forms:
        out += [(f"relation {f}", f"form/{f}") for f in ("yes_no", "what_shape", "what_color")]
    return out

