"""Keras-mask plumbing and MHA-option checks shared by the layers.

Keras 3 keeps the implicit mask of a tensor in a private attribute; its own
`MultiHeadAttention` reads and writes it through these backend helpers, which
are not exported under `keras.*`. We pin `keras<4`, so importing them from
`keras.src` is safe, and keeping the import in one place makes a future move
a one-line change.
"""

from keras.src.backend import get_keras_mask  # noqa: F401
from keras.src.backend import set_keras_mask  # noqa: F401


def check_explicit_attention_options(kwargs, why):
    """Rejects the `keras.layers.MultiHeadAttention` options that the layers
    with an explicit, float32, zero-row softmax over axis 1 cannot honour.

    Args:
        kwargs: the MHA keyword arguments a layer received.
        why: the reason flash kernels cannot serve that layer (for the error).
    """
    if kwargs.get("attention_axes") not in (None, 1, (1,), [1]):
        raise ValueError(
            "Argument `attention_axes` must be None (attention over axis 1 of "
            f"[B, T, dim] inputs). Received: attention_axes={kwargs['attention_axes']!r}"
        )
    if kwargs.get("flash_attention"):
        raise ValueError(f"Argument `flash_attention` must be False or None: {why}.")


def merged_attention_mask(
    layer, query, value, key, query_mask, value_mask, key_mask, attention_mask, use_causal_mask
):
    """Every mask of a MHA-style call merged into one boolean `[B, T, S]`.

    `Layer.__call__` has already turned the inputs' Keras masks into the
    `*_mask` arguments, so they are cleared from the tensors (as Keras MHA
    does) before Keras MHA's own `_compute_attention_mask` merges the
    padding, explicit and causal masks.

    Returns:
        a boolean `[B, T, S]` tensor (True = may attend), or None.
    """
    for tensor in (query, value, key):
        set_keras_mask(tensor, None)
    return layer._compute_attention_mask(
        query,
        value,
        query_mask=query_mask,
        value_mask=value_mask,
        key_mask=key_mask,
        attention_mask=attention_mask,
        use_causal_mask=use_causal_mask,
    )


def check_sequence_shapes(layer, query_shape, value_shape):
    """Raises a ValueError unless query and value are `[B, T, dim]`."""
    if len(query_shape) != 3 or len(value_shape) != 3:
        raise ValueError(
            f"{type(layer).__name__} takes [B, T, dim] query and value. Received: "
            f"query_shape={tuple(query_shape)}, value_shape={tuple(value_shape)}"
        )
