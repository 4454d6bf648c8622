"""Dropout's random numbers: `keras.random.dropout` against `ops.dropout`.

One dropout of an MCAN-small feed-forward activation (batch 64 x 114
tokens x 2048 = 15M elements, rate 0.1), compiled (`tf.function(jit_compile
=True)` on TensorFlow, `jax.jit` on JAX) and, on TensorFlow, also run as a
graph without XLA; the multiply by `1 / (1 - rate)` alone is the floor.
Times are paired medians (`benchmarks/_timing.py`: each row alternates
with the Keras row after warm-up); "x keras" divides by the Keras row's
median of the same alternating run. A fresh seed each call, as in training.

Usage:
    python -m benchmarks.dropout [--repeats 9] [--warmup 2]
    KERAS_BACKEND=jax python -m benchmarks.dropout
"""

import argparse
import datetime
import os
import platform
import sys

import keras
import numpy as np

from benchmarks._timing import paired_medians
from keras_structattn.ops.dropout import dropout

SHAPE, RATE = (64, 114, 2048), 0.1


def compiled(fn, jit):
    """`fn(x, generator)` compiled with the backend's jit (`jit`: on
    TensorFlow, XLA or a plain graph), its result waited for."""
    generator = keras.random.SeedGenerator(0)
    if keras.backend.backend() == "jax":
        import jax

        # The generator's state is threaded through as Keras' JAX trainer does.
        @jax.jit
        def step(x, state):
            with keras.StatelessScope(state_mapping=[(generator.state, state)]) as scope:
                y = fn(x, generator)
            return y, scope.get_current_value(generator.state)

        state = [generator.state.value]

        def run(x):
            y, state[0] = step(x, state[0])
            return y.block_until_ready()

        return run
    import tensorflow as tf

    graph = tf.function(lambda x: fn(x, generator), jit_compile=jit)
    return lambda x: graph(x).numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    backend = keras.backend.backend()
    print(f"# {datetime.date.today()} {platform.machine()} {os.cpu_count()} cores; keras "
          f"{keras.__version__}, backend {backend}")
    print(f"# command: {'KERAS_BACKEND=jax ' if backend == 'jax' else ''}python -m "
          f"benchmarks.dropout {' '.join(sys.argv[1:])}")
    print(f"# {SHAPE} float32, rate {RATE}; paired medians of {args.repeats} after "
          f"{args.warmup} warm-up")
    x = keras.ops.convert_to_tensor(np.random.default_rng(0).random(SHAPE, "float32"))
    rows = (("keras.random.dropout", lambda t, g: keras.random.dropout(t, RATE, seed=g)),
            ("ops.dropout", lambda t, g: dropout(t, RATE, seed=g)),
            ("multiply only (floor)", lambda t, g: t * (1.0 / (1.0 - RATE))))
    header = f"{'dropout':24s} {'compiled':>14s} {'ms':>8s} {'x keras':>8s} {'dropped':>8s}"
    print(header)
    print("-" * len(header))
    for jit in ((True, False) if backend == "tensorflow" else (True,)):
        label = "XLA" if jit else "graph, no XLA"
        steps = [(name, compiled(fn, jit)) for name, fn in rows]
        base = steps[0][1]
        for name, step in steps:
            base_ms, ms = paired_medians(lambda b=base: b(x), lambda s=step: s(x),
                                         args.warmup, args.repeats)
            dropped = float(np.mean(keras.ops.convert_to_numpy(step(x)) == 0))
            print(f"{name:24s} {label:>14s} {ms:8.1f} {ms / base_ms:8.2f} {dropped:8.4f}",
                  flush=True)


if __name__ == "__main__":
    main()
