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

# Per-epoch losses: 10x the largest drift seen on CI.
LOSS_RTOL = 1e-3
# Per-epoch accuracies (columns named `*accuracy`), absolute: an accuracy
# counts argmaxes, and a near-tie flipped by rounding moves it by one item
# (CI, 2026-12-02: a translation's validation token accuracy 0.0984 vs
# 0.1015, 1 token of ~315) where the losses agreed to 1e-4. The bound
# allows two flips among the ~100 questions of the tests' VQA epochs. A
# dropped or doubled replica moves the losses, which keep the tight bound.
ACCURACY_ATOL = 2.5e-2
# Each weight and optimizer variable as a whole: weights drift ~10-20x the
# losses' relative drift (measured by perturbing the rounding with XLA's
# fast math: 1e-7 in the losses, up to 2e-6 in Adam's moments).
WEIGHT_RTOL = 2e-2
# Plus, per element (root of the count), an absolute term: Adam moves every
# element by about the learning rate per step whatever its gradient's size,
# so an element whose gradient is near zero (a gate's bias near its 0
# start) moves by +-lr on the sign of rounding noise. CI, 2026-12-02: 1.55e-4
# on MUAN's 2-element gate bias (norm 6.3e-3) after 24 steps.
WEIGHT_ATOL = 5e-4


def assert_close_histories(first, second, names):
    """The columns `names` of two `{column: array}` histories: losses to
    `LOSS_RTOL`, accuracies to `ACCURACY_ATOL`."""
    for name in names:
        if name.endswith("accuracy"):
            np.testing.assert_allclose(second[name], first[name], rtol=0,
                                       atol=ACCURACY_ATOL, err_msg=name)
        else:
            np.testing.assert_allclose(second[name], first[name], rtol=LOSS_RTOL, err_msg=name)


def assert_close_variables(a, b, min_count):
    """Two checkpoints' `{name: array}`: the same names (more than
    `min_count`) and each variable within `WEIGHT_RTOL` of the other in
    norm (plus `WEIGHT_ATOL` per element's root, for elements near zero)."""
    assert sorted(a) == sorted(b) and len(a) > min_count
    for name in a:
        x, y = np.asarray(a[name], np.float64), np.asarray(b[name], np.float64)
        assert x.shape == y.shape, name
        difference, size = np.linalg.norm(x - y), np.linalg.norm(x)
        assert difference <= WEIGHT_RTOL * size + WEIGHT_ATOL * np.sqrt(x.size), (
            f"{name}: |a - b| = {difference:.3g}, |a| = {size:.3g}")
