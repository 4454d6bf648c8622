"""Decoder caches: nested structures of tensors with a leading batch axis.

The decoders never look inside a cache; they only tile it over beams,
gather the rows of surviving beams, and hold its structure fixed across loop
iterations (a while loop needs the same structure, shapes and dtypes in and
out).
"""

import keras
from keras import ops


def as_cache(cache):
    """Converts every leaf to a tensor; `None` becomes an empty dict."""
    if cache is None:
        return {}
    return keras.tree.map_structure(ops.convert_to_tensor, cache)


def like(reference, cache):
    """Repacks `cache` into the structure of `reference`.

    `step_fn` may rebuild its cache with a list where it received a tuple;
    the loop needs the structure it started with, so the leaves (in order)
    are packed back into it.
    """
    return keras.tree.pack_sequence_as(reference, keras.tree.flatten(cache))


def tile(cache, beam_size):
    """Tiles each leaf `[B, ...]` to `[B * beam_size, ...]`, beam-major per row.

    Row `b`'s copies are at `b * beam_size ... b * beam_size + beam_size - 1`.
    """
    return keras.tree.map_structure(lambda x: ops.repeat(x, beam_size, axis=0), cache)


def gather(cache, flat_indices):
    """Takes rows `flat_indices` (int `[N]`) of each leaf along axis 0."""
    return keras.tree.map_structure(lambda x: ops.take(x, flat_indices, axis=0), cache)
