"""The recipes' side of data parallelism: flags to `Replicas`, checked.

See `keras_structattn.training.distribution` and docs/distributed.md.
"""

import keras

from recipes._cli import UsageError
from recipes._cli import usage

JIT = {"auto": "auto", "on": True, "off": False}


def from_flags(args):
    """The `Replicas` of the distribution flags (a `UsageError` where they
    cannot run). Call it before any TensorFlow op runs (the CPU splits into
    devices only before that); build, compile and fit inside its `scope()`."""
    from keras_structattn.training import distribution

    replicas = usage(lambda: distribution.replicas(
        args.distribute, devices=args.devices, coordinator_address=args.coordinator_address,
        num_processes=args.num_processes, process_id=args.process_id))
    if replicas.num_replicas > 1:
        print(f"[distribute] data parallel over {replicas.num_replicas} devices"
              f" in {replicas.num_processes} process(es): {', '.join(replicas.devices)}")
    return replicas


def check_batch(replicas, batch_size, flag="--batch_size"):
    """UsageError unless the global batch splits evenly over the replicas."""
    usage(replicas.check_batch, batch_size, flag)


def jit_for(replicas, jit):
    """`jit_compile` under the replicas: off for `auto` under TensorFlow's
    MirroredStrategy, which cannot run XLA-compiled steps; `on` refused."""
    if replicas.strategy is None:
        return jit
    if jit is True:
        raise UsageError("--jit on cannot run with --distribute data_parallel on "
                         "TensorFlow (MirroredStrategy places variables per replica, "
                         "which XLA-compiled steps refuse); use --jit off or the JAX backend")
    if jit == "auto" and keras.backend.backend() == "tensorflow":
        return False
    return jit


def replicas_of(args):
    """`from_flags`, refusing `--jit on` before any data is read."""
    replicas = from_flags(args)
    jit_for(replicas, JIT[args.jit])
    return replicas


def jit_flag(args, replicas=None, xla_on_tensorflow=False):
    """--jit as `jit_compile` under `replicas`; without XLA on TensorFlow, op
    determinism on, so that a resumed run equals a straight one.
    `xla_on_tensorflow`: `auto` means XLA on TensorFlow too (where Keras
    leaves it off on a CPU), for the recipes whose steps XLA speeds up
    (docs/performance.md)."""
    jit = JIT[args.jit]
    if replicas is not None:
        jit = jit_for(replicas, jit)
    if jit == "auto" and xla_on_tensorflow and keras.backend.backend() == "tensorflow":
        jit = True
    if jit is False and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()
    return jit


def evaluates_after_training(args, replicas):
    """Whether `train` evaluates the model it holds: not with --no_eval, nor
    after multi-process training (prediction would need every process's
    rows; `evaluate`, one process, scores the checkpoint instead)."""
    if args.no_eval:
        return False
    if replicas.num_processes > 1:
        if replicas.is_chief:
            print(f"[eval] not after training on {replicas.num_processes} processes: run "
                  f"`evaluate --output_dir {args.output_dir}` (one process)")
        return False
    return True
