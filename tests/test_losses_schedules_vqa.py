"""The VQA loss and MCAN's learning-rate schedule.

`SoftTargetBinaryCrossEntropy` against the BCE formula in NumPy (float64,
log-sigmoids by `logaddexp`); `StepWarmupDecay` against a plain-Python
copy of MCAN's rule, written with MCAN's 1-based update count.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.training.losses import SoftTargetBinaryCrossEntropy
from keras_structattn.training.schedules import StepWarmupDecay


def test_soft_target_bce_matches_numpy():
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=3.0, size=(4, 6)).astype("float32")
    logits[0, 0], logits[1, 1] = 60.0, -60.0  # saturated: still finite
    targets = rng.choice([0.0, 0.3, 0.6, 0.9, 1.0], size=(4, 6)).astype("float32")
    z = logits.astype(np.float64)
    # log sigmoid(z) = -log(1 + e^-z), log(1 - sigmoid(z)) = -log(1 + e^z).
    log_p, log_not_p = -np.logaddexp(0.0, -z), -np.logaddexp(0.0, z)
    per_example = -(targets * log_p + (1 - targets) * log_not_p).sum(-1)
    loss = SoftTargetBinaryCrossEntropy()
    got = float(ops.convert_to_numpy(loss(targets, logits)))
    assert got == pytest.approx(per_example.mean(), rel=1e-5)
    summed = SoftTargetBinaryCrossEntropy(reduction="sum")
    assert float(ops.convert_to_numpy(summed(targets, logits))) == pytest.approx(
        per_example.sum(), rel=1e-5)
    clone = SoftTargetBinaryCrossEntropy.from_config(summed.get_config())
    assert clone.reduction == "sum"


def mcan_rate(n, base, steps, warmup=3, decay_epochs=(10, 12), rate=0.2):
    """MCAN's rate of its 1-based update `n`, as its code states it."""
    epoch = (n - 1) // steps  # the 0-based epoch the update belongs to
    for decay_epoch in decay_epochs:
        if epoch >= decay_epoch:
            base *= rate
    for k in range(1, warmup + 1):
        if n <= k * steps:
            return base * k / (warmup + 1)
    return base


def test_step_warmup_decay_boundaries():
    steps = 7
    schedule = StepWarmupDecay(1e-4, steps)
    boundaries = [0, 1, steps - 1, steps, 2 * steps - 1, 2 * steps, 3 * steps - 1, 3 * steps,
                  10 * steps - 1, 10 * steps, 12 * steps - 1, 12 * steps, 13 * steps - 1]
    for iteration in boundaries:
        expected = mcan_rate(iteration + 1, 1e-4, steps)
        got = float(ops.convert_to_numpy(schedule(iteration)))
        assert got == pytest.approx(expected, rel=1e-6), iteration
    # MCAN-small: base/4 on epoch 0, base * 0.04 on the last epoch.
    assert float(ops.convert_to_numpy(schedule(0))) == pytest.approx(2.5e-5)
    assert float(ops.convert_to_numpy(schedule(13 * steps - 1))) == pytest.approx(4e-6)
    # Other settings, from hparams strings; config round trip.
    other = StepWarmupDecay(1e-3, 5, warmup_epochs=1, decay_epochs="4", decay_rate=0.5)
    for iteration in range(0, 40, 3):
        expected = mcan_rate(iteration + 1, 1e-3, 5, 1, (4,), 0.5)
        assert float(ops.convert_to_numpy(other(iteration))) == pytest.approx(expected)
    clone = StepWarmupDecay.from_config(other.get_config())
    assert clone.get_config() == other.get_config()
    assert keras.saving.get_registered_object("keras_structattn>StepWarmupDecay")
    with pytest.raises(ValueError, match="steps_per_epoch"):
        StepWarmupDecay(1e-4, 0)
