"""Token batches split evenly over data-parallel replicas.

The token-bucketed batches (`batching`) vary in rows, while every replica
(and process) of a data-parallel run needs an equal share
(`keras_structattn.training.distribution`): each batch gets all-padding
rows up to a multiple of the replicas, which change no loss, gradient or
accuracy (`PaddedCrossEntropy` and `PaddedAccuracy` count real tokens
only); Keras' epoch averages of the loss, weighted by rows, differ a
little. Each process then feeds its block of every batch
(`Replicas.local_rows`).
"""

import keras
import numpy as np

from keras_structattn.data._tensorflow import tf
from keras_structattn.decoding.tokens import PAD_ID
from keras_structattn.tasks.translation.recorded import Recording


def replica_rows(batch, replicas):
    """A NumPy batch, padded to split evenly over the replicas, then this process's block.

    Args:
        batch: `((source, decoder_inputs), targets)`, each `[rows, length]`.
        replicas: the `Replicas` of the run (every process holds as many
            devices, so the processes split the padded batch evenly too).

    Returns:
        This process's rows of the padded batch; `batch` itself on one device.
    """
    parts = replicas.num_replicas
    if parts == 1:
        return batch

    def pad(array):
        return np.pad(array, ((0, -len(array) % parts), (0, 0)), constant_values=PAD_ID)

    return replicas.local_rows(keras.tree.map_structure(pad, batch))


def replica_batches(dataset, replicas):
    """`replica_rows` of every batch of a `tf.data.Dataset`, in the graph.

    Args:
        dataset: a `tf.data.Dataset` of `((source, decoder_inputs), targets)`.
        replicas: the `Replicas` of the run.

    Returns:
        A `tf.data.Dataset`; `dataset` itself on one device.
    """
    parts = replicas.num_replicas
    if parts == 1:
        return dataset

    def rows(array):
        count = tf.shape(array)[0]
        array = tf.pad(array, [[0, -count % parts], [0, 0]], constant_values=PAD_ID)
        size = tf.shape(array)[0] // replicas.num_processes
        return array[replicas.process_id * size : (replicas.process_id + 1) * size]

    return dataset.map(lambda inputs, targets: tf.nest.map_structure(rows, (inputs, targets)))


class ReplicaRows(keras.utils.PyDataset):
    """`replica_rows` of every batch of a `PyDataset` (e.g. a `Recording`).

    Args:
        batches: a `keras.utils.PyDataset` of NumPy batches.
        replicas: the `Replicas` of the run.
    """

    def __init__(self, batches, replicas):
        super().__init__()
        self.batches, self.replicas = batches, replicas

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, step):
        return replica_rows(self.batches[step], self.replicas)


def replica_recording(recording, replicas, start=0):
    """`replica_rows` of a `Recording`'s batches from `start` on, as `fit` takes them.

    Args:
        recording: a `Recording` (`keras_structattn.tasks.translation.recorded`).
        replicas: the `Replicas` of the run.
        start: the first batch (the steps a resumed run has done).

    Returns:
        A `tf.data.Dataset` on the TensorFlow backend (whose `fit` rejects
        a generator's batches of other shapes than the first ones), else a
        generator: no TensorFlow needed.
    """
    if keras.backend.backend() == "tensorflow":
        return replica_batches(recording.to_tf_dataset(start=start), replicas)
    return (replica_rows(batch, replicas) for batch in recording.iterate(start=start))


def replica_validation(batches, replicas):
    """`replica_rows` of every validation batch, as `fit` takes them.

    Args:
        batches: a `tf.data.Dataset` or a `keras.utils.PyDataset` of
            validation batches (a `Recording` becomes a `tf.data.Dataset` on
            the TensorFlow backend, as in `replica_recording`), or None.
        replicas: the `Replicas` of the run.

    Returns:
        A `ReplicaRows`, or a `tf.data.Dataset`, repeated under a
        `tf.distribute` strategy (its `fit` keeps the validation iterator
        from one epoch to the next: each evaluation reads the next pass, the
        same batches when they are not shuffled); None for None.
    """
    if batches is None:
        return None
    if isinstance(batches, Recording) and keras.backend.backend() == "tensorflow":
        batches = batches.to_tf_dataset()
    elif isinstance(batches, keras.utils.PyDataset):
        return ReplicaRows(batches, replicas)
    batches = replica_batches(batches, replicas)
    return batches if replicas.strategy is None else batches.repeat()
