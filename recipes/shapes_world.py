"""Generates Shapes world and writes it in the real formats.

Shapes world (`keras_structattn.data.shapes_world`) is the generated default
data of the captioning, VQA, grounding and TextVQA recipes: scenes of
coloured shapes and text signs with captions, VQA questions, referring
expressions and TextVQA questions. This recipe writes the files and prints
a report (sizes, retried / skipped items, answers per question type,
timing and, with `--baselines`, the trivial baselines every recipe must
beat) on stdout.

Usage:
    python -m recipes.shapes_world                # writes data/shapes_world
    python -m recipes.shapes_world --output_dir /tmp/sw --task vqa,refs \\
        --train 500 --val 100 --test 100 --seed 1 --bias circle=red:0.9 --baselines

Errors are one line on stderr (exit status 2 for a bad command line, 1 for
a failure; `--debug` for the traceback).
"""

import argparse
import json
import os
import time

from recipes import _cli

TASKS = ("captions", "vqa", "refs", "textvqa")


def _tasks(text):
    if text == "all":
        return "all"
    tasks = [t for t in text.split(",") if t]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown or not tasks:
        raise argparse.ArgumentTypeError(
            f"expected all or a comma-separated list of {', '.join(TASKS)}; got {text!r}")
    return tasks


def build_parser():
    """The recipe's flags."""
    parser = _cli.ArgumentParser(__doc__, prog="python -m recipes.shapes_world")
    parser.add_argument("--output_dir", default="data/shapes_world", type=_cli.output_folder,
                        help="output folder (default: data/shapes_world)")
    parser.add_argument(
        "--task", default="all", type=_tasks,
        help="captions, vqa, refs, textvqa, a comma-separated list of them, or all")
    for split, scenes in (("train", 2000), ("val", 500), ("test", 500)):
        parser.add_argument(f"--{split}", type=_cli.non_negative_int, default=scenes,
                            help=f"{split} scenes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--canvas", type=_cli.positive_int, default=64,
                        help="image side in pixels (>= 32)")
    parser.add_argument("--min_objects", type=_cli.positive_int, default=2)
    parser.add_argument("--max_objects", type=_cli.positive_int, default=8)
    parser.add_argument("--max_signs", type=_cli.non_negative_int, default=3)
    parser.add_argument("--grid", type=_cli.positive_int, default=8,
                        help="grid feature cells per side")
    parser.add_argument("--answer_noise", type=_cli.unit_interval, default=0.15)
    parser.add_argument("--ocr_noise", type=_cli.unit_interval, default=0.0)
    parser.add_argument("--bias", default=None,
                        help="SHAPE=COLOR[:STRENGTH][@SPLIT,...], e.g. circle=red:0.9 "
                        "(train and val biased, test not)")
    parser.add_argument("--png", action="store_true", help="also write PNG images")
    parser.add_argument("--baselines", action="store_true", help="print the trivial baselines")
    return parser


def run(args):
    """Generates and writes the world; returns the summary dict."""
    from keras_structattn.data import shapes_world

    start = time.perf_counter()
    # The generator checks what the flags cannot (object counts against each
    # other, the bias string): its ValueErrors are usage errors.
    world = _cli.usage(lambda: shapes_world.generate(
        args.train, args.val, args.test, tasks=args.task, seed=args.seed,
        canvas_size=args.canvas, min_objects=args.min_objects, max_objects=args.max_objects,
        max_signs=args.max_signs, grid_size=args.grid, answer_noise=args.answer_noise,
        ocr_noise=args.ocr_noise, bias=args.bias))
    written = shapes_world.write(world, args.output_dir, png=args.png)
    total = time.perf_counter() - start
    summary = shapes_world.summarize(world)
    baselines = shapes_world.trivial_baselines(world) if args.baselines else None
    _cli.emit(shapes_world.format_report(summary, baselines))
    files = sum(len(v) for v in written.values())
    _cli.emit(f"  wrote {files} files under {args.output_dir} "
              f"({total - world.seconds:.1f} s writing, {total:.1f} s in all)")
    if baselines is not None:
        with open(os.path.join(args.output_dir, "baselines.json"), "w", encoding="utf-8") as f:
            json.dump(baselines, f, indent=1)
    return {"summary": summary, "baselines": baselines, "files": written}


def main(argv=None):
    """Runs the recipe; returns the summary dict (also in manifest.json)."""
    return _cli.execute(build_parser(), argv, run)


if __name__ == "__main__":
    _cli.entry_point(main)
