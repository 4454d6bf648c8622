"""Speed of `CATTAttention` (CATT) against `keras.layers.MultiHeadAttention`,
and of `GlobalDictionary.adapt` (K-means).

At the Transformer+CATT captioning shape (Yang et al., 2021,
arXiv:2103.03493, supplementary implementation details; see
docs/catt_attention.md):
self-attention over 36 regions (encoder) and causal self-attention over 50
words (decoder), hidden 512, 8 heads, dictionary K = 500, batch 50. The
baseline is Keras MHA on the same input (with `use_causal_mask` for words).
Rows: CATT with shared weights returning `[Z^; X^]` (`fusion="concat"`, the
same work as `"none"`), with the Linear 2d -> d fusion (`"concat_dense"`),
and without weight sharing. "FLOPs x" is the analytic ratio of
multiply-adds (projections, QK^T and AV) to the baseline's 4BLd^2 + 2BL^2d:
CS-ATT adds 2BLKd for its attention, BLd^2 for its output projection and
2Kd^2 for the dictionary's keys and values; the fusion adds 2BLd^2 and a
separate query projection BLd^2. At this shape CS-ATT alone costs 0.8x
(words) to 0.85x (regions) MHA, so no implementation of `[MHA(q, X, X); MHA(q, D, D)]` gets
near 1.5x the baseline's FLOPs. Each time is the median of `--repeats` runs
after `--warmup`, the baseline's runs alternating with the row's; peak
memory is XLA's for the compiled forward+backward (`KERAS_BACKEND=jax`).
The last lines time `GlobalDictionary(500).adapt` (mini-batch K-means with
k-means++ seeding, NumPy on the host) over `--kmeans-rows` random vectors.

Usage:
    python benchmarks/catt_attention.py [--repeats 10] [--batch 50] [--jit both|on|off]
        [--kmeans-rows 100000] [--kmeans-epochs 3]
    KERAS_BACKEND=jax python benchmarks/catt_attention.py
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from _timing import layer_arguments  # noqa: E402
from _timing import make_steps  # noqa: E402
from _timing import paired_medians  # noqa: E402

from keras_structattn.layers.catt_attention import CATTAttention  # noqa: E402
from keras_structattn.layers.global_dictionary import GlobalDictionary  # noqa: E402

HEADS, HIDDEN, SIZE = 8, 512, 500
SHAPES = [("regions", 36, False), ("words", 50, True)]

VARIANTS = [
    ("CATT shared, [Z;X]", dict(fusion="concat")),
    ("CATT shared, Linear 2d->d", dict(fusion="concat_dense")),
    ("CATT w/o share, Linear", dict(fusion="concat_dense", share_weights=False)),
]


def flops_ratio(batch, length, options):
    """Multiply-adds of a CATT variant over those of MHA (see the docstring)."""
    b, n, d, k = batch, length, HIDDEN, SIZE
    mha = 4 * b * n * d * d + 2 * b * n * n * d
    catt = mha + 2 * k * d * d + 2 * b * n * k * d + b * n * d * d
    if options.get("fusion") == "concat_dense":
        catt += 2 * b * n * d * d
    if options.get("share_weights") is False:
        catt += b * n * d * d
    return catt / mha


def time_attention(args, jits):
    rng = np.random.default_rng(0)
    key_dim = HIDDEN // HEADS
    print(
        f"backend={keras.backend.backend()}  batch={args.batch} hidden={HIDDEN} heads={HEADS} "
        f"K={SIZE}  median of {args.repeats} after {args.warmup} warm-up runs; ratios "
        "against keras.layers.MultiHeadAttention on the same input"
    )
    header = (
        f"{'configuration':27s} {'input':>11s} {'jit':>3s} {'FLOPs x':>7s} {'fwd ms':>8s} "
        f"{'x MHA':>6s} {'fwd+bwd ms':>10s} {'x MHA':>6s} {'peak MiB':>9s} {'x MHA':>6s}"
    )
    for jit in jits:
        print("\n" + header)
        print("-" * len(header))
        for shape_name, length, causal in SHAPES:
            x = keras.ops.convert_to_tensor(
                rng.normal(size=(args.batch, length, HIDDEN)).astype("float32")
            )
            kwargs = dict(use_causal_mask=True) if causal else {}
            keras.utils.set_random_seed(0)
            mha = keras.layers.MultiHeadAttention(HEADS, key_dim)
            mha(x, x, **kwargs)
            base = make_steps(mha, x, jit, **kwargs)
            fwd = paired_medians(base[0], base[0], args.warmup, args.repeats)[0]
            both = paired_medians(base[1], base[1], args.warmup, args.repeats)[0]
            rows = [("keras MHA", 1.0, fwd, fwd, both, both, base[2])]
            for label, options in VARIANTS:
                keras.utils.set_random_seed(0)
                layer = CATTAttention(HEADS, key_dim, dictionary_size=SIZE, **options)
                layer(x, x, **kwargs)
                row = make_steps(layer, x, jit, **kwargs)
                fwd_base, fwd = paired_medians(base[0], row[0], args.warmup, args.repeats)
                both_base, both = paired_medians(base[1], row[1], args.warmup, args.repeats)
                ratio = flops_ratio(args.batch, length, options)
                rows.append((label, ratio, fwd_base, fwd, both_base, both, row[2]))
            shape = f"{length} {shape_name}"
            for label, ratio, fwd_base, fwd, both_base, both, memory in rows:
                mem = f"{memory / 2**20:9.1f}" if memory else f"{'n/a':>9s}"
                mem_ratio = f"{memory / base[2]:6.2f}" if memory and base[2] else f"{'':6s}"
                print(
                    f"{label:27s} {shape:>11s} {'on' if jit else 'off':>3s} {ratio:7.2f} "
                    f"{fwd:8.2f} {fwd / fwd_base:6.2f} {both:10.2f} {both / both_base:6.2f} "
                    f"{mem} {mem_ratio}",
                    flush=True,
                )


def time_kmeans(args):
    rng = np.random.default_rng(1)
    data = rng.normal(size=(args.kmeans_rows, HIDDEN)).astype("float32")
    dictionary = GlobalDictionary(SIZE, dim=HIDDEN)
    start = time.perf_counter()
    dictionary.adapt(data, batch_size=1024, epochs=args.kmeans_epochs, seed=0)
    seconds = time.perf_counter() - start
    print(
        f"\nGlobalDictionary({SIZE}).adapt over {args.kmeans_rows} x {HIDDEN} random vectors "
        f"(batch 1024, {args.kmeans_epochs} epochs, k-means++ on {max(3072, 10 * SIZE)} "
        f"rows, one inertia pass): {seconds:.1f} s; inertia {dictionary.inertia:.4g} "
        f"({dictionary.inertia / args.kmeans_rows:.1f} per vector)"
    )


def add_kmeans_arguments(parser):
    parser.add_argument("--kmeans-rows", type=int, default=100_000,
                        help="vectors for the K-means timing (0 skips it)")
    parser.add_argument("--kmeans-epochs", type=int, default=3)


def main(argv=None):
    args, jits = layer_arguments(__doc__.split("\n")[0], 50, argv, add_kmeans_arguments)
    time_attention(args, jits)
    if args.kmeans_rows:
        time_kmeans(args)


if __name__ == "__main__":
    main()
