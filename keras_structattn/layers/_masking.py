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
