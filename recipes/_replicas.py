"""The recipes' side of data parallelism: flags to `Replicas`, checked.

See `keras_structattn.training.distribution` and docs/distributed.md.
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
        A `keras_structattn.training.distribution.Replicas`.

    Raises:
        UsageError: the setting cannot run here (too few devices,
            multi-process on TensorFlow, ...).
    """
    from keras_structattn.training import distribution

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


JIT = {"auto": "auto", "on": True, "off": False}




def replicas_of(args):
    """The `Replicas` the training command runs on (`--distribute`,
    `--devices`, the multi-process flags): the first thing `train` does,
    before any TensorFlow op (a CPU is split into logical devices only
    before that). `--jit on` with TensorFlow's MirroredStrategy is refused
    here, before any data is read.

    Raises:
        UsageError: the setting cannot run here.
    """
    replicas = from_flags(args)
    jit_for(replicas, JIT[args.jit])
    return replicas


def jit_flag(args, replicas=None):
    """--jit as `jit_compile` under `replicas` (TensorFlow's MirroredStrategy
    runs no XLA-compiled step: `auto` is off there); without XLA on
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


def restarting(make, *, rebatch=False):
    """A `tf.data.Dataset` of which every iterator reads a new `make()`
    from its start.

    Keras' JAX `fit`, and TensorFlow's under a `tf.distribute` strategy,
    open an iterator to look at the first batch, then train on another
    one. Of a Python generator, the first iterator's read-ahead is lost to
    the second (TensorFlow); of a shuffled `tf.data` pipeline, the second
    draws other shuffle seeds, which ones depending on how far the first
    read ahead. A stream made anew for each iterator trains on the batches
    a single device reads.

    Args:
        make: a function of no arguments returning a `tf.data.Dataset`, or
            an iterator of batches: nests of NumPy arrays, the rows first.
        rebatch: unbatch the batches and batch them again to the first
            one's rows, which lets the batches' row counts vary (a short
            last batch) and makes MirroredStrategy split every global batch
            evenly over its replicas (with the recipes' dict batches, a
            stream that does not end in `batch` did not train on the
            single-device batches; docs/distributed.md). Without it, every
            batch must have the shapes of the first (static shapes, as XLA
            and the replicas' split want them).

    Returns:
        A `tf.data.Dataset`.
    """
    import tensorflow as tf

    first = make()
    if isinstance(first, tf.data.Dataset):
        return tf.data.Dataset.from_generator(
            lambda: make().as_numpy_iterator(), output_signature=first.element_spec)
    batch = next(iter(first))

    def spec(array):
        shape = (None, *array.shape[1:]) if rebatch else array.shape
        return tf.TensorSpec(shape, tf.as_dtype(array.dtype))

    signature = tf.nest.map_structure(spec, batch)
    dataset = tf.data.Dataset.from_generator(make, output_signature=signature)
    if rebatch:
        dataset = dataset.unbatch().batch(len(tf.nest.flatten(batch)[0]))
    return dataset


def writers(replicas, make):
    """The callbacks that write a run's files (`make()`: history, checkpoints,
    logs), on process 0. Every other process of a multi-process run saves
    the same checkpoints into a temporary folder of its own, deleted at
    exit: JAX runs a save's transfers in every process alike (it checks
    that the processes agree), so one process alone cannot save.

    Args:
        replicas: the `Replicas` of the run.
        make: a function of no arguments returning the callbacks.

    Returns:
        A list of Keras callbacks.
    """
    if replicas.is_chief:
        return make()
    import atexit
    import shutil
    import tempfile

    from keras_structattn.training.callbacks import EpochCheckpoints

    scratch = tempfile.mkdtemp(prefix=f"process-{replicas.process_id}-checkpoints-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return [EpochCheckpoints(scratch, keep=1)]
