"""Feeding indexed data to `model.fit`: resumable epochs and data parallelism.

A data set here is `count` items and a `make_batch(indices)` function that
builds the arrays of some of them. `epoch_batches` yields the training
batches of any step, so a resumed run reads what an uninterrupted one
would; `OrderedBatches` and `validation_batches` give the items in order;
`feed` builds a batch as data-parallel `fit` takes it (see
`keras_structattn.training.distribution.Replicas`).
"""

import itertools
import math

import keras
import numpy as np

# Validation items per epoch (the first ones, in order).
VALIDATION_LIMIT = 2000


def steps_per_epoch(count, batch_size):
    """Full batches of `batch_size` in `count` items (at least 1)."""
    return max(1, count // batch_size)


def feed(replicas, make_batch, rows, *extra):
    """`make_batch(rows, *extra)` as data-parallel `fit` takes it.

    With several processes each makes only its block of the global batch
    `rows` (`Replicas.local_rows`). Under TensorFlow's MirroredStrategy
    bool arrays (the padding masks) are fed as float32 0/1: Keras (3.15)
    averages the first batch over the replicas to build the model
    symbolically, which TensorFlow's AddN refuses for bool; models cast
    their masks to bool.

    Args:
        replicas: a `Replicas`, or None (one device, one process).
        make_batch: builds the batch of an index array (and `extra`).
        rows: the global batch's item indices.
        *extra: more arguments of `make_batch`.

    Returns:
        The batch (this process's rows of it).
    """
    if replicas is None:
        return make_batch(rows, *extra)
    batch = make_batch(replicas.local_rows(rows), *extra)
    if replicas.strategy is not None:
        batch = keras.tree.map_structure(
            lambda a: a.astype("float32")
            if isinstance(a, np.ndarray) and a.dtype == np.bool_ else a, batch)
    return batch


def epoch_batches(count, batch_size, seed, make_batch, start=0, with_epoch=False,
                  replicas=None):
    """Training batches, forever, from step `start`.

    Step `s` is batch `s % per_epoch` of epoch `s // per_epoch`, each epoch
    a permutation of the `count` items drawn from `(seed, epoch)` with the
    last incomplete batch dropped (as MCAN), so a resumed run reads what an
    uninterrupted one would, on any number of devices.

    Args:
        count: the number of items.
        batch_size: the global batch size.
        seed: the seed of the epochs' permutations.
        make_batch: `make_batch(indices)`, or `make_batch(indices, epoch)`
            with `with_epoch` (targets sampled anew each epoch).
        start: the first step.
        with_epoch: whether `make_batch` takes the epoch.
        replicas: see `feed`.

    Yields:
        The batches (`feed`).
    """
    per_epoch = steps_per_epoch(count, batch_size)
    order, order_epoch = None, None
    for step in itertools.count(start):
        epoch, offset = divmod(step, per_epoch)
        if epoch != order_epoch:
            order = np.random.default_rng([seed, epoch]).permutation(count)
            order_epoch = epoch
        rows = order[offset * batch_size:(offset + 1) * batch_size]
        yield feed(replicas, make_batch, rows, *((epoch,) if with_epoch else ()))


class OrderedBatches(keras.utils.PyDataset):
    """Items `0..count-1` in order, in global batches of `make_batch(indices)`
    (the last one short), fed for `replicas` (see `feed`)."""

    def __init__(self, count, batch_size, make_batch, replicas=None):
        super().__init__()
        self.count, self.batch_size, self.make_batch = count, batch_size, make_batch
        self.replicas = replicas

    def __len__(self):
        return math.ceil(self.count / self.batch_size)

    def __getitem__(self, index):
        begin = index * self.batch_size
        rows = np.arange(begin, min(self.count, begin + self.batch_size))
        return feed(self.replicas, self.make_batch, rows)


def validation_batches(count, batch_size, make_batch, replicas):
    """The validation data of `fit`: the first `VALIDATION_LIMIT` items in order.

    They are rounded down to a multiple of the replicas (data-parallel `fit`
    splits every batch, the last short one too: JAX refuses a batch that
    does not divide), printing how many were left out.

    Args:
        count: the number of items.
        batch_size: the global batch size.
        make_batch: builds the batch of an index array.
        replicas: a `Replicas`.

    Returns:
        An `OrderedBatches`, or None when no item is left.
    """
    wanted = min(count, VALIDATION_LIMIT)
    used = wanted - wanted % replicas.num_replicas
    if used < wanted:
        print(f"[train] validation: {wanted - used} of {wanted} items left out, so that "
              f"every batch splits over the {replicas.num_replicas} replicas")
    if not used:
        return None
    return OrderedBatches(used, batch_size, make_batch, replicas)
