"""Argument checks of the decoders.

Each raises a `ValueError` that names the argument, the allowed values and
what was received, before anything is traced or run.
"""

from keras import ops

from keras_structattn.ops._checks import positive_int


def non_negative_float(name, value):
    """Checks that `value` is a real number >= 0 (bools are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(
            f"Argument `{name}` must be a non-negative number. "
            f"Received: {name}={value!r}"
        )
    return float(value)


def token_id(name, value, vocab_size=None):
    """Checks that `value` is a token id: an int in `[0, vocab_size)`."""
    valid = not isinstance(value, bool) and isinstance(value, int) and value >= 0
    if valid and vocab_size is not None:
        valid = value < vocab_size
    if not valid:
        allowed = "[0, vocab_size)" if vocab_size is not None else ">= 0"
        raise ValueError(
            f"Argument `{name}` must be an integer token id in {allowed}. "
            f"Received: {name}={value!r}"
            + (f", vocab_size={vocab_size}" if vocab_size is not None else "")
        )
    return value


def initial_ids(value):
    """Converts `initial_ids` to an int32 tensor and checks it is `[B]`."""
    ids = ops.cast(ops.convert_to_tensor(value), "int32")
    if len(ids.shape) != 1:
        raise ValueError(
            "Argument `initial_ids` must be a rank-1 tensor `[batch]` of "
            f"token ids. Received: initial_ids.shape={tuple(ids.shape)}"
        )
    return ids


__all__ = ["initial_ids", "non_negative_float", "positive_int", "token_id"]
