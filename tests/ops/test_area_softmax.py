"""The fused area softmax of the fast path (`keras_structattn.ops.area_softmax`):
per-shape window sums and their adjoint, and the item weights with their
hand-written gradient, against brute-force loops over every area."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from keras import ops

from keras_structattn.ops.area_softmax import MASKED_ITEM_LOGIT
from keras_structattn.ops.area_softmax import area_item_weights
from keras_structattn.ops.area_softmax import fold_windows
from keras_structattn.ops.area_softmax import window_sums
from keras_structattn.ops.areas import area_layout
from tests import reference as ref
from tests._backend import compiled_on_jax
from tests._backend import gradients
from tests._backend import to_numpy
from tests.ops.test_areas import LAYOUT_IDS
from tests.ops.test_areas import LAYOUTS
from tests.ops.test_areas import layouts


def _layout(case):
    length, memory_height, max_w, max_h = case
    return area_layout(length, memory_height, max_w, max_h)


def _areas_by_shape(case):
    """`(h, w) -> [(row, col, items)]` from the reference enumeration."""
    length, memory_height, max_w, max_h = case
    width = length // memory_height
    by_shape = {}
    for area in ref.enumerate_areas(length, memory_height, max_w, max_h):
        r, c, h, w = area
        by_shape.setdefault((h, w), []).append((r, c, ref.area_items(area, width)))
    return by_shape


def _random_parts(rng, layout, batch):
    return {
        (h, w): rng.normal(size=(batch, rows, cols))
        for h, w, rows, cols in layout.shapes
    }


@pytest.mark.parametrize("case", LAYOUTS, ids=LAYOUT_IDS)
def test_window_sums_vs_loops(case):
    layout = _layout(case)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, layout.height, layout.width))
    got = window_sums(ops.convert_to_tensor(x, "float32"), layout)
    by_shape = _areas_by_shape(case)
    assert sorted(got) == sorted(by_shape)
    flat = x.reshape(2, -1)
    for shape, areas in by_shape.items():
        expected = np.zeros(tuple(got[shape].shape))
        for r, c, items in areas:
            for j in items:
                expected[:, r, c] += flat[:, j]
        np.testing.assert_allclose(to_numpy(got[shape]), expected, atol=1e-5)


@pytest.mark.parametrize("case", LAYOUTS, ids=LAYOUT_IDS)
def test_fold_windows_vs_loops(case):
    layout = _layout(case)
    rng = np.random.default_rng(1)
    parts = _random_parts(rng, layout, 2)
    got = fold_windows(
        {s: ops.convert_to_tensor(p, "float32") for s, p in parts.items()}, layout
    )
    expected = np.zeros((2, layout.length))
    for shape, areas in _areas_by_shape(case).items():
        for r, c, items in areas:
            for j in items:
                expected[:, j] += parts[shape][:, r, c]
    np.testing.assert_allclose(
        to_numpy(got).reshape(2, -1), expected, atol=1e-5
    )


@settings(max_examples=25, deadline=None)
@given(layouts(pooled=True), st.integers(0, 2**31 - 1))
def test_fold_windows_is_adjoint_of_window_sums(case, seed):
    """<window_sums(x), p> == <x, fold_windows(p)> for random x and p."""
    layout = _layout(case)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(3, layout.height, layout.width))
    parts = _random_parts(rng, layout, 3)
    sums = window_sums(ops.convert_to_tensor(x, "float32"), layout)
    folded = fold_windows(
        {s: ops.convert_to_tensor(p, "float32") for s, p in parts.items()}, layout
    )
    lhs = sum(float(np.sum(to_numpy(sums[s]) * parts[s])) for s in parts)
    rhs = float(np.sum(x * to_numpy(folded)))
    assert lhs == pytest.approx(rhs, rel=1e-4, abs=1e-4)


# --------------------------------------------------------------------------
# Item weights
# --------------------------------------------------------------------------


def item_weights_reference(logits, allowed, case, value_mode, keep=None):
    """Loops over rows and areas: softmax of mean logits, folded onto items.

    `logits` `[rows, L]` float64; `allowed` `[rows, L]` bool; `keep` maps a
    shape to `[rows, rows_of_shape, cols_of_shape]` dropout multipliers.
    """
    by_shape = _areas_by_shape(case)
    out = np.zeros(logits.shape)
    for row in range(logits.shape[0]):
        areas, scores = [], []
        for shape, entries in by_shape.items():
            for r, c, items in entries:
                if all(allowed[row, j] for j in items):
                    areas.append((shape, r, c, items))
                    scores.append(np.mean([logits[row, j] for j in items]))
        if not areas:
            continue  # no attendable area: zero weights
        scores = np.array(scores)
        probs = np.exp(scores - scores.max())
        probs /= probs.sum()
        for p, (shape, r, c, items) in zip(probs, areas):
            if keep is not None:
                p = p * keep[shape][row, r, c]
            for j in items:
                out[row, j] += p / (len(items) if value_mode == "mean" else 1)
    return out


def _weights_case(case, seed, with_keep):
    layout = _layout(case)
    rng = np.random.default_rng(seed)
    rows = 4
    logits = rng.normal(size=(rows, layout.length)) * 2
    allowed = rng.random((rows, layout.length)) > 0.25
    allowed[0] = True
    allowed[1] = False  # a row with nothing attendable
    keep = None
    if with_keep:
        keep = {
            (h, w): (rng.random((rows, r, c)) > 0.3) / 0.7
            for h, w, r, c in layout.shapes
        }
    masked = np.where(allowed, logits, MASKED_ITEM_LOGIT)
    return layout, logits, allowed, keep, masked


def _call(layout, value_mode, keep):
    grid = (layout.height, layout.width)
    keep_t = None
    if keep is not None:
        keep_t = {s: ops.convert_to_tensor(k, "float32") for s, k in keep.items()}

    def fn(masked):
        rows = masked.shape[0]
        w = area_item_weights(
            ops.reshape(masked, (rows,) + grid), layout, value_mode, keep=keep_t
        )
        return ops.reshape(w, (rows, layout.length))

    return fn


@pytest.mark.parametrize("with_keep", [False, True], ids=["plain", "dropout"])
@pytest.mark.parametrize("value_mode", ["sum", "mean"])
@pytest.mark.parametrize("case", LAYOUTS, ids=LAYOUT_IDS)
def test_item_weights_vs_loops(case, value_mode, with_keep):
    layout, logits, allowed, keep, masked = _weights_case(case, 2, with_keep)
    got = compiled_on_jax(_call(layout, value_mode, keep))(masked.astype("float32"))
    expected = item_weights_reference(logits, allowed, case, value_mode, keep)
    got = to_numpy(got)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, expected, atol=2e-6, rtol=1e-5)
    np.testing.assert_array_equal(got[1], 0.0)


@pytest.mark.parametrize("with_keep", [False, True], ids=["plain", "dropout"])
@pytest.mark.parametrize("value_mode", ["sum", "mean"])
@pytest.mark.parametrize(
    "case", [(7, 1, 3, 1), (15, 3, 2, 2), (6, 2, 4, 4)], ids=["1d", "3x5", "2x3"]
)
def test_item_weights_gradient_vs_finite_differences(case, value_mode, with_keep):
    """The hand-written gradient against central differences of the loops."""
    layout, logits, allowed, keep, masked = _weights_case(case, 3, with_keep)
    readout = np.random.default_rng(4).normal(size=logits.shape)
    fn = _call(layout, value_mode, keep)
    (got,) = gradients(
        lambda s: ops.sum(fn(s) * ops.convert_to_tensor(readout, "float32")),
        masked.astype("float32"),
    )

    def loss(x):
        return np.sum(
            item_weights_reference(x, allowed, case, value_mode, keep) * readout
        )

    expected = np.zeros(logits.shape)
    eps = 1e-6
    for index in np.ndindex(*logits.shape):
        if not allowed[index]:
            continue  # a masked logit does not enter the loss: gradient 0
        up, down = logits.copy(), logits.copy()
        up[index] += eps
        down[index] -= eps
        expected[index] = (loss(up) - loss(down)) / (2 * eps)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, expected, atol=2e-5, rtol=1e-4)
