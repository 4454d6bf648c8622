"""Argument checks shared by the whole library: ops, layers, decoders, data, models.

The lowest layer of the package: it imports nothing from `keras_structattn`,
so any module may use it. Each check raises a `ValueError` that names the
argument, the allowed values and what was received, as early as the value
is known, and returns the value (converted where said) so that a check
reads as an assignment:

    num_heads = checks.positive_int("num_heads", num_heads)

Python values: `boolean`, `positive_int`, `non_negative_int`,
`positive_float`, `non_negative_float`, `rate` (in [0, 1)), `one_of`,
`token_id`. Tensors: `rank`, `known_values` (the concrete values of a
tensor, or None while tracing), `box_values` (boxes in `[x1, y1, x2, y2]`),
`grid` (a flat length that is a grid of a given height) and `initial_ids`
(the `[B]` start ids of a decoder).
"""

import sys

import keras
import numpy as np
from keras import ops


def _int_at_least(name, value, minimum, kind):
    # Bools are ints in Python but never a size or a count here.
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(
            f"Argument `{name}` must be a {kind} integer. Received: {name}={value!r}"
        )
    return value


def boolean(name, value):
    """Checks that `value` is True or False (not merely truthy)."""
    if not isinstance(value, bool):
        raise ValueError(f"Argument `{name}` must be True or False. Received: {name}={value!r}")
    return value


def positive_int(name, value):
    """Checks that `value` is an int >= 1 (bools are not ints here)."""
    return _int_at_least(name, value, 1, "positive")


def non_negative_int(name, value):
    """Checks that `value` is an int >= 0."""
    return _int_at_least(name, value, 0, "non-negative")


def positive_float(name, value):
    """Checks that `value` is a real number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(
            f"Argument `{name}` must be a positive number. "
            f"Received: {name}={value!r}"
        )
    return float(value)


def rate(name, value):
    """Checks that `value` is a probability in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(
            f"Argument `{name}` must be a number in [0, 1). "
            f"Received: {name}={value!r}"
        )
    return float(value)


def one_of(name, value, allowed):
    """Checks that `value` is one of `allowed`."""
    if value not in allowed:
        raise ValueError(
            f"Argument `{name}` must be one of {list(allowed)}. "
            f"Received: {name}={value!r}"
        )
    return value


def grid(length, memory_height):
    """Checks a memory layout and returns `(height, width)` of its grid."""
    positive_int("memory_height", memory_height)
    if length is None:
        raise ValueError(
            "Area attention needs a static memory length; received a memory "
            "axis of unknown size (None)."
        )
    if length < 1 or length % memory_height:
        raise ValueError(
            "The memory length must be a positive multiple of "
            f"`memory_height`. Received: length={length}, "
            f"memory_height={memory_height}"
        )
    return memory_height, length // memory_height


def rank(name, tensor, expected):
    """Checks the rank of a tensor argument."""
    if len(tensor.shape) != expected:
        raise ValueError(
            f"Argument `{name}` must have rank {expected}. "
            f"Received: {name}.shape={tuple(tensor.shape)}"
        )


# --------------------------------------------------------------------------
# Checks of values. They run only where the values are known (NumPy inputs,
# eager tensors), never inside traced code: compiled code has one fixed rule
# for bad values instead (documented where each check is used), and a
# `keras.Model`, `tf.function` or `jax.jit` never branches on tensor values.


def known_values(x):
    """The values of `x` as a NumPy array if they are known now, else None.

    Known: NumPy arrays and Python numbers or lists, TensorFlow eager tensors
    while executing eagerly, and concrete JAX arrays. Unknown: KerasTensors,
    the graph tensors of a `tf.function` (a Keras model's `fit` / `predict`)
    and JAX tracers (`jax.jit`, `grad`, `remat`, ...). Reading an eager
    tensor copies it to the host, so only eager calls pay for the checks.

    Args:
        x: a tensor, an array-like or None.

    Returns:
        A NumPy array, or None (also for None and for unknown types).
    """
    if x is None or isinstance(x, keras.KerasTensor):
        return None
    if isinstance(x, (np.ndarray, np.generic, int, float, bool, list, tuple)):
        return np.asarray(x)
    # Only a module that is already imported can have made `x`.
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(x, tf.Tensor):
        if tf.executing_eagerly() and not tf.is_symbolic_tensor(x):
            return x.numpy()
        return None
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(x, jax.Array):
        if isinstance(x, jax.core.Tracer):
            return None
        return np.asarray(x)
    return None


# Slack on the [0, 1] range of normalised coordinates: `x / W` may round
# just past 1.
NORMALISED_SLACK = 1e-6


def box_values(name, boxes, valid=None, normalised=True, positive_size=False, advice=""):
    """Checks the values of boxes `[..., N, 4]`, `[x1, y1, x2, y2]`, if known.

    Padding boxes are not checked: those where `valid` is False or, without
    `valid`, the all-zero rows. Nothing is checked while the values (of the
    boxes or of `valid`) are unknown (see `known_values`).

    Args:
        name: the argument's name, for the error.
        boxes: a tensor or array-like `[..., N, 4]` (shape already checked).
        valid: None, or a boolean `[..., N]`: which boxes are real.
        normalised: whether coordinates must lie in [0, 1] (within
            `NORMALISED_SLACK`).
        positive_size: whether a real box must have a positive width and
            height (where the geometry divides by them).
        advice: a sentence appended to the errors about the range and the
            size.

    Raises:
        ValueError: naming the first offending box and its index, for a
            non-finite coordinate, `x2 < x1` or `y2 < y1`, a coordinate
            outside [0, 1] (`normalised`) or a zero width or height
            (`positive_size`).
    """
    values = known_values(boxes)
    if values is None or values.size == 0:
        return
    if valid is None:
        real = np.any(values != 0, axis=-1)
    else:
        real = known_values(valid)
        if real is None:
            return
        real = np.broadcast_to(real.astype(bool), values.shape[:-1])
    x1, y1, x2, y2 = (values[..., i].astype(np.float64) for i in range(4))

    def report(bad, requirement, finding, hint=""):
        bad = bad & real
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            box = ", ".join(str(v) for v in values[index])
            raise ValueError(
                f"Argument `{name}` must hold boxes [x1, y1, x2, y2] {requirement}. "
                f"Received: {name}[{', '.join(map(str, index))}] = [{box}] ({finding}).{hint}"
            )

    # The range first: pixel coordinates are named as such even where some
    # box is also reversed.
    report(~np.isfinite(values).all(axis=-1), "of finite numbers", "not finite")
    if normalised:
        corners = np.stack([x1, y1, x2, y2], axis=-1)
        outside = (corners < -NORMALISED_SLACK) | (corners > 1 + NORMALISED_SLACK)
        report(
            outside.any(axis=-1),
            "normalised to [0, 1]",
            "outside [0, 1]",
            " Pixel coordinates must be divided by the image size (x / width, "
            "y / height)." + advice,
        )
    report(x2 < x1, "with x1 <= x2 and y1 <= y2", "x2 < x1")
    report(y2 < y1, "with x1 <= x2 and y1 <= y2", "y2 < y1")
    if positive_size:
        positive = (
            "with a positive width and height (the box geometry divides by them), "
            "or all-zero padding rows"
        )
        report(x2 == x1, positive, "zero width", advice)
        report(y2 == y1, positive, "zero height", advice)


# ------------------------------------------------------------ decoders


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
