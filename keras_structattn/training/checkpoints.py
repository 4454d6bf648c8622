"""Finding and averaging the weight checkpoints of a run.

`keras_structattn.training.callbacks.EpochCheckpoints` writes `ckpt-{epoch}.weights.h5`
files into a folder during `fit`; this module reads that folder:

    paths = checkpoint_paths("run/checkpoints")          # oldest first
    model.load_weights(latest_checkpoint("run/checkpoints"))
    average_checkpoints(model, paths[-5:])               # model holds the mean
    model.save_weights("run/averaged.weights.h5")

Averaging the weights of the last checkpoints of a run is the tensor2tensor
practice for translation (`avg_checkpoints`, used for the Transformer of
Vaswani et al., 2017, arXiv:1706.03762, Section 6.1).
"""

import os
import warnings

import h5py
import keras
import numpy as np

from keras_structattn.training.callbacks import list_checkpoints


def checkpoint_paths(directory, readable_only=False):
    """The checkpoint files of `directory`, oldest (lowest epoch) first.

    Args:
        directory: a folder written by `EpochCheckpoints` (it need not
            exist: then there are none).
        readable_only: if True, leave out the files `is_readable` rejects,
            with a warning naming each.

    Returns:
        A list of paths; empty when there are none.
    """
    paths = [path for _, path in list_checkpoints(directory)]
    if readable_only:
        paths = [path for path in paths if _readable_or_warn(path)]
    return paths


def latest_checkpoint(directory):
    """The newest readable checkpoint file of `directory`.

    Unreadable ones (cut off by a kill or a full disk while another tool
    wrote them) are skipped with a warning naming each.

    Args:
        directory: a folder written by `EpochCheckpoints`.

    Returns:
        Its path.

    Raises:
        FileNotFoundError: if `directory` holds no readable checkpoint
            (names it).
    """
    for path in reversed(checkpoint_paths(directory)):
        if _readable_or_warn(path):
            return path
    raise FileNotFoundError(f"No readable checkpoints in {os.fspath(directory)}")


def is_readable(path):
    """Whether the HDF5 weights file `path` opens and all its arrays read.

    Args:
        path: a weights file.

    Returns:
        A bool; False for a truncated or otherwise damaged file.
    """
    def read(_, obj):
        if isinstance(obj, h5py.Dataset):
            obj[()]  # noqa: B018  (reading is the check)
        # None: `visititems` goes on to the next object.

    try:
        with h5py.File(path, "r") as f:
            f.visititems(read)
    except (OSError, RuntimeError, KeyError, ValueError):
        return False
    return True


def _readable_or_warn(path):
    if is_readable(path):
        return True
    warnings.warn(f"skipping unreadable checkpoint {path}", stacklevel=3)
    return False


def average_checkpoints(model, paths):
    """Sets `model`'s weights to the element-wise mean of checkpoints' weights.

    Each checkpoint is loaded into `model` in turn (so any file that
    `model.load_weights` reads will do, with or without optimizer state);
    floating-point weights are summed in float64 and the mean is rounded
    once to the weight's dtype, so the result does not depend on the order
    of `paths`. A weight that is not floating point (a counter) cannot be
    averaged and takes the value of the last checkpoint. The optimizer state
    is not averaged: save the result with `model.save_weights` and load it
    for inference.

    Args:
        model: a built Keras model with the checkpoints' architecture.
        paths: non-empty sequence of weights files.

    Returns:
        The list of averaged weights (NumPy arrays, in `model.get_weights()`
        order), which `model` now holds.

    Raises:
        ValueError: if `paths` is empty or `model` is not built.
    """
    paths = list(paths)
    if not paths:
        raise ValueError("Argument `paths` must name at least one checkpoint. Received: []")
    if not model.built:
        raise ValueError("`model` must be built before checkpoints are loaded into it")
    total = None
    for path in paths:
        model.load_weights(path)
        weights = model.get_weights()
        if total is None:
            total = [np.zeros(w.shape, np.float64) for w in weights]
        for sum_, w in zip(total, weights):
            sum_ += w
    last = model.get_weights()
    averaged = [
        (s / len(paths)).astype(w.dtype) if _is_floating(w.dtype) else w
        for s, w in zip(total, last)
    ]
    model.set_weights(averaged)
    return averaged


def _is_floating(dtype):
    # Through Keras' names, so that bfloat16 (not a NumPy floating type) counts.
    return "float" in keras.backend.standardize_dtype(dtype)
