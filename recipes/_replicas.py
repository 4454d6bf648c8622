"""The recipes' side of data parallelism: flags to `Replicas`, checked.

See `keras_structattn.distribution` and docs/distributed.md.
"""

import keras

from recipes._cli import UsageError


def from_flags(args):
    """The `Replicas` of `--distribute`/`--devices`/multi-process flags.

    Call it first in a training command, before any TensorFlow op runs (the
    CPU can be split into logical devices only before that), and build
    the model, compile it, restore checkpoints and fit inside its
    `scope()`.

    Args:
        args: the parsed flags (`_cli.add_distribution_flags`).

    Returns:
        A `keras_structattn.distribution.Replicas`.

    Raises:
        UsageError: the setting cannot run here (too few devices,
            multi-process on TensorFlow, ...).
    """
    from keras_structattn import distribution

    try:
        replicas = distribution.replicas(
            args.distribute,
            devices=args.devices,
            coordinator_address=args.coordinator_address,
            num_processes=args.num_processes,
            process_id=args.process_id,
        )
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
