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
    python -m recipes.shapes_world --out /tmp/sw --task vqa,refs \\
        --train 500 --val 100 --test 100 --seed 1 --bias circle=red:0.9 --baselines
"""

import argparse
import json
import os
import time


def _tasks(text):
    return "all" if text == "all" else [t for t in text.split(",") if t]


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--out", default="data/shapes_world", help="output folder (default: data/shapes_world)"
    )
    parser.add_argument(
        "--task", default="all",
        help="captions, vqa, refs, textvqa, a comma-separated list of them, or all",
    )
    parser.add_argument("--train", type=int, default=2000, help="train scenes")
    parser.add_argument("--val", type=int, default=500, help="val scenes")
    parser.add_argument("--test", type=int, default=500, help="test scenes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--canvas", type=int, default=64, help="image side in pixels (>= 32)")
    parser.add_argument("--min-objects", type=int, default=2)
    parser.add_argument("--max-objects", type=int, default=8)
    parser.add_argument("--max-signs", type=int, default=3)
    parser.add_argument("--grid", type=int, default=8, help="grid feature cells per side")
    parser.add_argument("--answer-noise", type=float, default=0.15)
    parser.add_argument("--ocr-noise", type=float, default=0.0)
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


def main(argv=None):
    """Runs the recipe; returns the summary dict (also in manifest.json)."""
    from keras_structattn.data import shapes_world

    args = build_parser().parse_args(argv)
    start = time.perf_counter()
    world = shapes_world.generate(
        args.train, args.val, args.test,
        tasks=_tasks(args.task), seed=args.seed, canvas_size=args.canvas,
        min_objects=args.min_objects, max_objects=args.max_objects,
        max_signs=args.max_signs, grid_size=args.grid,
        answer_noise=args.answer_noise, ocr_noise=args.ocr_noise, bias=args.bias,
    )
    written = shapes_world.write(world, args.out, png=args.png)
    total = time.perf_counter() - start
    summary = shapes_world.summarize(world)
    baselines = shapes_world.trivial_baselines(world) if args.baselines else None
    print(shapes_world.format_report(summary, baselines))
    files = sum(len(v) for v in written.values())
    print(
        f"  wrote {files} files under {args.out} "
        f"({total - world.seconds:.1f} s writing, {total:.1f} s in all)"
    )
    if baselines is not None:
        with open(os.path.join(args.out, "baselines.json"), "w", encoding="utf-8") as f:
            json.dump(baselines, f, indent=1)
    return {"summary": summary, "baselines": baselines, "files": written}


if __name__ == "__main__":
    main()
