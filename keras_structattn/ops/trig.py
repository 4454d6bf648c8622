"""Sine and cosine together, fast under XLA.

XLA's CPU sine and cosine are not vectorised: on this project's 2-core CPU,
10M float32 sines take ~130 ms compiled (TF or JAX), against ~45 ms for
TensorFlow's eager (Eigen) kernel. Sinusoidal geometry embeddings need tens
of millions of them per batch. `sin_cos` therefore evaluates both from one
range reduction and two short polynomials, plain multiply-adds that XLA
fuses and vectorises (12x faster there), and keeps the backend's own kernels
where ops run one at a time (TensorFlow eager or graph without XLA), where
two dozen separate elementwise ops would be slower instead.

The polynomials are Cephes' single-precision `sinf`/`cosf` coefficients on
`[-pi/4, pi/4]`, after a three-part Cody-Waite reduction by pi/2; the error
is within 1e-7 of the float64 result for |x| up to ~10^4 (below the float32
rounding of x itself beyond |x| ~ 1), the same accuracy as the built-in
kernels.
"""

import numpy as np
from keras import backend
from keras import ops

# pi/2 split so that n * _HALF_PI_HI is exact in float32 for |n| < 2^15.
_HALF_PI_HI = np.float32(1.5703125)
_HALF_PI_MID = np.float32(4.837512969970703125e-4)
_HALF_PI_LO = np.float32(7.54978995489188216e-8)
_TWO_OVER_PI = np.float32(2.0 / np.pi)
_SIN = (np.float32(-1.6666654611e-1), np.float32(8.3321608736e-3), np.float32(-1.9515295891e-4))
_COS = (np.float32(4.166664568298827e-2), np.float32(-1.388731625493765e-3),
        np.float32(2.443315711809948e-5))


def tracing_for_xla():
    """Whether ops are being traced for XLA, where fused elementwise
    arithmetic is cheap and some kernels (sine, small dots) are slow."""
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


def polynomial_sin_cos(x):
    """`(sin x, cos x)` in float32 from one range reduction (see module)."""
    x = ops.cast(x, "float32")
    quadrant = ops.round(x * _TWO_OVER_PI)
    r = ((x - quadrant * _HALF_PI_HI) - quadrant * _HALF_PI_MID) - quadrant * _HALF_PI_LO
    r2 = r * r
    sin_r = r + r * r2 * (_SIN[0] + r2 * (_SIN[1] + r2 * _SIN[2]))
    cos_r = 1.0 - 0.5 * r2 + r2 * r2 * (_COS[0] + r2 * (_COS[1] + r2 * _COS[2]))
    # x = r + q pi/2: q = 1 swaps sine and cosine, q = 2 negates both, q = 3 both.
    q = ops.mod(ops.cast(quadrant, "int32"), 4)
    odd = ops.equal(ops.mod(q, 2), 1)
    sin_x = ops.where(odd, cos_r, sin_r)
    cos_x = ops.where(odd, sin_r, cos_r)
    sin_x = ops.where(q >= 2, -sin_x, sin_x)
    cos_x = ops.where(ops.logical_or(ops.equal(q, 1), ops.equal(q, 2)), -cos_x, cos_x)
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
