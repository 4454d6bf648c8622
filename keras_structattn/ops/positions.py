"""Sinusoidal position signals (tensor2tensor's `get_timing_signal_1d`)."""

import math

from keras import ops


def timing_signal(positions, channels, min_timescale=1.0, max_timescale=1.0e4):
    """Sinusoids of the positions, `[sin | cos]`, always in float32.

    tensor2tensor layout: the first `channels // 2` channels are sines and
    the next ones cosines, over geometrically spaced timescales from
    `min_timescale` to `max_timescale` (an odd `channels` gets a zero last
    channel). Computed in float32 whatever the dtype policy: in bfloat16 the
    position 1000 cannot even be represented exactly, and the sinusoids of
    nearby positions would collide.

    Args:
        positions: int or float tensor of positions, any shape `[...]`.
        channels: the depth of the signal.
        min_timescale, max_timescale: the shortest and longest wavelengths
            (over 2 pi).

    Returns:
        float32 `[..., channels]`.
    """
    if not isinstance(channels, int) or channels < 1:
        raise ValueError(
            f"Argument `channels` must be a positive int. Received: {channels!r}"
        )
    num_timescales = channels // 2
    positions = ops.cast(positions, "float32")
    if num_timescales == 0:
        return ops.zeros(tuple(ops.shape(positions)) + (channels,), "float32")
    increment = math.log(float(max_timescale) / float(min_timescale)) / max(
        num_timescales - 1, 1
    )
    inverse = min_timescale * ops.exp(
        ops.arange(num_timescales, dtype="float32") * -increment
    )
    scaled = ops.expand_dims(positions, -1) * inverse
    signal = ops.concatenate([ops.sin(scaled), ops.cos(scaled)], axis=-1)
    if channels % 2:
        signal = ops.pad(signal, [[0, 0]] * (len(signal.shape) - 1) + [[0, 1]])
    return signal
