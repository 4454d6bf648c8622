"""Tests of `keras_structattn.ops.dropout` and the `Dropout` layer.

The reference is the definition of dropout: each element kept independently
with probability `1 - rate`, kept elements scaled by `1 / (1 - rate)`. The
drop fractions are checked against binomial bounds (6 standard deviations:
a false alarm about once in 10^9 runs), independence by correlations
against their null spread.
"""

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_structattn.layers import Dropout
from keras_structattn.ops.dropout import dropout
from keras_structattn.ops.dropout import keep_mask
from tests._backend import jit
from tests._backend import to_numpy

SIGMAS = 6.0


def _assert_fraction(kept, rate):
    """The kept fraction is within SIGMAS binomial deviations of 1 - rate."""
    n = kept.size
    spread = SIGMAS * np.sqrt(rate * (1 - rate) / n)
    assert abs(kept.mean() - (1 - rate)) <= spread, (kept.mean(), 1 - rate, spread)


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_kept_fraction_and_scaling(rate):
    x = np.random.default_rng(0).uniform(0.5, 1.5, (64, 50, 40)).astype("float32")
    y = to_numpy(dropout(x, rate, seed=3))
    kept = y != 0
    _assert_fraction(kept, rate)
    np.testing.assert_allclose(y[kept], x[kept] / (1 - rate), rtol=1e-6)


@settings(deadline=None, max_examples=25)
@given(st.floats(0.01, 0.99), st.integers(0, 2**31 - 1))
def test_kept_fraction_property(rate, seed):
    kept = to_numpy(keep_mask((20_000,), rate, seed=seed))
    _assert_fraction(kept, rate)


def test_tiny_rates_are_not_rounded_away():
    """A rate far below 2**-16 still drops (the threshold has 32 bits)."""
    rate = 1e-4
    kept = to_numpy(keep_mask((2_000_000,), rate, seed=0))
    dropped = (~kept).sum()
    expected = rate * kept.size
    assert abs(dropped - expected) <= SIGMAS * np.sqrt(expected), dropped


def test_rates_zero_and_one():
    x = np.ones((4, 5), "float32")
    np.testing.assert_array_equal(to_numpy(dropout(x, 0.0, seed=1)), x)
    np.testing.assert_array_equal(to_numpy(dropout(x, 1.0, seed=1)), 0 * x)


def test_masks_are_independent():
    """Neighbouring elements of one mask, and the masks of two successive
    draws of one generator, are uncorrelated."""
    generator = keras.random.SeedGenerator(7)
    first = to_numpy(keep_mask((400_000,), 0.5, seed=generator), "float64")
    second = to_numpy(keep_mask((400_000,), 0.5, seed=generator), "float64")
    null = SIGMAS / np.sqrt(first.size)  # the spread of a correlation of independents
    assert abs(np.corrcoef(first, second)[0, 1]) < null
    assert abs(np.corrcoef(first[:-1], first[1:])[0, 1]) < null
    # Elements 2**16 apart share nothing either (no short period).
    assert abs(np.corrcoef(first[:-65536], first[65536:])[0, 1]) < 2 * null


def test_seeding():
    x = np.ones((1000,), "float32")
    same = [to_numpy(dropout(x, 0.3, seed=11)) for _ in range(2)]
    np.testing.assert_array_equal(same[0], same[1])
    assert (to_numpy(dropout(x, 0.3, seed=12)) != same[0]).any()
    # A generator advances: successive calls differ, equal generators agree.
    a, b = keras.random.SeedGenerator(5), keras.random.SeedGenerator(5)
    first = to_numpy(dropout(x, 0.3, seed=a))
    assert (to_numpy(dropout(x, 0.3, seed=a)) != first).any()
    np.testing.assert_array_equal(to_numpy(dropout(x, 0.3, seed=b)), first)


def test_noise_shape_broadcasts():
    x = np.ones((8, 30, 16), "float32")
    y = to_numpy(dropout(x, 0.5, noise_shape=(None, 1, 16), seed=2))
    np.testing.assert_array_equal(y, np.broadcast_to(y[:, :1], y.shape))
    assert 0 < (y == 0).mean() < 1


def test_compiled_equals_eager_in_law():
    """Under the backend's jit the masks follow the same law (TensorFlow
    switches to XLA's Threefry there, so the streams differ)."""
    x = np.ones((100_000,), "float32")
    seed = keras.random.SeedGenerator(3)
    y = to_numpy(jit(lambda t: dropout(t, 0.25, seed=seed))(x))
    _assert_fraction(y != 0, 0.25)
    np.testing.assert_allclose(y[y != 0], 1 / 0.75, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_layer_matches_keras_dropout_contract(dtype):
    layer = Dropout(0.2, seed=4, dtype=dtype)
    x = keras.ops.ones((50, 40))
    np.testing.assert_array_equal(to_numpy(layer(x, training=False)), 1.0)
    y = layer(x, training=True)
    assert keras.backend.standardize_dtype(y.dtype) == dtype
    y = to_numpy(y)
    _assert_fraction(y != 0, 0.2)
    np.testing.assert_allclose(y[y != 0], 1 / 0.8, rtol=1e-2 if dtype == "bfloat16" else 1e-6)
    config = layer.get_config()
    keras_config = keras.layers.Dropout(0.2, seed=4, dtype=dtype, name=layer.name).get_config()
    assert config == keras_config
    assert type(keras.layers.deserialize(keras.layers.serialize(layer))) is Dropout


def test_gradient_is_the_mask():
    """d(sum(dropout(x)))/dx is the scaled keep mask of the same draw."""
    rng = np.random.default_rng(0)
    x = rng.uniform(1, 2, (300,)).astype("float32")
    from tests._backend import gradients

    (grad,) = gradients(lambda t: keras.ops.sum(dropout(t, 0.4, seed=9)), x)
    y = to_numpy(dropout(x, 0.4, seed=9))
    np.testing.assert_allclose(grad, (y != 0) / 0.6, rtol=1e-6)
