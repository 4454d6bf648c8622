"""Training step time and peak memory of the VQA models at the papers' shapes.

One training step (forward, the soft-target BCE loss, backward: the
gradient of every weight; the Adam update, the same per weight for every
model, is left out) of MCAN-small, MCAN+PA-small, MUAN and MUAN without its
gate, at batch 64, 14 question words (MUAN: + its [ans] token), 100 regions
of 2048-d features, d 512 (MUAN's 10 blocks at d 512, 8 heads, FFN 2048:
the papers' widths differ, 512 is MCAN-small's) and 3,129 answers, on the
JAX backend under XLA (`jax.jit`). Step times are paired medians against
MCAN's step (timed alternately after warm-up): a row's "x MCAN" divides
its median by MCAN's median in the same alternating run, which drifts with
the machine between rows, so a row's step ms over the first row's need not
equal its ratio. Peak memory is XLA's compiled temporary + output bytes of
the step (`memory_analysis()`), the same on every run.

Usage:
    KERAS_BACKEND=jax python -m benchmarks.vqa_speed [--repeats 3] [--warmup 1]
"""

import datetime
import os
import platform
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks._timing import jax_training_step  # noqa: E402
from benchmarks._timing import model_step_arguments  # noqa: E402
from benchmarks._timing import paired_medians  # noqa: E402
from keras_structattn.training.losses import SoftTargetBinaryCrossEntropy  # noqa: E402
from models import registry  # noqa: E402
from models.vqa.build import build_vqa_model  # noqa: E402

D512_MUAN = "hidden_size=512,num_heads=8,filter_size=2048"
MODELS = (
    ("MCAN (mcan_small)", "mcan_small", ""),
    ("MCAN+PA (mcan_pa_small)", "mcan_pa_small", ""),
    ("MUAN (muan_base, d 512)", "muan_base", D512_MUAN),
    ("MUAN, no gate", "muan_base", D512_MUAN + ",qk_gate=False"),
)
BATCH, WORDS, REGIONS, FEATURES, ANSWERS, VOCAB = 64, 14, 100, 2048, 3129, 20_000


def batch(rng):
    question = rng.integers(3, VOCAB, (BATCH, WORDS)).astype("int32")
    question[:, 10:] = 0  # some padding, as real questions
    corner = rng.uniform(0.0, 0.8, (BATCH, REGIONS, 2))
    size = rng.uniform(0.05, 0.2, (BATCH, REGIONS, 2))
    boxes = np.concatenate([corner, corner + size], -1).astype("float32")
    inputs = {"question": question,
              "regions": rng.random((BATCH, REGIONS, FEATURES)).astype("float32"),
              "boxes": boxes,
              "region_mask": np.ones((BATCH, REGIONS), bool)}
    targets = (rng.random((BATCH, ANSWERS)) < 0.001).astype("float32")
    return inputs, targets


def make_step(hparams, inputs, targets):
    """A compiled training step (loss and gradients) and its peak bytes."""
    keras.utils.set_random_seed(0)
    model = build_vqa_model(hparams, VOCAB, ANSWERS, seed=0)
    model(inputs)
    step, cost = jax_training_step(model, SoftTargetBinaryCrossEntropy(), inputs, targets)
    parameters = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    return step, cost["memory"], parameters


def main():
    args = model_step_arguments(__doc__.split("\n")[0])
    import jax

    print(f"# {datetime.date.today()} {platform.machine()} {os.cpu_count()} cores, "
          f"{platform.processor() or 'cpu'}; jax {jax.__version__} on "
          f"{jax.devices()[0].platform}, keras {keras.__version__}")
    print(f"# command: KERAS_BACKEND=jax python -m benchmarks.vqa_speed "
          f"{' '.join(sys.argv[1:])}")
    print(f"# batch {BATCH}, {WORDS} words, {REGIONS} regions x {FEATURES}, {ANSWERS} "
          f"answers, d 512; paired medians of {args.repeats} steps after {args.warmup} "
          "warm-up", flush=True)
    inputs, targets = batch(np.random.default_rng(0))
    steps = []
    for label, name, overrides in MODELS:
        hparams = registry.get(name).parse(overrides)
        steps.append((label, *make_step(hparams, inputs, targets)))
        print(f"# compiled {label}", flush=True)
    base_label, base_step, base_memory, _ = steps[0]
    header = (f"{'model':26s} {'params':>11s} {'step ms':>9s} {'x MCAN':>7s} "
              f"{'peak MiB':>9s} {'x MCAN':>7s}")
    print(header)
    print("-" * len(header))
    for label, step, memory, parameters in steps:
        if step is base_step:
            ms = base_ms = paired_medians(step, step, args.warmup, args.repeats)[0]
        else:
            base_ms, ms = paired_medians(base_step, step, args.warmup, args.repeats)
        mem = f"{memory / 2**20:9.1f}" if memory else f"{'n/a':>9s}"
        ratio = f"{memory / base_memory:7.2f}" if memory and base_memory else f"{'':7s}"
        print(f"{label:26s} {parameters:11,d} {ms:9.0f} {ms / base_ms:7.2f} {mem} {ratio}",
              flush=True)


if __name__ == "__main__":
    main()
