"""Data-parallel training on Keras' own engines, one switch for the recipes.

The papers behind the library trained on 8-10 GPUs. `replicas(...)` puts a
training run on the engine its backend already has, without home-made
parts (docs/distributed.md):

* JAX: `keras.distribution.DataParallel` over the devices, set as the
  global distribution, so that `model.fit` splits every batch over them
  and keeps the variables replicated; across hosts, `keras.distribution.
  initialize` (`jax.distributed.initialize`) first, with the coordinator
  address, process count and process id from arguments or the
  environment, and each process feeds its own rows of every global batch
  (`Replicas.local_rows`).
* TensorFlow: `tf.distribute.MirroredStrategy`; the model, its optimizer
  and metrics must be built inside `Replicas.scope()`. On a machine without
  GPUs the CPU is split into logical devices (for tests). Keras 3 with
  TensorFlow has no multi-worker `model.fit` (and no XLA-compiled step
  under MirroredStrategy: its variables are placed per replica): those need
  the JAX backend.

The global batch is what the caller asks for; each replica gets an equal
share, so the batch must split evenly. The optimizer counts global steps,
so learning-rate schedules and checkpoints mean the same as on one device.
"""

import contextlib
import dataclasses
import os

import keras

STRATEGIES = ("none", "data_parallel")


@dataclasses.dataclass(frozen=True)
class Replicas:
    """Where a run trains: one device, or data-parallel replicas.

    Attributes:
        num_replicas: model copies (devices) a global batch is split over.
        num_processes: processes (hosts) taking part.
        process_id: this process, `0 .. num_processes - 1`; process 0 is the
            one that writes files shared by the run.
        strategy: the `tf.distribute.Strategy` (TensorFlow), else None.
        devices: names of the devices used.
    """

    num_replicas: int = 1
    num_processes: int = 1
    process_id: int = 0
    strategy: object = None
    devices: tuple = ()

    @property
    def is_chief(self):
        return self.process_id == 0

    def scope(self):
        """Where to build the model, its optimizer and metrics (and restore
        checkpoints): the strategy's scope on TensorFlow, nothing on JAX
        (its distribution is global)."""
        if self.strategy is None:
            return contextlib.nullcontext()
        return self.strategy.scope()

    def check_batch(self, batch_size, flag="batch size"):
        """Raises ValueError unless `batch_size` splits evenly over the
        replicas (and processes)."""
        parts = max(self.num_replicas, self.num_processes)
        if batch_size % parts:
            raise ValueError(
                f"the {flag} {batch_size} must split evenly over "
                f"{self.num_replicas} replicas: use a multiple of {parts}"
            )

    def local_rows(self, batch):
        """This process's rows of a global batch (a nest of arrays): the
        `process_id`-th of `num_processes` equal contiguous blocks, so that
        the processes together feed exactly the global batch."""
        if self.num_processes == 1:
            return batch

        def rows(array):
            size = len(array) // self.num_processes
            return array[self.process_id * size : (self.process_id + 1) * size]

        return keras.tree.map_structure(rows, batch)


def _initialize_processes(coordinator_address, num_processes, process_id):
    coordinator_address = coordinator_address or os.environ.get(
        "KERAS_DISTRIBUTION_JOB_ADDRESSES"
    )
    if num_processes is None and "KERAS_DISTRIBUTION_NUM_PROCESSES" in os.environ:
        num_processes = int(os.environ["KERAS_DISTRIBUTION_NUM_PROCESSES"])
    if process_id is None and "KERAS_DISTRIBUTION_PROCESS_ID" in os.environ:
        process_id = int(os.environ["KERAS_DISTRIBUTION_PROCESS_ID"])
    num_processes = num_processes or 1
    if num_processes == 1:
        return 1, 0
    if not coordinator_address or process_id is None:
        raise ValueError(
            f"{num_processes} processes need the coordinator's address "
            "(host:port of process 0) and this process's id"
        )
    if not 0 <= process_id < num_processes:
        raise ValueError(
            f"the process id must be in 0..{num_processes - 1}; got {process_id}"
        )
    keras.distribution.initialize(coordinator_address, num_processes, process_id)
    return num_processes, process_id


def _tensorflow_devices(devices):
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus and devices and devices > 1:
        # No GPU: split the CPU into logical devices (tests, overhead
        # measurements). Possible only before TensorFlow starts its runtime.
        cpu = tf.config.list_physical_devices("CPU")[0]
        current = tf.config.get_logical_device_configuration(cpu) or []
        if len(current) < devices:
            try:
                tf.config.set_logical_device_configuration(
                    cpu, [tf.config.LogicalDeviceConfiguration()] * devices
                )
            except RuntimeError:
                raise ValueError(
                    f"cannot split the CPU into {devices} devices: TensorFlow "
                    "has already started (split it before any TensorFlow op)"
                ) from None
    kind = "GPU" if gpus else "CPU"
    names = [device.name for device in tf.config.list_logical_devices(kind)]
    return names


