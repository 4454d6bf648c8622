"""The tensor2tensor learning-rate schedule against its formula."""

import math

import pytest
from keras import ops

from keras_structattn.training.schedules import WarmupRsqrtDecay


def test_schedule_matches_formula():
    schedule = WarmupRsqrtDecay(constant=2.0, warmup_steps=100, hidden_size=64)
    for iteration in (0, 1, 49, 99, 100, 500, 10_000):
        step = iteration + 1
        expected = 2.0 * min(1.0, step / 100) / math.sqrt(max(step, 100)) / 8.0
        got = float(ops.convert_to_numpy(schedule(iteration)))
        assert got == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="warmup_steps"):
        WarmupRsqrtDecay(2.0, 0, 64)


def _mmf_factor(step, warmup, factor, steps, ratio):
    """mmf's M4C lr lambda, written out: linear warm-up from `factor`, then
    `ratio ** bisect_right(steps, step)`."""
    import bisect

    if step <= warmup:
        alpha = step / warmup
        return factor * (1 - alpha) + alpha
    return ratio ** bisect.bisect_right(steps, step)


@pytest.mark.parametrize("step", [0, 1, 500, 999, 1000, 1001, 13999, 14000, 14001, 18999,
                                  19000, 24000])
def test_linear_warmup_multistep_decay_matches_mmf(step):
    from keras_structattn.training.schedules import LinearWarmupMultiStepDecay

    schedule = LinearWarmupMultiStepDecay(1e-4, 1000, 0.2, "14000,19000", 0.1)
    want = 1e-4 * _mmf_factor(step, 1000, 0.2, [14000, 19000], 0.1)
    got = float(ops.convert_to_numpy(schedule(step)))
    assert got == pytest.approx(want, rel=1e-5)
    again = LinearWarmupMultiStepDecay(**schedule.get_config())
    assert float(ops.convert_to_numpy(again(step))) == pytest.approx(got)
