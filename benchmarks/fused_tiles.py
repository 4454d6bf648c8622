"""The fused area attention kernel alone, over its tile settings, on a GPU.

For each case (`1d:L:w` or `2d:HxW:h`, a dtype), times the forward+backward
of `fused_area_attention` (the gradient of `sum(out**2)` with respect to q,
k and v, under `jax.jit`) for every `--block_k` x `--num_warps`, the
default tiles (`default_tiles`) first, against `jax.nn.dot_product_attention`
at the same shape with JAX's default implementation (XLA's attention, not
cuDNN flash) and the same padding mask: the attention core without the
layer's projections. A setting that does not
compile (Triton out of shared memory) or does not fit reads so, with the
reason on stderr. Medians of `--repeats` after `--warmup`, in milliseconds.
See docs/fused_area_attention.md.

Usage:
    KERAS_BACKEND=jax python benchmarks/fused_tiles.py \
        --cases 1d:1024:3:bfloat16 1d:1024:5:float32 2d:32x32:3:bfloat16 \
        --batch 32 --heads 8 --depth 64 --block_k 64 32 16 --num_warps 4 8
"""

import argparse
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from keras_structattn.ops import fused_area_attention as fused


def parse_case(text):
    """`1d:L:w:dtype` or `2d:HxW:h:dtype` -> (height, width, max_h, max_w, dtype)."""
    kind, size, area, dtype = text.split(":")
    if kind == "1d":
        return 1, int(size), 1, int(area), dtype
    height, width = (int(n) for n in size.split("x"))
    return height, width, int(area), int(area), dtype


def median_ms(fn, args, warmup, repeats):
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", default=["1d:1024:3:bfloat16"])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--depth", type=int, default=64)
    parser.add_argument("--block_k", type=int, nargs="+", default=[64, 32, 16])
    parser.add_argument("--num_warps", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; batch={args.batch} "
          f"heads={args.heads} depth={args.depth}; fwd+bwd ms, median of {args.repeats}")
    print(f"{'case':28s} {'tiles':22s} {'ms':>8s} {'x core':>7s}")
    rng = np.random.default_rng(0)
    for text in args.cases:
        height, width, max_h, max_w, dtype = parse_case(text)
        length = height * width
        shape = (args.batch, args.heads, length, args.depth)
        q, k, v = (jnp.asarray(rng.standard_normal(shape) * 0.3, dtype) for _ in range(3))
        mask = jnp.asarray(rng.random((args.batch, 1, 1, length)) < 0.95)

        def core_loss(q, k, v, mask=mask):
            out = jax.nn.dot_product_attention(
                q.swapaxes(1, 2), k.swapaxes(1, 2), v.swapaxes(1, 2), mask=mask
            )
            return jnp.sum(out.astype(jnp.float32) ** 2)

        core = median_ms(jax.jit(jax.grad(core_loss, (0, 1, 2))), (q, k, v),
                         args.warmup, args.repeats)
        print(f"{text:28s} {'dot_product_attention':22s} {core:8.2f} {1.0:7.2f}")
        offsets = max_h * max_w
        auto = fused.default_tiles(offsets, length, length, args.depth, args.depth,
                                   jnp.dtype(dtype).itemsize)
        settings = [(None, None)] + [(b, w) for b in args.block_k for w in args.num_warps]
        for block_k, warps in settings:
            label = (f"default bk={auto[1]} st={auto[2]}" if block_k is None
                     else f"bk={block_k} warps={warps}")

            def loss(q, k, v, block_k=block_k, warps=warps, mask=mask,
                     layout=(height, max_w, max_h)):
                out = fused.fused_area_attention(
                    q, k, v, mask, memory_height=layout[0], max_area_width=layout[1],
                    max_area_height=layout[2], value_mode="sum", block_k=block_k,
                    num_warps=warps,
                )
                return jnp.sum(out.astype(jnp.float32) ** 2)

            try:
                ms = median_ms(jax.jit(jax.grad(loss, (0, 1, 2))), (q, k, v),
                               args.warmup, args.repeats)
                print(f"{text:28s} {label:22s} {ms:8.2f} {ms / core:7.2f}", flush=True)
            except Exception as error:  # a setting that does not compile or fit
                print(f"{text:28s} {label:22s} does not fit", flush=True)
                first = str(error).strip().splitlines()[0][:300]
                print(f"  ({type(error).__name__}: {first})", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
