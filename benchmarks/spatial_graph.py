"""Time to build SA-M4C spatial relation labels.

Two workloads, each timed as the median of `--repeats` runs after
`--warmup` runs (the first runs compile where a jit is involved):

- `spatial_relations` for 64 images x 150 boxes (1.44 M pairs): the NumPy
  path (`spatial_relations_numpy`, for data pipelines), the keras.ops path
  run eagerly on the current backend, and the keras.ops path compiled
  (`tf.function(jit_compile=True)` on TensorFlow, `jax.jit` on JAX);
- `textvqa_relations` for the SA-M4C sequence: batch 32, 20 question
  tokens, 100 objects, 50 OCR tokens, 12 decoder steps (L = 182), on the
  same three paths.

Boxes are random, with about 20% padding rows. keras.ops times include
converting the result to NumPy (so that asynchronous dispatch is waited for).

Usage:
    python benchmarks/spatial_graph.py [--repeats 20] [--warmup 3]
    KERAS_BACKEND=jax python benchmarks/spatial_graph.py
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from keras_structattn.ops import spatial_graph as sg  # noqa: E402


def random_boxes(rng, batch, n, pad_fraction=0.2):
    corner = rng.uniform(0.0, 0.9, (batch, n, 2))
    size = rng.uniform(0.0, 0.3, (batch, n, 2))
    boxes = np.concatenate([corner, np.minimum(corner + size, 1.0)], -1).astype("float32")
    boxes[rng.random((batch, n)) < pad_fraction] = 0.0
    return boxes


def median_ms(fn, repeats, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def compile_fn(fn):
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    if backend == "jax":
        import jax

        return jax.jit(fn)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    to_numpy = ops.convert_to_numpy

    print(f"backend: {keras.backend.backend()}, CPUs: {os.cpu_count()}, "
          f"median of {args.repeats} after {args.warmup} warm-up runs")

    boxes = random_boxes(rng, 64, 150)
    compiled = compile_fn(sg.spatial_relations)
    rows = [
        ("spatial_relations_numpy  64 x 150 boxes", lambda: sg.spatial_relations_numpy(boxes)),
        ("spatial_relations eager  64 x 150 boxes", lambda: to_numpy(sg.spatial_relations(boxes))),
    ]
    if compiled is not None:
        rows.append(("spatial_relations jit    64 x 150 boxes", lambda: to_numpy(compiled(boxes))))

    batch, lq, no, nocr, steps = 32, 20, 100, 50, 12
    inputs = (
        rng.random((batch, lq)) < 0.8,
        random_boxes(rng, batch, no, 0.0),
        rng.random((batch, no)) < 0.8,
        random_boxes(rng, batch, nocr, 0.0),
        rng.random((batch, nocr)) < 0.6,
    )
    textvqa_compiled = compile_fn(lambda *a: sg.textvqa_relations(*a, steps))
    shape = f"B{batch} Lq{lq} No{no} Nocr{nocr} D{steps}"
    rows += [
        (f"textvqa_relations_numpy  {shape}",
         lambda: sg.textvqa_relations_numpy(*inputs, steps)),
        (f"textvqa_relations eager  {shape}",
         lambda: to_numpy(sg.textvqa_relations(*inputs, steps))),
    ]
    if textvqa_compiled is not None:
        rows.append(
            (f"textvqa_relations jit    {shape}", lambda: to_numpy(textvqa_compiled(*inputs)))
        )

    # The paths must agree before their times mean anything.
    reference = sg.spatial_relations_numpy(boxes)
    assert (np.asarray(to_numpy(sg.spatial_relations(boxes))) == reference).all()
    for name, fn in rows:
        print(f"{name:<60s} {median_ms(fn, args.repeats, args.warmup):8.1f} ms")


if __name__ == "__main__":
    main()
