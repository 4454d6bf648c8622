"""The tensor2tensor learning-rate schedule against its formula."""

import math

import pytest
from keras import ops

from keras_structattn.schedules import WarmupRsqrtDecay


def test_schedule_matches_formula():
    schedule = WarmupRsqrtDecay(constant=2.0, warmup_steps=100, hidden_size=64)
    for iteration in (0, 1, 49, 99, 100, 500, 10_000):
        step = iteration + 1
        expected = 2.0 * min(1.0, step / 100) / math.sqrt(max(step, 100)) / 8.0
        got = float(ops.convert_to_numpy(schedule(iteration)))
        assert got == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="warmup_steps"):
        WarmupRsqrtDecay(2.0, 0, 64)
