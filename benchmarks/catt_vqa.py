"""Transformer vs Transformer+CATT on a confounded Shapes world VQA at convergence; step cost.

Part 1 (seeds): Yang et al. (2021, "Causal Attention for Vision-Language
Tasks", arXiv:2103.03493) report +1.0 VQA accuracy for Transformer+CATT
over its Transformer (Table 2) and attribute it to less reliance on
dataset confounders. Each seed trains, with `python -m recipes.vqa train`
(`benchmarks._vqa_seeds`: one subprocess per run, TensorFlow, a ledger),
`--model transformer` (`catt_vqa_tiny_nocatt`) and `--model catt`
(`catt_vqa_tiny`: K = 64 entries a dictionary, scaled to Shapes world as
the captioners', fitted by K-means over the training split's embedded
regions and words before step 1, seeded by the run's seed) on one Shapes
world with a confounder (`--world_bias circle=red:0.95`: in the training
and validation splits a circle is red with probability 0.95; the test split
is unbiased), 600 / 100 / 500 scenes, each trained to convergence
(`_vqa_seeds.TRAINING`: up to 96 epochs, early stopping on the validation
VQA accuracy, patience 12 epochs). Measures on the test split: the
bias-conflict questions (their answer contradicts the bias: a non-red
circle is named or asked about) overall and per question type, the other
questions, overall and per type, each next to the per-type majority
baseline of the training split; per seed, mean (min-max), and the paired
difference catt - transformer with a 95% bootstrap interval of its mean.
Ledger: `benchmarks/results_catt_vqa_cpu_runs.json`.

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
    python -m benchmarks.catt_vqa [--seeds 1,2,3,4,5] [--output_dir runs/catt_vqa] \\
        [--ledger FILE] [--skip_speed] [-- more recipe flags for every arm]
    KERAS_BACKEND=jax python -m benchmarks.catt_vqa --speed_only [--repeats 3]
"""

import argparse
import os
import subprocess
import sys

from benchmarks._vqa_seeds import TYPES
from benchmarks._vqa_seeds import compare
from benchmarks._vqa_seeds import type_groups

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH, WORDS, REGIONS, FEATURES, ANSWERS, VOCAB = 32, 14, 36, 2048, 3129, 20_000
LXMERT = "hidden_size=768,num_heads=12,filter_size=3072,word_dim=768," \
         "num_language_layers=9,num_vision_layers=5,num_cross_layers=5"
LEDGER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results_catt_vqa_cpu_runs.json")
# MCAN's schedule stretched to 48 epochs (`mcan_tiny`'s: warm-up 4, x0.2 at
# 37 and 44): `catt_vqa_tiny`'s own, made for the default run's 4 epochs,
# decays at epoch 5, long before these runs converge.
SCHEDULE = ["--hparams", "warmup_epochs=4,decay_epochs=37,44"]
ARMS = {"transformer": ["--model", "transformer", *SCHEDULE],
        "catt": ["--model", "catt", *SCHEDULE]}
WORLD = ("--world_bias", "circle=red:0.95", "--world_train", "600", "--world_val", "100",
         "--world_test", "500")
# The bias-conflict questions first (the claim: less reliance on the confounder), per type.
GROUPS = ([("bias conflict", "conflict")] + [(f"conflict {t}", f"conflict/{t}") for t in TYPES]
          + [("others", "others")] + [(f"others {t}", f"others/{t}") for t in TYPES]
          + type_groups(forms=False))


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], add_help=False)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--skip_speed", action="store_true")
    parser.add_argument("--speed_only", action="store_true",
                        help="the speed part alone, on this process's backend (JAX)")
    args, rest = parser.parse_known_args()
    if args.speed_only:
        speed_part(args)
        return
    compare("catt_vqa", __doc__, ARMS, [("catt", "transformer")], GROUPS, ledger=LEDGER,
            world_flags=WORLD, argv=rest)
    if not args.skip_speed:
        command = [sys.executable, "-m", "benchmarks.catt_vqa", "--speed_only",
                   "--repeats", str(args.repeats), "--warmup", str(args.warmup)]
        subprocess.run(command, cwd=ROOT, check=True,
                       env=dict(os.environ, KERAS_BACKEND="jax"))


if __name__ == "__main__":
    main()
