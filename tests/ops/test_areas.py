"""Area enumeration, per-area reductions and features, and the area fold,
checked against the brute-force reference in `tests/reference.py`."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from keras import backend

from keras_structattn.ops import area_coordinates
from keras_structattn.ops import area_features
from keras_structattn.ops import area_fold
from keras_structattn.ops import area_reduce
from keras_structattn.ops import area_shapes
from keras_structattn.ops import area_sizes
from keras_structattn.ops import num_areas
from tests import reference as ref
from tests._backend import compiles_per_shape
from tests._backend import to_numpy

# (length, memory_height, max_area_width, max_area_height): 1-D and 2-D,
# square and non-square grids, shapes larger than the memory, length 1.
LAYOUTS = [
    (1, 1, 3, 2),  # length 1: every shape but 1x1 is larger than the memory
    (7, 1, 3, 1),
    (5, 1, 8, 1),  # widths 6..8 do not fit
    (15, 3, 2, 2),  # 3 x 5 grid
    (8, 4, 2, 3),  # 4 x 2 grid
    (6, 2, 4, 4),  # 2 x 3 grid, areas larger than it both ways
    (9, 3, 3, 3),  # every rectangle of a 3 x 3 grid
    (6, 6, 1, 2),  # a 6 x 1 column
]
LAYOUT_IDS = [f"L{length}_H{h}_w{w}_h{mh}" for length, h, w, mh in LAYOUTS]

PROPERTY_SETTINGS = settings(max_examples=25, deadline=None)

# Memory on axis -2 for every layout; on axis -1 for a few (the axis only
# changes the grid bookkeeping).
SOME_LAYOUTS = [(1, 1, 3, 2), (7, 1, 3, 1), (15, 3, 2, 2), (8, 4, 2, 3)]
LAYOUT_AXES = [(layout, -2) for layout in LAYOUTS] + [
    (layout, -1) for layout in SOME_LAYOUTS
]
LAYOUT_AXIS_IDS = [
    f"{LAYOUT_IDS[LAYOUTS.index(layout)]}_axis{a}" for layout, a in LAYOUT_AXES
]


def _layout(memory_height, max_area_width, max_area_height):
    return dict(
        memory_height=memory_height,
        max_area_width=max_area_width,
        max_area_height=max_area_height,
    )


# Where eager ops compile per shape (JAX), property tests of the ops draw
# from the layouts of the parametrised tests, whose kernels are compiled
# already for the same tensor shapes (see `compiles_per_shape`); the other
# backends draw from the whole space.
LAYOUT_POOL = SOME_LAYOUTS


@st.composite
def layouts(draw, max_rows=4, max_cols=6, pooled=False):
    """Random grid layouts, including area shapes that do not fit."""
    if pooled and compiles_per_shape():
        return draw(st.sampled_from(LAYOUT_POOL))
    height = draw(st.integers(1, max_rows))
    width = draw(st.integers(1, max_cols))
    max_w = draw(st.integers(1, width + 2))
    max_h = draw(st.integers(1, height + 2))
    return height * width, height, max_w, max_h


# --------------------------------------------------------------------------
# Enumeration
# --------------------------------------------------------------------------


@pytest.mark.parametrize("length", range(1, 10))
def test_num_areas_matches_paper_formula_1d(length):
    for size in range(1, length + 1):
        expected = ref.paper_area_count(length, size)
        assert num_areas(length, 1, size) == expected
        assert len(ref.enumerate_areas(length, 1, size)) == expected
    # Widths beyond the memory add no area.
    assert num_areas(length, 1, length + 3) == ref.paper_area_count(length, length)


@pytest.mark.parametrize(
    "height,width,max_w,max_h",
    [(1, 1, 1, 1), (2, 3, 2, 2), (3, 5, 2, 2), (4, 2, 2, 3), (3, 4, 6, 5), (5, 5, 3, 4)],
)
def test_num_areas_2d_is_product_of_1d_counts(height, width, max_w, max_h):
    rows = ref.paper_area_count(height, min(max_h, height))
    cols = ref.paper_area_count(width, min(max_w, width))
    assert num_areas(height * width, height, max_w, max_h) == rows * cols
    assert len(ref.enumerate_areas(height * width, height, max_w, max_h)) == rows * cols


@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUT_IDS)
def test_area_coordinates_match_reference_enumeration(layout):
    length, memory_height, max_w, max_h = layout
    coords = area_coordinates(length, memory_height, max_w, max_h)
    expected = np.array(ref.enumerate_areas(length, memory_height, max_w, max_h))
    assert coords.dtype.kind == "i"
    np.testing.assert_array_equal(coords, expected)
    heights, widths = area_sizes(length, memory_height, max_w, max_h)
    np.testing.assert_array_equal(heights, expected[:, 2])
    np.testing.assert_array_equal(widths, expected[:, 3])
    # area_shapes lists the fitting shapes in order with their position counts.
    shapes = area_shapes(length, memory_height, max_w, max_h)
    seen = []
    for _, _, h, w in ref.enumerate_areas(length, memory_height, max_w, max_h):
        if not seen or seen[-1] != (h, w):
            seen.append((h, w))
    assert [(h, w) for h, w, _, _ in shapes] == seen
    width = length // memory_height
    for h, w, rows, cols in shapes:
        assert (rows, cols) == (memory_height - h + 1, width - w + 1)


def test_area_coordinates_1d_spans():
    # All width-1 windows by start, then all width-2 windows, ...
    coords = area_coordinates(4, 1, 3)
    starts_and_widths = [(int(c), int(w)) for _, c, _, w in coords]
    assert starts_and_widths == [
        (0, 1), (1, 1), (2, 1), (3, 1), (0, 2), (1, 2), (2, 2), (0, 3), (1, 3)
    ]
    assert (coords[:, 0] == 0).all() and (coords[:, 2] == 1).all()


@given(layouts())
@PROPERTY_SETTINGS
def test_area_coordinates_property(layout):
    length, memory_height, max_w, max_h = layout
    coords = area_coordinates(length, memory_height, max_w, max_h)
    expected = ref.enumerate_areas(length, memory_height, max_w, max_h)
    np.testing.assert_array_equal(coords, np.array(expected).reshape(-1, 4))
    assert num_areas(length, memory_height, max_w, max_h) == len(expected)
    # Every area lies inside the grid.
    width = length // memory_height
    assert (coords[:, 0] + coords[:, 2] <= memory_height).all()
    assert (coords[:, 1] + coords[:, 3] <= width).all()


# --------------------------------------------------------------------------
# area_reduce
# --------------------------------------------------------------------------


def _memory(rng, length, axis, reduction):
    shape = (2, length, 3) if axis in (-2, 1) else (2, 3, length)
    if reduction == "all":
        return rng.random(shape) < 0.8
    return rng.standard_normal(shape).astype("float32")


@pytest.mark.parametrize("layout,axis", LAYOUT_AXES, ids=LAYOUT_AXIS_IDS)
def test_area_reduce_vs_reference(layout, axis):
    length, memory_height, max_w, max_h = layout
    kw = _layout(memory_height, max_w, max_h)
    rng = np.random.default_rng(length * 100 + memory_height)
    count = num_areas(length, **kw)
    for reduction in ("sum", "max", "all"):
        x = _memory(rng, length, axis, reduction)
        got = area_reduce(x, reduction, axis=axis, **kw)
        expected = ref.area_reduce_reference(x, reduction, axis=axis, **kw)
        assert tuple(got.shape) == expected.shape
        assert got.shape[axis] == count
        if reduction == "sum":
            np.testing.assert_allclose(to_numpy(got), expected, rtol=1e-5, atol=1e-5)
        else:
            # max and logical-and are exact.
            np.testing.assert_array_equal(to_numpy(got, x.dtype), expected)


def test_area_reduce_positive_axis():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 15, 3)).astype("float32")
    kw = _layout(3, 2, 2)
    expected = ref.area_reduce_reference(x, "sum", axis=1, **kw)
    got = area_reduce(x, "sum", axis=1, **kw)
    np.testing.assert_allclose(to_numpy(got), expected, rtol=1e-5, atol=1e-5)


def test_area_reduce_is_accurate_far_from_zero():
    # Area sums stay accurate relative to the area, not to the whole memory:
    # an item-level offset of 1000 over 256 items must not swamp the mean of
    # a single item.
    rng = np.random.default_rng(4)
    x = (1000.0 + rng.standard_normal((1, 256, 2))).astype("float32")
    kw = _layout(1, 3, 1)
    heights, widths = area_sizes(256, **kw)
    sizes = (heights * widths)[None, :, None]
    got = to_numpy(area_reduce(x, "sum", axis=-2, **kw)) / sizes
    expected = ref.area_reduce_reference(x, "sum", axis=-2, **kw) / sizes
    np.testing.assert_allclose(got, expected, rtol=0, atol=2e-4)


@given(layouts(pooled=True), st.integers(0, 2**31 - 1))
@PROPERTY_SETTINGS
def test_area_reduce_property(layout, seed):
    length, memory_height, max_w, max_h = layout
    kw = _layout(memory_height, max_w, max_h)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, length, 3)).astype("float32")
    np.testing.assert_allclose(
        to_numpy(area_reduce(x, "sum", axis=-2, **kw)),
        ref.area_reduce_reference(x, "sum", axis=-2, **kw),
        rtol=1e-5,
        atol=1e-5,
    )
    np.testing.assert_array_equal(
        to_numpy(area_reduce(x, "max", axis=-2, **kw), "float32"),
        ref.area_reduce_reference(x, "max", axis=-2, **kw),
    )


def test_area_reduce_rejects_unknown_reduction():
    with pytest.raises(ValueError, match="reduction"):
        area_reduce(np.zeros((2, 4, 3), "float32"), "mean")


# --------------------------------------------------------------------------
# area_features
# --------------------------------------------------------------------------


def _check_features(got, expected):
    np.testing.assert_array_equal(got["heights"], expected["heights"])
    np.testing.assert_array_equal(got["widths"], expected["widths"])
    for name in ("sum", "mean", "max"):
        np.testing.assert_allclose(
            to_numpy(got[name]), expected[name], rtol=1e-5, atol=1e-5, err_msg=name
        )
    # std = sqrt(|E[x^2] - mean^2| + 1e-6) suffers float32 cancellation when
    # the variance is tiny (the 1e-6 is then the whole answer): compare the
    # variance to float32 round-off, and the std tightly where well defined.
    std = to_numpy(got["std"])
    np.testing.assert_allclose(std**2, expected["std"] ** 2, rtol=0, atol=2e-6)
    well = expected["std"] > 0.1
    np.testing.assert_allclose(std[well], expected["std"][well], rtol=1e-5)


@pytest.mark.parametrize("layout,axis", LAYOUT_AXES, ids=LAYOUT_AXIS_IDS)
def test_area_features_vs_reference(layout, axis):
    length, memory_height, max_w, max_h = layout
    kw = _layout(memory_height, max_w, max_h)
    rng = np.random.default_rng(length * 10 + max_w)
    x = _memory(rng, length, axis, "sum")
    got = area_features(x, axis=axis, **kw)
    expected = ref.area_features_reference(x, axis=axis, **kw)
    assert set(got) == {"sum", "mean", "std", "max", "heights", "widths"}
    for name in ("sum", "mean", "std", "max"):
        assert backend.standardize_dtype(got[name].dtype) == "float32"
        assert tuple(got[name].shape) == expected[name].shape
    _check_features(got, expected)


def test_area_features_subset_and_half_precision_input():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 8, 3)).astype("float16")
    kw = _layout(4, 2, 3)
    got = area_features(x, features=("mean",), **kw)
    assert set(got) == {"mean", "heights", "widths"}
    assert backend.standardize_dtype(got["mean"].dtype) == "float32"
    expected = ref.area_features_reference(x.astype("float64"), **kw)
    np.testing.assert_allclose(to_numpy(got["mean"]), expected["mean"], atol=1e-5)


def test_area_features_std_epsilon_of_constant_memory():
    # A constant dyadic memory has an exactly zero variance in float32, so
    # every area's std is exactly sqrt(epsilon).
    x = np.full((2, 15, 3), 0.75, "float32")
    kw = _layout(3, 2, 2)
    expected = ref.area_features_reference(x, **kw)["std"]
    np.testing.assert_allclose(expected, 1e-3, rtol=1e-12)
    got = area_features(x, features=("std",), **kw)["std"]
    np.testing.assert_allclose(to_numpy(got), expected, rtol=1e-5)
    got = area_features(x, features=("std",), epsilon=1e-4, **kw)["std"]
    np.testing.assert_allclose(to_numpy(got), 1e-2, rtol=1e-5)


def test_area_features_std_is_finite_under_cancellation():
    # E[x^2] - mean^2 can round below zero in float32; the |.| keeps the
    # square root finite.
    rng = np.random.default_rng(6)
    x = (1000.0 + 1e-3 * rng.standard_normal((2, 7, 3))).astype("float32")
    std = to_numpy(area_features(x, features=("std",), **_layout(1, 3, 1))["std"])
    assert np.isfinite(std).all()
    assert (std >= 1e-3 * (1 - 1e-6)).all()


def test_area_features_rejects_unknown_feature():
    with pytest.raises(ValueError, match="features"):
        area_features(np.zeros((1, 4, 2), "float32"), features=("median",))


# --------------------------------------------------------------------------
# area_fold: the adjoint of area_reduce(..., "sum")
# --------------------------------------------------------------------------


@pytest.mark.parametrize("layout,axis", LAYOUT_AXES, ids=LAYOUT_AXIS_IDS)
def test_area_fold_is_adjoint_of_area_sum(layout, axis):
    length, memory_height, max_w, max_h = layout
    kw = _layout(memory_height, max_w, max_h)
    rng = np.random.default_rng(length + 7 * max_h)
    count = num_areas(length, **kw)
    if axis == -2:
        x = rng.standard_normal((2, length, 3))
        p = rng.standard_normal((2, count, 3))
    else:
        x = rng.standard_normal((2, 3, length))
        p = rng.standard_normal((2, 3, count))
    x32, p32 = x.astype("float32"), p.astype("float32")
    sizes = np.prod(area_sizes(length, **kw), axis=0)
    size_shape = [1, 1, 1]
    size_shape[axis] = count
    sizes = sizes.reshape(size_shape)

    for per_item in (False, True):
        folded = area_fold(p32, length=length, axis=axis, per_item=per_item, **kw)
        folded = to_numpy(folded)
        assert folded.shape == x.shape
        # Against the brute-force fold.
        np.testing.assert_allclose(
            folded,
            ref.area_fold_reference(p, length=length, axis=axis, per_item=per_item, **kw),
            rtol=1e-5,
            atol=1e-5,
        )
        # <p, reduce(x)> == <fold(p), x>, with the reference's area sums/means.
        reduced = ref.area_reduce_reference(x, "sum", axis=axis, **kw)
        if per_item:
            reduced = reduced / sizes
        lhs = np.sum(p * reduced)
        rhs = np.sum(folded * x)
        np.testing.assert_allclose(rhs, lhs, rtol=1e-5, atol=1e-4)
        # And with the library's own area_reduce.
        own = to_numpy(area_reduce(x32, "sum", axis=axis, **kw))
        if per_item:
            own = own / sizes
        np.testing.assert_allclose(np.sum(p * own), rhs, rtol=1e-5, atol=1e-4)


@given(layouts(pooled=True), st.integers(0, 2**31 - 1), st.booleans())
@PROPERTY_SETTINGS
def test_area_fold_adjoint_property(layout, seed, per_item):
    length, memory_height, max_w, max_h = layout
    kw = _layout(memory_height, max_w, max_h)
    rng = np.random.default_rng(seed)
    count = num_areas(length, **kw)
    x = rng.standard_normal((2, 3, length))
    p = rng.standard_normal((2, 3, count))
    folded = to_numpy(
        area_fold(p.astype("float32"), length=length, per_item=per_item, **kw)
    )
    reduced = ref.area_reduce_reference(x, "sum", axis=-1, **kw)
    if per_item:
        reduced = reduced / np.prod(area_sizes(length, **kw), axis=0)
    np.testing.assert_allclose(
        np.sum(folded * x, axis=-1), np.sum(p * reduced, axis=-1), rtol=1e-5, atol=1e-4
    )


def test_area_fold_rejects_wrong_area_count():
    with pytest.raises(ValueError, match="areas"):
        area_fold(np.zeros((2, 5), "float32"), length=4, max_area_width=2)
