"""Keras-mask plumbing and MHA-option checks shared by the layers.

Keras 3 keeps the implicit mask of a tensor in a private attribute; its own
`MultiHeadAttention` reads and writes it through these backend helpers, which
are not exported under `keras.*`; `compute_output_spec` traces a function
symbolically, as `keras.layers.Layer` does for layers without their own
spec. We pin `keras<4`, so importing them from `keras.src` is safe, and
keeping the import in one place makes a future move a one-line change.
"""

from keras.src.backend import compute_output_spec  # noqa: F401
from keras.src.backend import get_keras_mask  # noqa: F401
from keras.src.backend import set_keras_mask  # noqa: F401


def check_explicit_attention_options(kwargs, layer_name):
    """Rejects the `keras.layers.MultiHeadAttention` options that the layers
    with an explicit, float32, zero-row softmax over axis 1 cannot honour.

    Args:
        kwargs: the MHA keyword arguments a layer received.
        layer_name: the layer's class name (for the errors).
    """
    if kwargs.get("attention_axes") not in (None, 1, (1,), [1]):
        raise ValueError(
            f"{layer_name}: argument `attention_axes` must be None (attention over axis 1 "
            f"of [B, T, dim] inputs). Received: attention_axes={kwargs['attention_axes']!r}"
        )
    if kwargs.get("flash_attention"):
        raise ValueError(
            f"{layer_name}: argument `flash_attention` must be False or None: the flash "
            "kernels cannot give zero outputs to rows without an allowed key. "
            f"Received: flash_attention={kwargs['flash_attention']!r}"
        )


def check_sequence_shapes(layer, query_shape, value_shape):
    """Raises a ValueError unless query and value are `[B, T, dim]`."""
    if len(query_shape) != 3 or len(value_shape) != 3:
        raise ValueError(
            f"{type(layer).__name__} takes [B, T, dim] query and value. Received: "
            f"query_shape={tuple(query_shape)}, value_shape={tuple(value_shape)}"
        )

