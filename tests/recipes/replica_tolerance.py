"""How close one device's training and a data-parallel one's must be.

Two replicas compute the same sums in another order (each reduces its half
of the batch, then the gradients are summed), so the runs agree to float32
rounding at the first step and drift apart as training amplifies it. On the
development CPU of this project the tests' runs (2 epochs, 12-24 steps)
agree to 1e-6; on the CI machine, whose CPU rounds otherwise, the losses of
one device and two differed by up to 1e-4 (relative) and an elementwise
1e-5 failed. A fault of the data-parallel path (a replica's rows dropped or
counted twice, gradients not summed, padding rows counted) moves the losses
by percents, far outside these bounds.
"""

import numpy as np

# Per-epoch training losses and accuracies: 10x the largest drift seen on CI.
LOSS_RTOL = 1e-3
# Each weight and optimizer variable as a whole: weights drift ~10-20x the
# losses' relative drift (measured by perturbing the rounding with XLA's
# fast math: 1e-7 in the losses, up to 2e-6 in Adam's moments).
WEIGHT_RTOL = 2e-2


def assert_close_histories(first, second, names):
    """The columns `names` of two `{column: array}` histories, to `LOSS_RTOL`."""
    for name in names:
        np.testing.assert_allclose(second[name], first[name], rtol=LOSS_RTOL, err_msg=name)


def assert_close_variables(a, b, min_count):
    """Two checkpoints' `{name: array}`: the same names (more than
    `min_count`) and each variable within `WEIGHT_RTOL` of the other in
    norm (plus 1e-6 per element's root, for variables near zero)."""
    assert sorted(a) == sorted(b) and len(a) > min_count
    for name in a:
        x, y = np.asarray(a[name], np.float64), np.asarray(b[name], np.float64)
        assert x.shape == y.shape, name
        difference, size = np.linalg.norm(x - y), np.linalg.norm(x)
        assert difference <= WEIGHT_RTOL * size + 1e-6 * np.sqrt(x.size), (
            f"{name}: |a - b| = {difference:.3g}, |a| = {size:.3g}")
