"""Argument checks shared by the ops and layers.

Each raises a `ValueError` that names the argument, the allowed values and
what was received, as early as the value is known.
"""


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
