"""Weights and tensors as NumPy, for the layer tests' float64 references.

The layer tests compare a layer with a NumPy reference computed from the
layer's own (randomised) weights; these are the helpers they share.
"""

import numpy as np
from keras import ops


def to_np(x):
    """A backend tensor (any float width, bfloat16 included) as float64."""
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")), dtype=np.float64)


def weights_by_name(layer):
    """The layer's variables as float64 arrays keyed by their path below the
    layer, e.g. "query/kernel" or "dictionary/embeddings"."""
    return {w.path.split("/", 1)[1]: to_np(w) for w in layer.weights}


def weights_by_last_names(layer):
    """{"query/kernel": ..., ...}: sublayer/variable, whatever the nesting."""
    return {"/".join(w.path.split("/")[-2:]): to_np(w) for w in layer.weights}


def randomize(layer, seed, scale=0.5):
    """Random weights, biases included (so that every bias shows)."""
    rng = np.random.default_rng(seed)
    layer.set_weights(
        [rng.normal(scale=scale, size=w.shape).astype("float32") for w in layer.get_weights()]
    )
