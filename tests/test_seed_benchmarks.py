"""The paired bootstrap interval of the over-seeds benchmarks."""

import numpy as np
import pytest

from benchmarks._seeds import paired_interval


def test_interval_of_equal_differences_is_that_difference():
    assert paired_interval([0.25] * 5) == pytest.approx((0.25, 0.25))


def test_interval_holds_the_mean_within_the_range_and_is_reproducible():
    differences = [0.1, -0.05, 0.2, 0.0, 0.15]
    low, high = paired_interval(differences)
    assert min(differences) <= low < np.mean(differences) < high <= max(differences)
    assert paired_interval(differences) == (low, high)
    # A wider coverage gives a wider interval.
    wide = paired_interval(differences, level=0.99)
    assert wide[0] <= low and wide[1] >= high


def test_interval_matches_a_plain_resampling_loop():
    differences = [0.3, -0.1, 0.05]
    rng = np.random.default_rng(0)
    picks = rng.integers(0, 3, (10_000, 3))
    means = [np.mean([differences[i] for i in row]) for row in picks]
    assert paired_interval(differences) == pytest.approx(
        (np.quantile(means, 0.025), np.quantile(means, 0.975)))
