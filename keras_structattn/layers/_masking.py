"""Keras-mask plumbing, MHA-option and attention-mask checks shared by the layers.

Keras 3 keeps the implicit mask of a tensor in a private attribute; its own
`MultiHeadAttention` reads and writes it through these backend helpers, which
are not exported under `keras.*`; `compute_output_spec` traces a function
symbolically, as `keras.layers.Layer` does for layers without their own
spec. We pin `keras<4`, so importing them from `keras.src` is safe, and
keeping the import in one place makes a future move a one-line change.
"""

import numpy as np
from keras import ops
from keras.src.backend import compute_output_spec  # noqa: F401
from keras.src.backend import get_keras_mask  # noqa: F401
from keras.src.backend import set_keras_mask  # noqa: F401
from keras.src.backend import standardize_dtype

from keras_structattn.checks import known_values


def check_explicit_attention_options(kwargs, layer_name):
    """Rejects the `keras.layers.MultiHeadAttention` option that the layers,
    attending over axis 1 of `[B, T, dim]` inputs, cannot honour: other
    `attention_axes`.

    Args:
        kwargs: the MHA keyword arguments a layer received.
        layer_name: the layer's class name (for the errors).
    """
    if kwargs.get("attention_axes") not in (None, 1, (1,), [1]):
        raise ValueError(
            f"{layer_name}: argument `attention_axes` must be None (attention over axis 1 "
            f"of [B, T, dim] inputs). Received: attention_axes={kwargs['attention_axes']!r}"
        )


def check_value_key_shapes(value_shape, key_shape=None):
    """Keras MHA's first check of `build`, with its message: `value` and
    `key` agree on every axis but the last. (A layer checks this before its
    own shape rules, so that the error of a mismatch is Keras'.)"""
    if key_shape is None:
        return
    value_shape, key_shape = tuple(value_shape), tuple(key_shape)
    if value_shape[1:-1] != key_shape[1:-1]:
        raise ValueError(
            "All dimensions of `value` and `key`, except the last one, "
            f"must be equal. Received: value_shape={value_shape} and "
            f"key_shape={key_shape}"
        )


def check_sequence_shapes(layer, query_shape, value_shape):
    """Raises a ValueError unless query and value are `[B, T, dim]`."""
    if len(query_shape) != 3 or len(value_shape) != 3:
        raise ValueError(
            f"{type(layer).__name__} takes [B, T, dim] query and value. Received: "
            f"query_shape={tuple(query_shape)}, value_shape={tuple(value_shape)}"
        )


def boolean_attention_mask(layer, attention_mask, batch_size, query_length, key_length):
    """A call's `attention_mask`, checked, as a boolean tensor.

    The one check of every layer's `attention_mask` (`StructuredMultiHeadAttention.
    _merged_mask` calls it), as Keras MHA accepts it: `[T, S]`, `[B, T, S]` or
    `[B, N, T, S]` with N = `num_heads`, any axis 1 to broadcast. Static sizes
    that do not fit raise a ValueError naming both shapes.

    A non-boolean mask must hold 0 and 1 only. Where its values are known
    (eager calls) anything else raises a ValueError: an additive mask of
    tensor2tensor (0 = may attend, -1e9 = blocked) read as booleans would
    mean the opposite. Where they are not (compiled code), the rule is
    `mask > 0`: 0/1 masks mean what they mean in Keras MHA, and a negative
    number never lets a query attend (Keras MHA casts it to True).

    Args:
        layer: the layer (its name and `num_heads`, for the check).
        attention_mask: the mask, a tensor or NumPy array.
        batch_size, query_length, key_length: B, T and S (None if unknown).

    Returns:
        A boolean tensor of the mask's shape.
    """
    if not hasattr(attention_mask, "dtype"):  # a nested list
        attention_mask = ops.convert_to_tensor(attention_mask)
    check_attention_mask_shape(layer, attention_mask, batch_size, query_length, key_length)
    if standardize_dtype(attention_mask.dtype) == "bool":
        return attention_mask
    values = known_values(attention_mask)
    if values is not None:
        _check_zero_one(values, standardize_dtype(attention_mask.dtype))
    return ops.greater(attention_mask, 0)


def check_attention_mask_shape(layer, attention_mask, batch_size, query_length, key_length):
    """Raises a ValueError unless `attention_mask` is `[T, S]`, `[B, T, S]`
    or `[B, N, T, S]` (any axis may be 1); see `boolean_attention_mask`."""
    shape = tuple(_static(d) for d in attention_mask.shape)
    batch_size, query_length, key_length = (
        _static(d) for d in (batch_size, query_length, key_length)
    )
    forms = {
        2: (query_length, key_length),
        3: (batch_size, query_length, key_length),
        4: (batch_size, layer.num_heads, query_length, key_length),
    }
    wanted = forms.get(len(shape))
    if wanted is not None and all(
        got is None or want is None or got in (1, want) for got, want in zip(shape, wanted)
    ):
        return
    raise ValueError(
        f"{type(layer).__name__}: argument `attention_mask` must be [T, S], [B, T, S] or "
        f"[B, N, T, S] for B = {batch_size} examples, T = {query_length} queries, "
        f"S = {key_length} keys and N = num_heads = {layer.num_heads}, any axis may be 1 "
        f"(it broadcasts): here {' or '.join(str(f) for f in forms.values())}. "
        f"Received: attention_mask.shape={shape}"
    )


def _static(size):
    """A static size as an int, or None (unknown, or a symbolic dimension
    of a JAX trace)."""
    return size if isinstance(size, int) else None


def _check_zero_one(values, dtype):
    """Raises a ValueError if a non-boolean mask holds anything but 0 and 1."""
    bad = (values != 0) & (values != 1)
    if not bad.any():
        return
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    advice = "Pass a boolean mask (True = may attend)"
    if (values[bad] < 0).any():
        advice = (
            "It looks like an additive mask (0 = may attend, a large negative number = "
            "blocked), which read as booleans would mean the opposite. Pass a boolean "
            "mask (True = may attend), e.g. `attention_mask=additive_mask == 0`"
        )
    raise ValueError(
        "Argument `attention_mask` must be a boolean mask (True = may attend) or hold "
        f"only 0 and 1. Received: a {dtype} mask holding {values[index].item()!r} at "
        f"{list(index)}. {advice}."
    )
