"""Tests of `keras_structattn.ops.additive_scores`.

References: a NumPy loop over every (b, t, n) for the values, and central
finite differences of that loop in float64 for the gradients, for both
paths (the XLA one with its hand-written gradient, `_fused_scores`, and
the plain one) and for keys per example and keys shared by the batch.
"""

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from keras import ops

from keras_structattn.ops.additive_scores import _fused_scores
from keras_structattn.ops.additive_scores import additive_scores
from tests._backend import gradients
from tests._backend import jit
from tests._backend import to_numpy


def _reference(query, keys, kernel, bias):
    """e[b, t, n] = w . tanh(q[b, t] + k[b, n]) + c, one score at a time."""
    batch, steps, _ = query.shape
    count = keys.shape[-2]
    out = np.zeros((batch, steps, count))
    for b in range(batch):
        for t in range(steps):
            for n in range(count):
                key = keys[n] if keys.ndim == 2 else keys[b, n]
                out[b, t, n] = np.dot(kernel, np.tanh(query[b, t] + key)) + bias
    return out


def _case(rng, shared, batch=2, steps=3, count=4, width=5):
    query = rng.normal(size=(batch, steps, width))
    keys = rng.normal(size=(count, width) if shared else (batch, count, width))
    kernel = rng.normal(size=(width,))
    bias = rng.normal()
    return query, keys, kernel, bias


def _plain(query, keys, kernel, bias):
    return additive_scores(query, keys, kernel, bias)  # eager TensorFlow: no XLA


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("path", ["fused", "default", "jit"])
def test_values_match_a_loop(shared, path):
    query, keys, kernel, bias = _case(np.random.default_rng(0), shared)
    fn = {"fused": _fused_scores, "default": additive_scores,
          "jit": jit(additive_scores)}[path]
    args = [x.astype("float32") for x in (query, keys, kernel, np.float32(bias))]
    out = fn(*args)
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    np.testing.assert_allclose(to_numpy(out), _reference(query, keys, kernel, bias),
                               rtol=1e-5, atol=1e-5)


def _finite_differences(query, keys, kernel, bias, weights, eps=1e-6):
    """d sum(weights * e) / d every input, by central differences (float64)."""
    args = [query, keys, kernel, np.array(bias)]
    grads = []
    for i, arg in enumerate(args):
        grad = np.zeros_like(arg)
        for index in np.ndindex(arg.shape):
            shifted = []
            for sign in (1, -1):
                moved = [a.copy() for a in args]
                moved[i][index] += sign * eps
                shifted.append((weights * _reference(*moved[:3], float(moved[3]))).sum())
            grad[index] = (shifted[0] - shifted[1]) / (2 * eps)
        grads.append(grad)
    return grads


@settings(deadline=None, max_examples=6)
@given(seed=st.integers(0, 2**31 - 1), shared=st.booleans(),
       path=st.sampled_from(["fused", "plain"]))
def test_gradients_match_finite_differences(seed, shared, path):
    """Both paths' gradients (the fused one hand-written) are the
    derivative of the scores, in every input."""
    rng = np.random.default_rng(seed)
    query, keys, kernel, bias = _case(rng, shared)
    weights = rng.normal(size=(query.shape[0], query.shape[1], keys.shape[-2]))
    fn = _fused_scores if path == "fused" else additive_scores

    def loss(q, k, w, c):
        return ops.sum(fn(q, k, w, c) * ops.convert_to_tensor(weights, "float32"))

    got = gradients(loss, *(x.astype("float32") for x in (query, keys, kernel, np.float32(bias))))
    expected = _finite_differences(query, keys, kernel, bias, weights)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(np.reshape(g, e.shape), e, rtol=2e-3, atol=2e-3)


def test_kernel_shapes_and_no_bias():
    query, keys, kernel, _ = _case(np.random.default_rng(1), shared=True)
    args = [x.astype("float32") for x in (query, keys)]
    column = additive_scores(*args, kernel.astype("float32")[:, None])
    np.testing.assert_allclose(to_numpy(column), _reference(query, keys, kernel, 0.0),
                               rtol=1e-5, atol=1e-5)


def test_bfloat16_inputs_give_float32_scores():
    query, keys, kernel, bias = _case(np.random.default_rng(2), shared=False)
    args = [ops.cast(x, "bfloat16") for x in (query, keys, kernel, np.float32(bias))]
    out = jit(additive_scores)(*args)
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    np.testing.assert_allclose(to_numpy(out), _reference(query, keys, kernel, bias),
                               rtol=0.05, atol=0.05)


def test_top_down_attention_trains_the_same_with_and_without_xla():
    """The layer's weights get the same gradients through the fused path
    (jit) as through the backend's eager one."""
    from keras_structattn.layers import TopDownAttention

    rng = np.random.default_rng(3)
    layer = TopDownAttention(attention_dim=6)
    query = rng.normal(size=(2, 3, 4)).astype("float32")
    value = rng.normal(size=(2, 5, 7)).astype("float32")
    layer(query, value)
    weights = [v.value for v in layer.trainable_variables]

    def loss(q, v, *trainable):
        out, _ = layer.stateless_call(list(trainable), [], q, v)
        return ops.sum(out * out)

    eager = gradients(loss, query, value, *[to_numpy(w, "float32") for w in weights])
    compiled = _jit_gradients(loss, query, value, *[to_numpy(w, "float32") for w in weights])
    for e, c in zip(eager, compiled):
        np.testing.assert_allclose(c, e, rtol=1e-4, atol=1e-5)


def _jit_gradients(fn, *args):
    """`gradients`, the function compiled (TensorFlow: traced under XLA)."""
    if keras.backend.backend() != "tensorflow":
        return gradients(fn, *args)  # JAX compiles already
    return gradients(jit(fn), *args)
