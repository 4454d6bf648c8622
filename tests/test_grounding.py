"""Tests of `keras_structattn.tasks.grounding.heads` (MUAN's grounding losses, Yu et
al., 2019, arXiv:1908.04107, Eqs. 12-13, and the box selection).

References are per-example `math` loops written from the equations
(KL divergence, Fast R-CNN's smooth-L1) and finite differences.
"""

import math

import keras
import numpy as np
import pytest

from keras_structattn.ops.masked_softmax import MASKED_LOGIT
from keras_structattn.tasks.grounding import heads as grounding
from tests._backend import gradients
from tests._backend import to_numpy


def reference_kl(target, scores):
    """KL(target || softmax(scores)) of one example, float64 loops."""
    top = max(scores)
    log_z = top + math.log(sum(math.exp(s - top) for s in scores))
    return sum(p * (math.log(p) - (s - log_z)) for p, s in zip(target, scores) if p > 0)


def reference_smooth_l1(x):
    return 0.5 * x * x if abs(x) < 1.0 else abs(x) - 0.5


def reference_regression(target_deltas, deltas, weights):
    total = sum(weights)
    if total == 0:
        return 0.0
    loss = sum(
        w * sum(reference_smooth_l1(d - t) for d, t in zip(pred, true))
        for w, pred, true in zip(weights, deltas, target_deltas)
    )
    return loss / total


def _case(seed=0, batch=3, regions=6):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(batch, regions)).astype(np.float32) * 2
    raw = np.where(rng.uniform(size=(batch, regions)) < 0.5, rng.uniform(size=(batch, regions)),
                   0.0)
    raw[:, 0] = 0.7  # every row has a positive
    target = (raw / raw.sum(-1, keepdims=True)).astype(np.float32)
    return scores, target


def test_rank_loss_matches_reference():
    scores, target = _case()
    expected = [reference_kl(t, s) for t, s in zip(target.tolist(), scores.tolist())]
    np.testing.assert_allclose(to_numpy(grounding.rank_loss(target, scores)), expected,
                               rtol=1e-5, atol=1e-6)
    # The Keras loss averages the examples.
    loss = grounding.RankLoss()(target, scores)
    np.testing.assert_allclose(float(to_numpy(loss)), np.mean(expected), rtol=1e-5)


def test_rank_loss_is_zero_at_the_target_and_ignores_padding():
    _, target = _case(1, batch=2, regions=5)
    scores = np.log(np.maximum(target, 1e-30)).astype(np.float32)
    np.testing.assert_allclose(to_numpy(grounding.rank_loss(target, scores)), 0.0, atol=1e-5)
    # Padding regions (target 0, masked logit) change nothing, and neither
    # the loss nor its gradient is NaN.
    scores, target = _case(2, batch=2, regions=4)
    padded_scores = np.concatenate([scores, np.full((2, 3), MASKED_LOGIT, np.float32)], -1)
    padded_target = np.concatenate([target, np.zeros((2, 3), np.float32)], -1)
    np.testing.assert_allclose(to_numpy(grounding.rank_loss(padded_target, padded_scores)),
                               to_numpy(grounding.rank_loss(target, scores)), rtol=1e-6)
    (grad,) = gradients(
        lambda s: keras.ops.sum(grounding.rank_loss(padded_target, s)), padded_scores
    )
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad[:, 4:], 0.0, atol=1e-12)


def test_rank_loss_gradient_matches_finite_differences():
    scores, target = _case(3, batch=2, regions=4)
    (grad,) = gradients(lambda s: keras.ops.sum(grounding.rank_loss(target, s)), scores)
    eps = 1e-4
    numeric = np.zeros_like(scores, dtype=np.float64)
    for index in np.ndindex(*scores.shape):
        up, down = scores.astype(np.float64), scores.astype(np.float64)
        up[index] += eps
        down[index] -= eps
        b = index[0]
        numeric[index] = (
            reference_kl(target[b].tolist(), up[b].tolist())
            - reference_kl(target[b].tolist(), down[b].tolist())
        ) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, atol=2e-4)


def test_regression_loss_matches_reference():
    rng = np.random.default_rng(4)
    target_deltas = rng.normal(size=(3, 5, 4)).astype(np.float32)
    deltas = (target_deltas + rng.normal(size=(3, 5, 4)) * 1.5).astype(np.float32)
    weights = np.array([[1, 1, 0, 1, 0], [0, 0, 0, 0, 0], [1, 0.5, 1, 1, 1]], np.float32)
    expected = [
        reference_regression(t.tolist(), d.tolist(), w.tolist())
        for t, d, w in zip(target_deltas, deltas, weights)
    ]
    assert expected[1] == 0.0 and expected[0] > 0
    got = to_numpy(grounding.regression_loss(target_deltas, deltas, weights))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    packed = np.concatenate([target_deltas, weights[..., None]], -1)
    loss = grounding.BoxRegressionLoss()(packed, deltas)
    np.testing.assert_allclose(float(to_numpy(loss)), np.mean(expected), rtol=1e-5)
    with pytest.raises(ValueError, match="y_true"):
        grounding.BoxRegressionLoss()(target_deltas, deltas)


def test_regression_targets_numpy():
    boxes = np.array([[[0.1, 0.1, 0.3, 0.5], [0.0, 0.0, 0.0, 0.0]]], np.float32)
    target_box = np.array([[0.1, 0.15, 0.5, 0.25]], np.float32)
    packed = grounding.regression_targets_numpy(boxes, target_box, [[1.0, 0.0]])
    assert packed.shape == (1, 2, 5) and packed.dtype == np.float32
    # Hand-derived (see tests/ops/test_box_coding.py).
    np.testing.assert_allclose(packed[0, 0], [0.5, -0.25, math.log(2), math.log(0.25), 1.0],
                               atol=1e-6)
    assert np.all(np.isfinite(packed)) and packed[0, 1, 4] == 0.0
    with pytest.raises(ValueError, match="weights"):
        grounding.regression_targets_numpy(boxes, target_box, [1.0, 0.0, 1.0])


def test_predict_boxes():
    boxes = np.array([[[0.1, 0.1, 0.3, 0.5], [0.5, 0.5, 0.9, 0.9], [0.0, 0.0, 0.0, 0.0]],
                      [[0.1, 0.1, 0.3, 0.5], [0.5, 0.5, 0.9, 0.9], [0.0, 0.0, 0.0, 0.0]]],
                     np.float32)
    scores = np.array([[0.0, 1.0, MASKED_LOGIT], [2.0, 1.0, MASKED_LOGIT]], np.float32)
    deltas = np.zeros((2, 3, 4), np.float32)
    deltas[0, 1] = [0.25, 0.0, math.log(2.0), 0.0]  # centre x 0.7 -> 0.8, width 0.4 -> 0.8
    deltas[1, 0] = [0.5, -0.25, math.log(2.0), math.log(0.25)]
    predicted, index = grounding.predict_boxes(scores, deltas, boxes)
    np.testing.assert_array_equal(to_numpy(index, "int64"), [1, 0])
    # Row 0: x from 0.4 to 1.2, clipped to 1.0; row 1: the hand-derived box.
    np.testing.assert_allclose(to_numpy(predicted), [[0.4, 0.5, 1.0, 0.9],
                                                     [0.1, 0.15, 0.5, 0.25]], atol=1e-6)
