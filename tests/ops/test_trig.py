"""Tests of `keras_structattn.ops.trig` against float64 NumPy."""

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_structattn.ops import trig
from tests._backend import jit
from tests._backend import to_numpy


def _check(x, sin, cos):
    exact = np.asarray(x, np.float32).astype(np.float64)  # the float32 input, exactly
    np.testing.assert_allclose(to_numpy(sin), np.sin(exact), rtol=0, atol=2e-7)
    np.testing.assert_allclose(to_numpy(cos), np.cos(exact), rtol=0, atol=2e-7)


@pytest.mark.parametrize("limit", [1.0, 10.0, 1500.0, 1e4])
def test_polynomial_matches_float64(limit):
    """Random angles up to the range geometry embeddings reach (100 x log
    of box ratios down to 1e-6 is ~1400 rad), plus every quadrant edge."""
    rng = np.random.default_rng(int(limit))
    x = rng.uniform(-limit, limit, 20_000).astype("float32")
    edges = (np.arange(-8, 9) * np.pi / 4).astype("float32")
    x = np.concatenate([x, edges, np.nextafter(edges, np.float32(np.inf)), [0.0, -0.0]])
    _check(x, *trig.polynomial_sin_cos(x))


@settings(deadline=None, max_examples=30)
@given(st.floats(-2000, 2000, width=32))
def test_polynomial_property(x):
    x = np.array([x], "float32")
    sin, cos = (to_numpy(t) for t in trig.polynomial_sin_cos(x))
    _check(x, sin, cos)
    assert abs(sin[0] ** 2 + cos[0] ** 2 - 1) < 1e-6


def test_sin_cos_takes_the_polynomial_when_compiled():
    """Eager: the backend's kernels (TF) or the polynomial (JAX, where
    every op is XLA); under jit: the polynomial. Either way float32 values
    within 2e-7."""
    x = np.random.default_rng(1).uniform(-700, 700, 1000).astype("float32")
    _check(x, *trig.sin_cos(x))
    seen = []

    def traced(t):
        seen.append(trig.tracing_for_xla())  # runs while tracing
        return trig.sin_cos(t)

    _check(x, *jit(traced)(x))
    assert seen == [True]
    assert trig.tracing_for_xla() is (keras.backend.backend() == "jax")  # eager
