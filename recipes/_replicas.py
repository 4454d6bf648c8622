"""The recipes' side of data parallelism: flags to `Replicas`, checked.

See `keras_structattn.training.distribution` and docs/distributed.md.
"""

import keras

from recipes._cli import UsageError

JIT = {"auto": "auto", "on": True, "off": False}


def from_flags(args):
    """The `Replicas` of `--distribute`/`--devices`/the multi-process flags
    (`_cli.add_distribution_flags`), a `UsageError` where they cannot run.

    Call it first in a training command, before any TensorFlow op runs (the
    CPU can be split into logical devices only before that), and build the
    model, compile it, restore checkpoints and fit inside its `scope()`.
    """
    from keras_structattn.training import distribution

    try:
        replicas = distribution.replicas(
            args.distribute, devices=args.devices, coordinator_address=args.coordinator_address,
            num_processes=args.num_processes, process_id=args.process_id)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if replicas.num_replicas > 1:
        print(f"[distribute] data parallel over {replicas.num_replicas} devices"
              f" in {replicas.num_processes} process(es): {', '.join(replicas.devices)}")
    return replicas


def check_batch(replicas, batch_size, flag="--batch_size"):
    """UsageError unless the global batch splits evenly over the replicas."""
    try:
        replicas.check_batch(batch_size, flag=flag)
    except ValueError as error:
        raise UsageError(str(error)) from None


def jit_for(replicas, jit):
    """`jit_compile` under the replicas: TensorFlow's MirroredStrategy
    cannot run an XLA-compiled step (its variables live per replica), so
    `auto` means off there and `on` is refused."""
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
    """`from_flags`, with `--jit on` under TensorFlow's MirroredStrategy
    refused before any data is read: the first thing `train` does."""
    replicas = from_flags(args)
    jit_for(replicas, JIT[args.jit])
    return replicas


def jit_flag(args, replicas=None):
    """--jit as `jit_compile` under `replicas` (`jit_for`); without XLA on
    TensorFlow, op determinism on, so that a resumed run equals a straight
    one."""
    jit = JIT[args.jit]
    if replicas is not None:
        jit = jit_for(replicas, jit)
    if jit is False and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()
    return jit


def evaluates_after_training(args, replicas):
    """Whether `train` goes on to evaluate the model it holds: not with
    --no_eval, nor after multi-process training (prediction there would
    need every process's part of every batch; `evaluate` on the run folder,
    one process, scores the checkpoint instead)."""
    if args.no_eval:
        return False
    if replicas.num_processes > 1:
        if replicas.is_chief:
            print(f"[eval] not after training on {replicas.num_processes} processes: run "
                  f"`evaluate --output_dir {args.output_dir}` (one process)")
        return False
    return True
