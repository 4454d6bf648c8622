"""The padded, label-smoothed loss and the token accuracy, against explicit
loops."""

import math

import numpy as np
import pytest

from keras_structattn.training.losses import PaddedAccuracy
from keras_structattn.training.losses import PaddedCrossEntropy


def loss_reference(targets, logits, smoothing, pad_id=0):
    """Loops over tokens: KL(q || p) with the smoothed target q, padded
    tokens skipped, averaged over the real tokens."""
    total, count = 0.0, 0
    vocab = logits.shape[-1]
    for index in np.ndindex(*targets.shape):
        if targets[index] == pad_id:
            continue
        row = logits[index].astype(np.float64)
        log_p = row - row.max() - math.log(np.exp(row - row.max()).sum())
        kl = 0.0
        for v in range(vocab):
            q = 1 - smoothing if v == targets[index] else smoothing / (vocab - 1)
            if q > 0:
                kl += q * (math.log(q) - log_p[v])
        total += kl
        count += 1
    return total / max(count, 1)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_padded_cross_entropy_matches_loops(smoothing):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 7)).astype("float32") * 3
    targets = rng.integers(1, 7, size=(3, 5))
    targets[0, 3:] = 0
    targets[2, 1:] = 0
    got = float(PaddedCrossEntropy(label_smoothing=smoothing)(targets, logits))
    assert got == pytest.approx(loss_reference(targets, logits, smoothing), rel=1e-5)


def test_perfect_smoothed_prediction_scores_zero():
    vocab, smoothing = 6, 0.2
    targets = np.array([[1, 4, 0]])
    q = np.full((1, 3, vocab), smoothing / (vocab - 1))
    q[0, 0, 1] = q[0, 1, 4] = 1 - smoothing
    logits = np.log(q).astype("float32")
    got = float(PaddedCrossEntropy(label_smoothing=smoothing)(targets, logits))
    assert abs(got) < 1e-5


def test_padded_accuracy_ignores_padding():
    metric = PaddedAccuracy()
    targets = np.array([[1, 2, 0, 0], [3, 0, 0, 0]])
    logits = np.zeros((2, 4, 5), "float32")
    logits[0, 0, 1] = logits[0, 1, 3] = logits[1, 0, 3] = 1.0
    logits[0, 2, 0] = 1.0  # a "correct" padding position must not count
    metric.update_state(targets, logits)
    assert float(metric.result()) == pytest.approx(2 / 3)


def test_bad_smoothing_raises():
    with pytest.raises(ValueError, match="label_smoothing"):
        PaddedCrossEntropy(label_smoothing=1.0)