def replicas(
    distribute="none",
    *,
    devices=None,
    coordinator_address=None,
    num_processes=None,
    process_id=None,
):
    """Sets up where training runs.

    Args:
        distribute: `"none"` (one device: Keras' default placement) or
            `"data_parallel"`.
        devices: with `"data_parallel"`, how many devices to use (default:
            all; on a CPU-only machine, TensorFlow splits the CPU into that
            many logical devices, and JAX needs `XLA_FLAGS=
            --xla_force_host_platform_device_count=N` set before it starts;
            the recipes' `--devices` sets it). Single-process only.
        coordinator_address, num_processes, process_id: JAX multi-process
            training (`keras.distribution.initialize`); default from
            `KERAS_DISTRIBUTION_JOB_ADDRESSES`,
            `KERAS_DISTRIBUTION_NUM_PROCESSES`,
            `KERAS_DISTRIBUTION_PROCESS_ID`.

    Returns:
        A `Replicas`.

    Raises:
        ValueError: an unknown strategy, too few devices, multi-process
            training on TensorFlow, or missing multi-process settings.
    """
    if distribute not in STRATEGIES:
        raise ValueError(f"distribute must be one of {STRATEGIES}; got {distribute!r}")
    if distribute == "none":
        return Replicas()
    backend = keras.backend.backend()
    if backend == "tensorflow":
        several = num_processes or int(os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES", 1))
        if several > 1:
            raise ValueError(
                "multi-process (multi-worker) training needs the JAX backend: "
                "Keras 3's model.fit on TensorFlow has no multi-worker strategy "
                "(docs/distributed.md)"
            )
        import tensorflow as tf

        names = _tensorflow_devices(devices)
        if devices:
            if len(names) < devices:
                raise ValueError(f"{devices} devices asked for, {len(names)} found: {names}")
            names = names[:devices]
        strategy = tf.distribute.MirroredStrategy(names)
        return Replicas(
            num_replicas=strategy.num_replicas_in_sync, strategy=strategy, devices=tuple(names)
        )
    if backend != "jax":
        raise ValueError(f"data_parallel supports the JAX and TensorFlow backends, not {backend}")
    processes, process = _initialize_processes(coordinator_address, num_processes, process_id)
    found = keras.distribution.list_devices()
    if devices:
        if processes > 1:
            raise ValueError("devices applies to one process; with several, every device is used")
        if len(found) < devices:
            raise ValueError(
                f"{devices} devices asked for, {len(found)} found ({found}); on a "
                "CPU set XLA_FLAGS=--xla_force_host_platform_device_count="
                f"{devices} before JAX starts"
            )
        found = found[:devices]
    # The recipes feed each process its own rows (`Replicas.local_rows`),
    # from generators as well as tf.data: Keras must not shard them again.
    keras.distribution.set_distribution(
        keras.distribution.DataParallel(devices=found, auto_shard_dataset=False)
    )
    return Replicas(
        num_replicas=len(found),
        num_processes=processes,
        process_id=process,
        devices=tuple(str(d) for d in found),
    )


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
            evenly over its replicas (with dict batches, a stream that does
            not end in `batch` did not train on the single-device batches;
            docs/distributed.md). Without it, every batch must have the
            shapes of the first (static shapes, as XLA and the replicas'
            split want them).

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


def scratch_folder(replicas, kind):
    """A temporary folder of this process, deleted at exit: where a process
    other than 0 writes the files that process 0 writes for the run.

    Args:
        replicas: the run's `Replicas`.
        kind: a word for the folder's name ("checkpoints").

    Returns:
        The folder's path.
    """
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix=f"process-{replicas.process_id}-{kind}-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def chief_writers(replicas, make):
    """The callbacks that write a run's files, on process 0 only.

    Every other process of a multi-process run saves the same checkpoints
    into a `scratch_folder` of its own: JAX runs a save's transfers in
    every process alike (it checks that the processes agree), so one
    process alone cannot save.

    Args:
        replicas: the run's `Replicas`.
        make: a function of no arguments returning the callbacks (history,
            checkpoints, logs).

    Returns:
        A list of Keras callbacks.
    """
    if replicas.is_chief:
        return make()
    from keras_structattn.training.callbacks import EpochCheckpoints

    return [EpochCheckpoints(scratch_folder(replicas, "checkpoints"), keep=1)]
