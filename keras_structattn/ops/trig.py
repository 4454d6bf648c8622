"""Sine and cosine together, fast under XLA.

XLA's CPU sine and cosine are not vectorised, so compiled they are several
times slower than TensorFlow's eager (Eigen) kernel (measured in
docs/performance.md), and the sinusoidal geometry embedding of positional
attention (docs/positional_attention.md) needs tens of millions of them
per batch. `sin_cos` therefore evaluates them as plain
multiply-adds that XLA fuses and vectorises, and keeps the backend's own
kernels where ops run one at a time (TensorFlow eager or graph without XLA),
where two dozen separate elementwise ops would be slower instead.

Each value costs one range reduction and one odd polynomial, so that a fused
loop writing sines or cosines evaluates nothing it does not keep:

    sin x = (-1)^k sin(x - k pi),         k = round(x / pi)
    cos x = (-1)^(k+1) sin(x - (k + 1/2) pi),  k = floor(x / pi)

with both remainders in [-pi/2, pi/2], taken in three parts of pi/2
(Cody-Waite) so that `n pi/2` is exact for |n| < 2^16. The polynomial
`r + r s (c1 + s (c2 + s (c3 + s c4)))`, s = r^2, is this project's own
least-squares fit of sin on [-pi/2, pi/2] for relative error (6e-9 in
float64). Evaluated in float32 the error is within 1.2e-7 of the float64
result for |x| up to ~10^4 (the float32 rounding of x itself is larger
beyond |x| ~ 2), the accuracy of the built-in kernels.
"""

import numpy as np
from keras import backend
from keras import ops

# pi/2 split so that n * _HALF_PI_HI is exact in float32 for |n| < 2^16.
_HALF_PI_HI = np.float32(1.5703125)
_HALF_PI_MID = np.float32(4.837512969970703125e-4)
_HALF_PI_LO = np.float32(7.54978995489188216e-8)
_INV_PI = np.float32(1.0 / np.pi)
# sin r = r + r s (c1 + s (c2 + s (c3 + s c4))) on [-pi/2, pi/2], s = r^2.
_SIN = (
    np.float32(-0.16666659712791443),
    np.float32(0.00833306647837162),
    np.float32(-0.00019809602235909551),
    np.float32(2.605780537123792e-06),
)


def tracing_for_xla():
    """Whether ops are being traced for XLA, where fused elementwise
    arithmetic is cheap and some kernels (sine, small dots) are slow.

    Returns:
        True under JAX (every op runs through XLA) and while TensorFlow
        traces a `jit_compile=True` function; False otherwise.
    """
    name = backend.backend()
    if name == "jax":
        return True  # every JAX op runs through XLA, eager or jitted
    if name == "tensorflow":
        import tensorflow as tf

        if tf.executing_eagerly():
            return False
        try:  # set while tracing a tf.function(jit_compile=True)
            from tensorflow.python.framework import ops as tf_ops
            from tensorflow.python.ops import control_flow_util
        except ImportError:  # pragma: no cover - a TF without these internals
            return False
        return control_flow_util.GraphOrParentsInXlaContext(tf_ops.get_default_graph())
    return False


def _sin_of_remainder(x, half_turns):
    """`sin(x - half_turns * pi/2)` for a remainder in [-pi/2, pi/2]."""
    r = ((x - half_turns * _HALF_PI_HI) - half_turns * _HALF_PI_MID) - half_turns * _HALF_PI_LO
    s = r * r
    return r + r * s * (_SIN[0] + s * (_SIN[1] + s * (_SIN[2] + s * _SIN[3])))


def _parity_sign(k):
    """`(-1)^k` for a float tensor of integers."""
    half = k * 0.5
    return 1.0 - 4.0 * (half - ops.floor(half))


def polynomial_sin_cos(x):
    """`(sin x, cos x)` in float32 from multiply-adds (see module).

    Args:
        x: a float tensor (cast to float32).

    Returns:
        two float32 tensors shaped like `x`, within 1.2e-7 of float64
        results for |x| up to ~10^4.
    """
    x = ops.cast(x, "float32")
    turns = x * _INV_PI
    k = ops.round(turns)
    sin_x = _parity_sign(k) * _sin_of_remainder(x, 2.0 * k)
    k = ops.floor(turns)
    cos_x = -_parity_sign(k) * _sin_of_remainder(x, 2.0 * k + 1.0)
    return sin_x, cos_x


def sin_cos(x):
    """`(sin x, cos x)`, float32: fused polynomials when compiled by XLA,
    the backend's kernels otherwise.

    Args:
        x: a float tensor (cast to float32).

    Returns:
        two float32 tensors shaped like `x`.
    """
    if tracing_for_xla():
        return polynomial_sin_cos(x)
    x = ops.cast(x, "float32")
    return ops.sin(x), ops.cos(x)
