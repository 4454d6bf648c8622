"""Speed and memory of `MultiHeadAreaAttention` against `keras.layers.MultiHeadAttention`.

Both layers run in the same process, at the same shapes: self-attention over
a 1-D sequence (batch 8, 4 heads, key_dim 32, L in {64, 256, 1024}, max area
width in {1, 2, 3, 5}) and over 2-D grids (8x8 and 16x16, areas up to 2x2
and 3x3), for the key modes `mean` (fast and direct implementations) and
`concat` (the learned Eq. 9 keys), with and without `jit_compile`. Each time
is the median of `--repeats` runs after `--warmup` runs; the table gives
milliseconds and the ratio to Keras MHA at the same shape and jit setting,
whose runs alternate with the row's runs (so that a drift of the machine's
speed cancels out of the ratio).

Forward+backward is the gradient of `sum(y**2)` with respect to the input and
all weights. Peak memory is XLA's buffer assignment for the compiled
forward+backward (temporaries + outputs), read with JAX's
`Compiled.memory_analysis()`: run with `KERAS_BACKEND=jax` to get it (the
TensorFlow CPU runtime exposes no allocator statistics).

Usage:
    python benchmarks/area_attention.py [--repeats 10] [--only 1d|2d]
        [--lengths 64 256 1024] [--jit both|on|off]
    KERAS_BACKEND=jax python benchmarks/area_attention.py
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from _timing import make_steps  # noqa: E402
from _timing import paired_medians  # noqa: E402

from keras_structattn.layers import MultiHeadAreaAttention  # noqa: E402

BATCH, HEADS, KEY_DIM = 8, 4, 32
DIM = HEADS * KEY_DIM


def steps_for(layer, length, jit, seed=0):
    """Returns (forward, forward+backward, peak bytes or None) callables."""
    x = keras.ops.convert_to_tensor(
        np.random.default_rng(seed).normal(size=(BATCH, length, DIM)).astype("float32")
    )
    layer(x, x)  # build
    return make_steps(layer, x, jit)


def configurations(args):
    """Yields (label, length, layer factory) rows, MHA baseline first per shape."""
    variants = [
        ("mean fast", dict(area_key_mode="mean", area_implementation="fast")),
        ("mean direct", dict(area_key_mode="mean", area_implementation="direct")),
        ("concat", dict(area_key_mode="concat")),
    ]
    if args.only in (None, "1d"):
        for length in args.lengths:
            yield f"1-D L={length}", length, None
            for width in args.widths:
                for name, kwargs in variants:
                    yield (
                        f"1-D L={length} w={width} {name}",
                        length,
                        dict(max_area_width=width, **kwargs),
                    )
    if args.only in (None, "2d"):
        for side in (8, 16):
            yield f"2-D {side}x{side}", side * side, None
            for area in (2, 3):
                for name, kwargs in variants:
                    yield (
                        f"2-D {side}x{side} {area}x{area} {name}",
                        side * side,
                        dict(
                            max_area_width=area,
                            max_area_height=area,
                            memory_height=side,
                            **kwargs,
                        ),
                    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--only", choices=("1d", "2d"))
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--widths", type=int, nargs="+", default=[1, 2, 3, 5])
    parser.add_argument("--jit", choices=("both", "on", "off"), default="both")
    args = parser.parse_args(argv)
    jits = {"both": (False, True), "on": (True,), "off": (False,)}[args.jit]

    backend = keras.backend.backend()
    print(
        f"backend={backend}  batch={BATCH} heads={HEADS} key_dim={KEY_DIM}  "
        f"median of {args.repeats} after {args.warmup} warm-up runs; "
        "ratios are against keras.layers.MultiHeadAttention at the same shape"
    )
    header = (
        f"{'configuration':36s} {'jit':>3s} {'fwd ms':>8s} {'x MHA':>6s} "
        f"{'fwd+bwd ms':>10s} {'x MHA':>6s} {'peak MiB':>9s} {'x MHA':>6s}"
    )
    for jit in jits:
        print("\n" + header)
        print("-" * len(header))
        base = None
        for label, length, kwargs in configurations(args):
            keras.utils.set_random_seed(0)
            if kwargs is None:
                base = steps_for(keras.layers.MultiHeadAttention(HEADS, KEY_DIM), length, jit)
                memory = base[2]
                # The baseline row alone (each other row re-times it, paired).
                fwd = fwd_base = paired_medians(base[0], base[0], args.warmup, args.repeats)[0]
                both = both_base = paired_medians(base[1], base[1], args.warmup, args.repeats)[0]
                label = f"{label} keras MHA"
            else:
                layer = MultiHeadAreaAttention(HEADS, KEY_DIM, **kwargs)
                row = steps_for(layer, length, jit)
                memory = row[2]
                fwd_base, fwd = paired_medians(base[0], row[0], args.warmup, args.repeats)
                both_base, both = paired_medians(base[1], row[1], args.warmup, args.repeats)
            mem = f"{memory / 2**20:9.1f}" if memory else f"{'n/a':>9s}"
            mem_ratio = (
                f"{memory / base[2]:6.2f}" if memory and base[2] else f"{'':6s}"
            )
            print(
                f"{label:36s} {'on' if jit else 'off':>3s} {fwd:8.2f} "
                f"{fwd / fwd_base:6.2f} {both:10.2f} {both / both_base:6.2f} "
                f"{mem} {mem_ratio}",
                flush=True,
            )


if __name__ == "__main__":
    main()
