"""Generates Shapes world and writes it in the real formats.

Shapes world (`keras_structattn.data.shapes_world`) is the embedded default
data of the captioning, VQA, grounding and TextVQA recipes: generated
scenes of coloured shapes and text signs with captions, VQA questions,
referring expressions and TextVQA questions. This recipe writes the files
(layout in `keras_structattn.data.shapes_world.writers`) and prints a short
report: sizes, retried / skipped items, answer distributions per question
type, timing and, with `--baselines`, the trivial baselines every recipe
must beat.

Usage:
    python -m recipes.shapes_world                # writes data/shapes_world
    python -m recipes.shapes_world --output_dir /tmp/sw --task vqa,refs \\
        --train 500 --val 100 --test 100 --seed 1 --bias circle=red:0.9 --baselines

The report is the result (stdout); errors are one line on stderr (exit
status 2 for a bad command line, 1 for a failure; `--debug` for the
traceback). The generator checks the values the flags cannot (object counts
against each other, the bias string) and names the argument.
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
            f"expected all or a comma-separated list of {', '.join(TASKS)}; got {text!r}"
        )
    return tasks


def build_parser():
    parser = _cli.ArgumentParser(
        prog="python -m recipes.shapes_world",
        description=__doc__.split("\n")[0],
        epilog=__doc__.split("\n", 1)[1],
    )
    parser.add_argument("--output_dir", default="data/shapes_world", type=_cli.output_folder,
                        help="output folder (default: data/shapes_world)")
    parser.add_argument(
        "--task", default="all", type=_tasks,
        help="captions, vqa, refs, textvqa, a comma-separated list of them, or all",
    )
    parser.add_argument("--train", type=_cli.non_negative_int, default=2000,
                        help="train scenes")
    parser.add_argument("--val", type=_cli.non_negative_int, default=500, help="val scenes")
    parser.add_argument("--test", type=_cli.non_negative_int, default=500, help="test scenes")
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
    parser.add_argument(
        "--bias", default=None,
        help=(
            "SHAPE=COLOR[:STRENGTH][@SPLIT,...], e.g. circle=red:0.9 "
            "(train and val biased, test not)"
        ),
    )
    parser.add_argument("--png", action="store_true", help="also write PNG images")
    parser.add_argument("--baselines", action="store_true", help="print the trivial baselines")
    return parser


def run(args):
    """Generates and writes the world; returns the summary dict."""
    from keras_structattn.data import shapes_world

    start = time.perf_counter()
    try:
        world = shapes_world.generate(
            args.train, args.val, args.test,
            tasks=args.task, seed=args.seed, canvas_size=args.canvas,
            min_objects=args.min_objects, max_objects=args.max_objects,
            max_signs=args.max_signs, grid_size=args.grid,
            answer_noise=args.answer_noise, ocr_noise=args.ocr_noise, bias=args.bias,
        )
    except ValueError as error:  # the generator's argument checks: flags that do not fit
        raise _cli.UsageError(str(error)) from None
    written = shapes_world.write(world, args.output_dir, png=args.png)
    total = time.perf_counter() - start
    summary = shapes_world.summarize(world)
    baselines = shapes_world.trivial_baselines(world) if args.baselines else None
    _cli.emit(shapes_world.format_report(summary, baselines))
    files = sum(len(v) for v in written.values())
    _cli.emit(
        f"  wrote {files} files under {args.output_dir} "
        f"({total - world.seconds:.1f} s writing, {total:.1f} s in all)"
    )
    if baselines is not None:
        with open(os.path.join(args.output_dir, "baselines.json"), "w", encoding="utf-8") as f:
            json.dump(baselines, f, indent=1)
    return {"summary": summary, "baselines": baselines, "files": written}


def main(argv=None):
    """Runs the recipe; returns the summary dict (also in manifest.json)."""
    return _cli.execute(build_parser(), argv, run)


if __name__ == "__main__":
    _cli.entry_point(main)
