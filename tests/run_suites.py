"""Runs the whole test suite on both backends, the parts side by side.

`python -m tests.run_suites` runs pytest on the TensorFlow backend (every
test but the model tests) and on the JAX backend (the backend-agnostic
parts: ops, layers, models, decoding, callbacks), split into seven pytest
processes that run
`--jobs` at a time (default: one per CPU core). A pytest process uses about
one core (small tensors: Python and compilation dominate), so on CI's two
cores this halves the wall time of running the two backends one after the
other. Each part's output is printed whole when it ends, then a summary;
the exit status is non-zero if any part failed.

The model tests (`tests/models`) run on JAX only: on TensorFlow every model
is trained, decoded, saved and resumed by its recipe's tests (the recipes'
default backend), and the models are `keras.ops` compositions of layers
whose tests run on both backends. Their TensorFlow run cost about 190 s of
a 2-core CI's time (2026-11-25), mostly `tf.function` tracing.

Usage:
    python -m tests.run_suites [--jobs N] [-- extra pytest arguments]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

JAX_PATHS = ["tests/ops", "tests/layers", "tests/models", "tests/decoding",
             "tests/test_callbacks.py"]

# (name, backend, pytest arguments). A free worker takes the next part, so
# the order decides how the parts fall on two workers: longest first. The
# recipes but captioning took 2,778 s on CI (2026-12-02), longer than all
# other parts together, so they are split in two: the real-format and
# data-parallel tests (about 47% of that part's time on this project's
# CPU, 2026-12-03) and the rest. The captioning recipes took 592 s.
CAPTION_RECIPES = ["tests/recipes/test_caption.py", "tests/recipes/test_caption_catt.py"]
HEAVY_RECIPES = ["tests/recipes/test_real_data.py", "tests/recipes/test_distributed_ct.py",
                 "tests/recipes/test_distributed_vl.py"]
PARTS = [
    ("tensorflow: recipes but captioning, real formats, data parallel", "tensorflow",
     ["tests/recipes", *[f"--ignore={path}" for path in CAPTION_RECIPES + HEAVY_RECIPES]]),
    ("tensorflow: real-format and data-parallel recipes", "tensorflow", HEAVY_RECIPES),
    ("jax: ops, models, decoding", "jax", ["tests/ops", "tests/models", "tests/decoding"]),
    ("tensorflow: captioning recipes", "tensorflow", CAPTION_RECIPES),
    ("tensorflow: all but layers, models and recipes", "tensorflow",
     ["tests", "--ignore=tests/layers", "--ignore=tests/models", "--ignore=tests/recipes"]),
    ("tensorflow: layers", "tensorflow", ["tests/layers"]),
    ("jax: layers, callbacks", "jax", ["tests/layers", "tests/test_callbacks.py"]),
]


def run_part(name, backend, args, extra):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, *extra]
    print(f"[start] {name}: {' '.join(command[1:])}", flush=True)
    start = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as log:
        code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.seek(0)
        output = log.read()
    seconds = time.perf_counter() - start
    last = output.strip().splitlines()[-1] if output.strip() else "(no output)"
    print(f"\n===== {name} (exit {code}, {seconds:.0f} s) =====\n{output}", flush=True)
    return name, code, seconds, last


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[: argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="parts run at a time (default: the number of CPUs)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda part: run_part(*part, extra), PARTS))
    print(f"\n===== summary ({time.perf_counter() - start:.0f} s, {args.jobs} at a time) =====")
    for name, code, seconds, last in results:
        print(f"{'ok  ' if code == 0 else 'FAIL'} {name:40s} {seconds:5.0f} s  {last}")
    return max(code for _, code, _, _ in results)


if __name__ == "__main__":
    sys.exit(main())
