"""Data-parallel training step time: one device vs N, in one process.

A full Keras training step (`model.train_on_batch`: forward, loss,
backward, Adam update) of the VQA model (MCAN, `mcan_tiny` by default, the
recipe's embedded-default size) on one global batch, once on a model
placed on one device and once on a model trained data-parallel over N
devices through `keras_structattn.training.distribution` (JAX: Keras'
`DataParallel`; TensorFlow: `MirroredStrategy`, which runs without XLA).
Both models live in the same process and their steps are timed
alternately after warm-up (paired medians), so the ratio is free of the
machine's drift. Examples/s = global batch / step time.

On this CPU the "devices" are logical: JAX's `--xla_force_host_platform_
device_count=N`, TensorFlow's logical CPU devices, sharing the same cores;
the ratio then shows the overhead of splitting a batch and reducing the
gradients, not a speed-up. On a GPU machine it uses the GPUs.

Usage:
    KERAS_BACKEND=jax python -m benchmarks.distributed [--devices 2]
        [--batch 64] [--hparams mcan_tiny] [--repeats 10] [--warmup 3]
    KERAS_BACKEND=tensorflow python -m benchmarks.distributed
"""

import argparse
import datetime
import os
import platform
import sys


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64, help="the global batch")
    parser.add_argument("--hparams", default="mcan_tiny")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    # JAX reads its CPU device count when it starts (GPUs are unaffected).
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "")
        + f" --xla_force_host_platform_device_count={args.devices}"
    ).strip()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import numpy as np

    from benchmarks._timing import paired_medians
    from benchmarks.vqa_speed import ANSWERS
    from benchmarks.vqa_speed import VOCAB
    from benchmarks.vqa_speed import batch as vqa_batch
    from keras_structattn.training import distribution
    from keras_structattn.training.losses import SoftTargetBinaryCrossEntropy
    from models import registry
    from models.vqa.build import build_vqa_model

    backend = keras.backend.backend()
    replicas = distribution.replicas("data_parallel", devices=args.devices)
    replicas.check_batch(args.batch)
    hparams = registry.get(args.hparams)
    rng = np.random.default_rng(0)
    inputs, targets = vqa_batch(rng)
    inputs = {k: v[: args.batch] for k, v in inputs.items()}
    targets = targets[: args.batch]
    if len(targets) < args.batch:
        sys.exit(f"error: --batch at most {len(targets)}")
    jit = backend == "jax"  # MirroredStrategy cannot run XLA-compiled steps

    def build():
        keras.utils.set_random_seed(0)
        model = build_vqa_model(hparams, VOCAB, ANSWERS, seed=0)
        model.compile(optimizer=keras.optimizers.Adam(1e-4),
                      loss=SoftTargetBinaryCrossEntropy(), jit_compile=jit)
        return model

    if backend == "jax":
        # The single-device model is built and trained without the global
        # distribution; the parallel one inside it.
        parallel_distribution = keras.distribution.distribution()
        keras.distribution.set_distribution(None)
        single = build()
        with parallel_distribution.scope():
            parallel = build()

        def parallel_step():
            with parallel_distribution.scope():
                parallel.train_on_batch(inputs, targets)
    else:
        single = build()
        with replicas.scope():
            parallel = build()

        def parallel_step():
            parallel.train_on_batch(inputs, targets)

    def single_step():
        single.train_on_batch(inputs, targets)

    single_ms, parallel_ms = paired_medians(single_step, parallel_step, args.warmup,
                                            args.repeats)
    versions = f"keras {keras.__version__}"
    if backend == "jax":
        import jax

        versions += f", jax {jax.__version__} on {jax.devices()[0].platform}"
    else:
        import tensorflow as tf

        versions += f", tensorflow {tf.__version__}"
    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{platform.machine()} {os.cpu_count()} cores, {platform.processor() or 'cpu'}; "
          f"{versions}")
    print(f"# command: KERAS_BACKEND={backend} python -m benchmarks.distributed "
          f"{' '.join(sys.argv[1:] if argv is None else argv)}")
    print(f"# {args.hparams} VQA model, global batch {args.batch}, train_on_batch "
          f"(Adam), jit {'on' if jit else 'off'}; paired medians of {args.repeats} "
          f"steps after {args.warmup} warm-up; devices: {', '.join(replicas.devices)}")
    header = (f"{'backend':10s} {'devices':>7s} {'step ms':>9s} {'examples/s':>11s} "
              f"{'x 1 device':>10s}")
    print(header)
    print("-" * len(header))
    for devices, ms in ((1, single_ms), (replicas.num_replicas, parallel_ms)):
        print(f"{backend:10s} {devices:7d} {ms:9.1f} {1e3 * args.batch / ms:11.1f} "
              f"{ms / single_ms:10.2f}", flush=True)


if __name__ == "__main__":
    main()
