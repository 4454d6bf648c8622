"""Tests of `AttentionFlattening` (MCAN's AttFlat).

Against NumPy: `s = relu(x W1 + b1) W2 + b2`, a softmax over the real
positions per glimpse, the glimpses' weighted sums concatenated, then
`z W3 + b3`. An empty sequence gives the bias; config round trip.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.layers.attention_flattening import AttentionFlattening


def to_np(x):
    return np.asarray(ops.convert_to_numpy(x), dtype=np.float64)


def numpy_flatten(layer, x, mask):
    mlp = layer.mlp
    hidden = np.maximum(x @ to_np(mlp.hidden_dense.kernel) + to_np(mlp.hidden_dense.bias), 0.0)
    scores = hidden @ to_np(mlp.output_dense.kernel) + to_np(mlp.output_dense.bias)  # [B, T, G]
    projection = layer.output_dense
    batch, length, glimpses = scores.shape
    weights = np.zeros_like(scores)
    for b in range(batch):
        real = mask[b]
        for g in range(glimpses):
            if real.any():
                e = np.exp(scores[b, real, g] - scores[b, real, g].max())
                weights[b, real, g] = e / e.sum()
    pooled = np.concatenate([np.einsum("bt,btd->bd", weights[..., g], x)
                             for g in range(glimpses)], axis=-1)
    return pooled @ to_np(projection.kernel) + to_np(projection.bias), weights


@pytest.mark.parametrize("glimpses", [1, 2])
def test_matches_numpy(glimpses):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5, 6)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], bool)
    layer = AttentionFlattening(7, glimpses, 4, seed=1)
    layer.build(x.shape)
    layer.set_weights([rng.normal(size=w.shape).astype("float32") for w in layer.get_weights()])
    out, weights = layer(x, mask, return_attention_scores=True)
    expected, expected_weights = numpy_flatten(layer, x.astype(np.float64), mask)
    assert tuple(out.shape) == (3, 4) and tuple(weights.shape) == (3, 5, glimpses)
    assert ops.convert_to_numpy(weights).dtype == np.float32
    np.testing.assert_allclose(to_np(out), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(to_np(weights), expected_weights, atol=1e-6)
    # No real position: the projection's bias, no NaN.
    bias = to_np(layer.output_dense.bias)
    np.testing.assert_allclose(to_np(out)[2], bias, atol=1e-6)
    # Padded positions change nothing.
    changed = x.copy()
    changed[0, 3:] = 100.0
    np.testing.assert_allclose(to_np(layer(changed, mask))[0], to_np(out)[0], atol=1e-5)


def test_config_round_trip_and_symbolic_call():
    layer = AttentionFlattening(8, 2, 5, dropout=0.2, seed=3)
    clone = AttentionFlattening.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    x = keras.Input((4, 6))
    out, weights = layer(x, return_attention_scores=True)
    assert tuple(out.shape) == (None, 5) and tuple(weights.shape) == (None, 4, 2)
    with pytest.raises(ValueError, match="glimpses"):
        AttentionFlattening(8, 0, 5)
