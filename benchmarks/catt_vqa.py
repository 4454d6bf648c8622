"""Transformer vs Transformer+CATT on a confounded Shapes world VQA; step time and cost.

Part 1 (seeds): the VQA recipe (`python -m recipes.vqa train`, one
subprocess per run, TensorFlow) trains `--model transformer`
(`catt_vqa_tiny_nocatt`) and `--model catt` (`catt_vqa_tiny`, dictionaries
fitted by K-means) for each seed on one Shapes world generated with a
confounder (`--world_bias`, default `circle=red:0.95`: in the training and
validation splits a circle is red with probability 0.95; the test split is
unbiased). It prints, per model, the test accuracy (official VQA accuracy,
%) overall, on the test questions whose annotation says `bias_conflict`
(their answer contradicts the bias: a non-red circle is named or asked
about) and on the others: mean, min-max and standard deviation over the
seeds, then every run.

Part 2 (speed): one training step (forward, soft-target BCE, gradients of
every weight; no optimiser update) of the CATT model and of its twin at
batch 32, 14 question words (+ [CLS]), 36 regions of 2048-d features and
3,129 answers, in `catt_vqa_small`'s sizes (d 512, 8 heads, FFN 2048, 6
language / 3 vision / 3 cross layers, K 500), on the JAX backend under
`jax.jit` (a subprocess): paired medians after warm-up (timed
alternately), and the ratio. Multiply-adds: XLA's cost analysis of the
compiled forward pass and training step (`flops`, which XLA counts as 2
per multiply-add; the ratio is the same), at that shape and at LXMERT's
(d 768, 12 heads, FFN 3072, 9/5/5 layers: compiled, not run).

Usage:
    python -m benchmarks.catt_vqa [--seeds 1,2,3] [--world_train 600] [--epochs 10] \\
        [--world_bias circle=red:0.95] [--output_dir runs/catt_vqa] [--skip_speed]
    KERAS_BACKEND=jax python -m benchmarks.catt_vqa --speed_only [--repeats 3]
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

MODELS = ("transformer", "catt")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH, WORDS, REGIONS, FEATURES, ANSWERS, VOCAB = 32, 14, 36, 2048, 3129, 20_000
LXMERT = "hidden_size=768,num_heads=12,filter_size=3072,word_dim=768," \
         "num_language_layers=9,num_vision_layers=5,num_cross_layers=5"


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "cpu"


# ------------------------------------------------------------------ seeds


def run_one(args, name, seed, world):
    """Trains and evaluates one run; returns `(scores, seconds)`."""
    out = os.path.join(args.output_dir, f"{name}_seed{seed}")
    scores_path = os.path.join(out, "test_scores.json")
    seconds = None
    if not os.path.exists(scores_path):  # rerunning the script reuses finished runs
        os.makedirs(out, exist_ok=True)
        if world and not os.path.exists(os.path.join(out, "shapes_world")):
            shutil.copytree(world, os.path.join(out, "shapes_world"))
        command = [sys.executable, "-m", "recipes.vqa", "train", "--output_dir", out,
                   "--model", name, "--seed", str(seed), "--world_seed", str(args.world_seed),
                   "--world_train", str(args.world_train), "--world_val",
                   str(args.world_val), "--world_test", str(args.world_test),
                   "--world_bias", args.world_bias, "--epochs", str(args.epochs),
                   "--verbose", "0"]
        start = time.time()
        with open(os.path.join(out, "recipe.log"), "w", encoding="utf-8") as log:
            subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                           stderr=log)
        seconds = time.time() - start
    with open(scores_path, encoding="utf-8") as f:
        return json.load(f), seconds


def spread(values):
    mean = statistics.mean(values)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:6.2f} ({min(values):6.2f}-{max(values):6.2f}, sd {std:4.2f})"


def seeds_part(args):
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"# recipe: python -m recipes.vqa train --model M --seed S --world_train "
          f"{args.world_train} --world_val {args.world_val} --world_test {args.world_test} "
          f"--world_seed {args.world_seed} --world_bias {args.world_bias} --epochs "
          f"{args.epochs} (hparams: the recipe's, catt_vqa_tiny / catt_vqa_tiny_nocatt)",
          flush=True)
    world, results = None, {}
    for seed in seeds:
        for name in MODELS:
            scores, seconds = run_one(args, name, seed, world)
            results[name, seed] = scores
            if world is None:
                world = os.path.join(args.output_dir, f"{name}_seed{seed}", "shapes_world")
            bias = scores["biasConflict"]
            took = f" ({seconds:.0f} s)" if seconds else ""
            print(f"# seed {seed} {name:11s}: overall {scores['overall']:.2f}, bias conflict "
                  f"{bias['conflict']:.2f}, others {bias['others']:.2f}{took}", flush=True)
    first = results[MODELS[0], seeds[0]]["biasConflict"]
    print(f"test accuracy (%), mean (min-max, sd) over seeds {args.seeds}; "
          f"{first['conflict_questions']} bias-conflict and {first['other_questions']} other "
          "test questions")
    header = f"{'model':11s} | {'overall':31s} | {'bias conflict':31s} | {'others':31s}"
    print(header)
    print("-" * len(header))
    for name in MODELS:
        runs = [results[name, s] for s in seeds]
        print(f"{name:11s} | {spread([r['overall'] for r in runs]):31s} | "
              f"{spread([r['biasConflict']['conflict'] for r in runs]):31s} | "
              f"{spread([r['biasConflict']['others'] for r in runs]):31s}")
    print("per run (seed order): overall / bias conflict / others")
    for name in MODELS:
        print(f"  {name:11s}: " + "; ".join(
            f"{r['overall']:.2f} / {r['biasConflict']['conflict']:.2f} / "
            f"{r['biasConflict']['others']:.2f}"
            for r in (results[name, s] for s in seeds)))
    print("catt - transformer, paired by seed (bias conflict): " + ", ".join(
        f"{results['catt', s]['biasConflict']['conflict'] - results['transformer', s]['biasConflict']['conflict']:+.2f}"  # noqa: E501
        for s in seeds), flush=True)


# ------------------------------------------------------------------ speed


def speed_part(args):
    import jax
    import keras
    import numpy as np

    from benchmarks._timing import paired_medians
    from keras_structattn.training.losses import SoftTargetBinaryCrossEntropy
    from models import registry
    from models.vqa.build import build_vqa_model

    rng = np.random.default_rng(0)
    question = rng.integers(3, VOCAB, (BATCH, WORDS)).astype("int32")
    question[:, 10:] = 0
    corner = rng.uniform(0.0, 0.8, (BATCH, REGIONS, 2))
    size = rng.uniform(0.05, 0.2, (BATCH, REGIONS, 2))
    inputs = {"question": question,
              "regions": rng.random((BATCH, REGIONS, FEATURES)).astype("float32"),
              "boxes": np.concatenate([corner, corner + size], -1).astype("float32"),
              "region_mask": np.ones((BATCH, REGIONS), bool)}
    targets = (rng.random((BATCH, ANSWERS)) < 0.001).astype("float32")
    loss = SoftTargetBinaryCrossEntropy()

    def compile_step(name, overrides=""):
        keras.utils.set_random_seed(0)
        model = build_vqa_model(registry.get(name).parse(overrides), VOCAB, ANSWERS,
                                seed=0)
        model(inputs)
        trainable = [v.value for v in model.trainable_variables]
        fixed = [v.value for v in model.non_trainable_variables]

        def forward(trainable, inputs):
            return model.stateless_call(trainable, fixed, inputs, training=False)[0]

        def loss_fn(trainable, inputs, targets):
            logits, _ = model.stateless_call(trainable, fixed, inputs, training=True)
            return loss(targets, logits)

        step = jax.jit(jax.value_and_grad(loss_fn)).lower(trainable, inputs, targets).compile()
        fwd = jax.jit(forward).lower(trainable, inputs).compile()

        def flops(compiled):
            cost = compiled.cost_analysis()
            cost = cost[0] if isinstance(cost, (list, tuple)) else cost
            return float(cost["flops"])

        params = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
        return (lambda: jax.block_until_ready(step(trainable, inputs, targets)),
                flops(fwd), flops(step), params)

    print(f"# speed: batch {BATCH}, {WORDS} words + [CLS], {REGIONS} regions x {FEATURES}, "
          f"{ANSWERS} answers; JAX {jax.__version__} jit on {jax.devices()[0].platform}; "
          f"paired medians of {args.repeats} steps after {args.warmup} warm-up", flush=True)
    header = (f"{'model':34s} {'params':>12s} {'step ms':>9s} {'fwd GFLOP':>10s} "
              f"{'step GFLOP':>11s}")
    print(header)
    print("-" * len(header))
    rows = {}
    for label, name, overrides in (
            ("Transformer (small_nocatt)", "catt_vqa_small_nocatt", ""),
            ("Transformer+CATT (small)", "catt_vqa_small", ""),
            ("Transformer (LXMERT sizes)", "catt_vqa_small_nocatt", LXMERT),
            ("Transformer+CATT (LXMERT sizes)", "catt_vqa_small", LXMERT)):
        rows[label] = compile_step(name, overrides)
        print(f"# compiled {label}", flush=True)
    base, catt = rows["Transformer (small_nocatt)"], rows["Transformer+CATT (small)"]
    base_ms, catt_ms = paired_medians(base[0], catt[0], args.warmup, args.repeats)
    times = {"Transformer (small_nocatt)": base_ms, "Transformer+CATT (small)": catt_ms}
    for label, (_, fwd, step, params) in rows.items():
        ms = f"{times[label]:9.0f}" if label in times else f"{'-':>9s}"
        print(f"{label:34s} {params:12,d} {ms} {fwd / 1e9:10.1f} {step / 1e9:11.1f}")
    print(f"CATT / twin at catt_vqa_small's sizes: step time {catt_ms / base_ms:.2f}, "
          f"forward multiply-adds {catt[1] / base[1]:.2f}, training-step multiply-adds "
          f"{catt[2] / base[2]:.2f}")
    big_base = rows["Transformer (LXMERT sizes)"]
    big_catt = rows["Transformer+CATT (LXMERT sizes)"]
    print(f"CATT / twin at LXMERT's sizes (not timed): forward multiply-adds "
          f"{big_catt[1] / big_base[1]:.2f}, training-step multiply-adds "
          f"{big_catt[2] / big_base[2]:.2f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--world_train", type=int, default=600)
    parser.add_argument("--world_val", type=int, default=100)
    parser.add_argument("--world_test", type=int, default=500)
    parser.add_argument("--world_seed", type=int, default=1)
    parser.add_argument("--world_bias", default="circle=red:0.95")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--output_dir", default=os.path.join("runs", "catt_vqa"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--skip_speed", action="store_true")
    parser.add_argument("--speed_only", action="store_true",
                        help="the speed part alone, on this process's backend (JAX)")
    args = parser.parse_args()
    if args.speed_only:
        speed_part(args)
        return
    print(f"# {datetime.datetime.now():%Y-%m-%d %H:%M} {platform.machine()} "
          f"{os.cpu_count()} cores, {cpu_name()} (shared with other jobs); seeds: "
          f"KERAS_BACKEND={os.environ.get('KERAS_BACKEND', 'tensorflow')}")
    print(f"# command: python -m benchmarks.catt_vqa {' '.join(sys.argv[1:])}", flush=True)
    seeds_part(args)
    if not args.skip_speed:
        command = [sys.executable, "-m", "benchmarks.catt_vqa", "--speed_only",
                   "--repeats", str(args.repeats), "--warmup", str(args.warmup)]
        subprocess.run(command, cwd=ROOT, check=True,
                       env=dict(os.environ, KERAS_BACKEND="jax"))


if __name__ == "__main__":
    main()
