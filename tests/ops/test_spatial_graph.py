"""The spatial relation graph of SA-M4C (`keras_structattn.ops.spatial_graph`)
against a brute-force reference written from the relation rules of SA-M4C
(Kant et al., 2020, arXiv:2007.12146; docs/graph_attention.md): hand-made boundary
cases, random boxes, symmetry, the TextVQA sequence table, jit, the random
baseline and argument checks.

Random boxes lie on a 1/256 grid: there every quantity the rules compare
(centre offsets, areas, intersections, squared distances) is exact both in
the float32 implementation and in the float64 reference, so the two must
agree on every pair, including the many pairs that sit exactly on a sector
boundary, at IoU exactly 0.5 or at the distance threshold.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from keras import backend
from keras import ops

from keras_structattn.ops import spatial_graph as sg
from keras_structattn.ops.relation_tables import BLOCKED
from keras_structattn.ops.relation_tables import IMPLICIT
from tests._backend import compiled_on_jax
from tests._backend import jit

PROPERTY_SETTINGS = settings(max_examples=30, deadline=None)
GRID = 256

# --------------------------------------------------------------------------
# Brute-force reference: explicit loops over pairs, Python floats (float64)
# and `math`, straight from the rules as docs/graph_attention.md states them.


def ref_is_padding(box):
    return sum(box) == 0


def ref_strictly_contains(a, b):
    return a[0] < b[0] and a[1] < b[1] and a[2] > b[2] and a[3] > b[3]


def ref_iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    # Two zero-area boxes: union 0, IoU taken as 0 (the module's convention).
    return inter / union if union > 0 else 0.0


def ref_label(a, b, threshold):
    """Label of "a relative to b" for two distinct valid boxes."""
    if ref_strictly_contains(a, b):
        return 1
    if ref_strictly_contains(b, a):
        return 2
    if ref_iou(a, b) >= 0.5:
        return 3
    dx = (a[0] + a[2]) / 2 - (b[0] + b[2]) / 2
    dy = (a[1] + a[3]) / 2 - (b[1] + b[3]) / 2
    if math.sqrt(dx * dx + dy * dy) >= threshold * math.sqrt(2):
        return 0
    if dx == 0 and dy == 0:
        return 4  # coincident centres, rule 5
    theta = math.atan2(dy, dx)
    if theta <= 0:
        theta += 2 * math.pi  # (0, 2 pi]: theta = 0 counts as 2 pi
    k = math.ceil(theta / (math.pi / 4))
    assert 1 <= k <= 8
    return k + 3


def ref_relations(boxes, valid=None, threshold=0.5):
    """Labels `[..., N, N]` by loops; `boxes` `[..., N, 4]`."""
    boxes = np.asarray(boxes, np.float64)
    batch_shape = boxes.shape[:-2]
    n = boxes.shape[-2]
    flat = boxes.reshape(-1, n, 4)
    flat_valid = None if valid is None else np.asarray(valid, bool).reshape(-1, n)
    out = np.zeros((flat.shape[0], n, n), np.int64)
    for b in range(flat.shape[0]):
        rows = [tuple(float(v) for v in flat[b, i]) for i in range(n)]
        for i in range(n):
            for j in range(n):
                if flat_valid is None:
                    ok = not ref_is_padding(rows[i]) and not ref_is_padding(rows[j])
                else:
                    ok = flat_valid[b, i] and flat_valid[b, j]
                if not ok:
                    out[b, i, j] = 0
                elif i == j:
                    out[b, i, j] = 12
                else:
                    out[b, i, j] = ref_label(rows[i], rows[j], threshold)
    return out.reshape(batch_shape + (n, n))


def ref_textvqa(
    question_mask, object_boxes, object_mask, ocr_boxes, ocr_mask, decoder_length, threshold=0.5
):
    """The relation labels, cell by cell."""
    question_mask = np.asarray(question_mask, bool)
    graph_mask = np.concatenate([object_mask, ocr_mask], axis=1).astype(bool)
    boxes = np.concatenate([object_boxes, ocr_boxes], axis=1)
    spatial = ref_relations(boxes, graph_mask, threshold)
    batch, lq = question_mask.shape
    ng = graph_mask.shape[1]
    length = lq + ng + decoder_length

    def kind(t):
        return "q" if t < lq else ("g" if t < lq + ng else "d")

    def valid(b, t):
        if kind(t) == "q":
            return question_mask[b, t]
        if kind(t) == "g":
            return graph_mask[b, t - lq]
        return True

    out = np.full((batch, length, length), -1, np.int64)
    for b in range(batch):
        for i in range(length):
            for j in range(length):
                qk, kk = kind(i), kind(j)
                if qk == "q" or not valid(b, j) or not valid(b, i):
                    label = BLOCKED
                elif qk == "g":
                    if kk == "q":
                        label = IMPLICIT
                    elif kk == "g":
                        label = spatial[b, i - lq, j - lq]
                    else:
                        label = BLOCKED
                else:  # decoder query
                    if kk in ("q", "g"):
                        label = IMPLICIT
                    else:
                        label = IMPLICIT if j <= i else BLOCKED
                out[b, i, j] = label
    return out


# --------------------------------------------------------------------------
# Helpers.


def labels_numpy(boxes, valid=None, distance_threshold=0.5):
    out = sg.spatial_relations_numpy(boxes, valid, distance_threshold)
    assert isinstance(out, np.ndarray) and out.dtype == np.int32
    return out


_COMPILED = {}


def labels_ops(boxes, valid=None, distance_threshold=0.5, eager=False):
    """`spatial_relations`; compiled once per threshold on JAX unless eager.

    Eager JAX compiles every op for every new shape, which would dominate
    the file's runtime; eager JAX is still covered (`eager=True` in the
    hand-made cases, `test_eager_matches_reference` and the tests off the
    grid), and the other
    backends always run eagerly here.
    """
    if eager or backend.backend() != "jax":
        out = sg.spatial_relations(boxes, valid, distance_threshold)
    else:
        key = (distance_threshold, valid is None)
        if key not in _COMPILED:
            _COMPILED[key] = compiled_on_jax(
                lambda b, v=None: sg.spatial_relations(b, v, distance_threshold)
            )
        out = _COMPILED[key](boxes) if valid is None else _COMPILED[key](boxes, valid)
    assert backend.standardize_dtype(out.dtype) == "int32"
    return np.asarray(ops.convert_to_numpy(out))


PATHS = {"numpy": labels_numpy, "ops": labels_ops}


def grid_boxes(rng, batch, n, pad_fraction=0.15):
    """Random boxes on the 1/256 grid that exercise every label.

    Each box is a random small box (zero width or height included), or one
    strictly nested in the previous box (labels 1 and 2), or the previous box
    shifted by a few grid steps (overlap, label 3); some rows are zeroed
    (padding, anywhere in the row order).
    """
    out = np.zeros((batch, n, 4), np.int64)
    for b in range(batch):
        for i in range(n):
            kind = rng.random()
            prev = out[b, i - 1] if i else None
            if prev is not None and kind < 0.15 and min(prev[2] - prev[0], prev[3] - prev[1]) >= 3:
                x1 = rng.integers(prev[0] + 1, prev[2] - 1)
                y1 = rng.integers(prev[1] + 1, prev[3] - 1)
                x2 = rng.integers(x1, prev[2])
                y2 = rng.integers(y1, prev[3])
                out[b, i] = (x1, y1, x2, y2)
            elif prev is not None and kind < 0.3 and prev.sum() > 0:
                shift = rng.integers(-2, 3, size=2)
                box = prev + np.concatenate([shift, shift])
                out[b, i] = np.clip(box, 0, GRID)
            else:
                w, h = rng.integers(0, 80, size=2)
                x1 = rng.integers(0, GRID - w + 1)
                y1 = rng.integers(0, GRID - h + 1)
                out[b, i] = (x1, y1, x1 + w, y1 + h)
    boxes = (out / GRID).astype(np.float32)
    boxes[rng.random((batch, n)) < pad_fraction] = 0.0
    return boxes


def box(cx, cy, half=1 / 32):
    return [cx - half, cy - half, cx + half, cy + half]


# --------------------------------------------------------------------------
# Against the reference on random boxes.


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("seed,threshold", [(0, 0.5), (1, 0.5), (2, 0.25), (3, 0.3)])
def test_matches_reference_on_random_boxes(path, seed, threshold):
    rng = np.random.default_rng(seed)
    boxes = grid_boxes(rng, 3, 40)
    expected = ref_relations(boxes, threshold=threshold)
    # Not vacuous: every label occurs, padding and exact boundaries too.
    assert set(np.unique(expected)) == set(range(13))
    got = PATHS[path](boxes, distance_threshold=threshold)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_matches_reference_with_valid_mask(path):
    rng = np.random.default_rng(7)
    boxes = grid_boxes(rng, 2, 30, pad_fraction=0.2)
    # The mask overrides the sum-to-zero rule both ways: some all-zero rows
    # are valid (a point box at the origin), some real boxes are not.
    valid = rng.random((2, 30)) < 0.75
    expected = ref_relations(boxes, valid)
    assert set(np.unique(expected)) == set(range(13))
    np.testing.assert_array_equal(PATHS[path](boxes, valid), expected)


def test_matches_reference_with_extra_batch_dims_and_no_batch():
    rng = np.random.default_rng(11)
    boxes = grid_boxes(rng, 6, 12).reshape(2, 3, 12, 4)
    expected = ref_relations(boxes)
    for path in PATHS.values():
        np.testing.assert_array_equal(path(boxes), expected)
        np.testing.assert_array_equal(path(boxes[0, 0]), expected[0, 0])


def test_numpy_path_batch_chunks():
    # More pairs than one NumPy chunk holds: the chunks must be stitched
    # back in order (each image gets its own boxes' labels).
    n = 64
    batch = sg._PAIRS_PER_CHUNK // (n * n) * 2 + 3
    rng = np.random.default_rng(5)
    boxes = grid_boxes(rng, batch, n)
    got = labels_numpy(boxes)
    for b in (0, batch // 2, batch - 1):
        np.testing.assert_array_equal(got[b], ref_relations(boxes[b]))


def test_eager_matches_reference():
    rng = np.random.default_rng(8)
    boxes = grid_boxes(rng, 2, 40)
    valid = rng.random((2, 40)) < 0.8
    np.testing.assert_array_equal(labels_ops(boxes, eager=True), ref_relations(boxes))
    np.testing.assert_array_equal(
        labels_ops(boxes, valid, 0.3, eager=True), ref_relations(boxes, valid, 0.3)
    )


def test_paths_agree_on_arbitrary_float32_boxes():
    # Off the grid the result depends on float32 rounding, identically for
    # the NumPy and the eager keras.ops runs of the one implementation (XLA
    # may fuse a multiply-add and round once less, so not compiled).
    rng = np.random.default_rng(3)
    corner = rng.uniform(0, 0.75, (4, 50, 2))
    size = rng.uniform(0, 0.25, (4, 50, 2))
    boxes = np.concatenate([corner, corner + size], -1).astype(np.float32)
    boxes[:, ::9] = 0.0
    np.testing.assert_array_equal(labels_numpy(boxes), labels_ops(boxes, eager=True))


# --------------------------------------------------------------------------
# Hand-made cases: expected labels worked out by hand from the rules, checked
# on the reference too (so that the reference is checked as well).

B0 = box(0.5, 0.5, 1 / 16)  # the box that the others are placed around

HAND_CASES = {
    # name: (boxes, {(i, j): label}, threshold)
    # Nesting that shares the left edge is not containment; IoU 0.25, so the
    # direction of the centres decides: (0.5, 0.5) vs (0.375, 0.5).
    "shared_edge_direction": (
        [[0.25, 0.25, 0.75, 0.75], [0.25, 0.375, 0.5, 0.625]],
        {(0, 1): 11, (1, 0): 7},
        0.5,
    ),
    # Nesting sharing three edges with IoU 0.75: overlap both ways.
    "shared_edge_overlap": (
        [[0.25, 0.25, 0.75, 0.75], [0.25, 0.25, 0.75, 0.625]],
        {(0, 1): 3, (1, 0): 3},
        0.5,
    ),
    "strict_containment": (
        [[0.25, 0.25, 0.75, 0.75], [0.375, 0.375, 0.5, 0.5]],
        {(0, 1): 1, (1, 0): 2},
        0.5,
    ),
    # IoU exactly 0.5: shares three edges (0.125 / 0.25), and two 3/8
    # squares shifted by 1/8 (0.09375 / 0.1875).
    "iou_half_nested": (
        [[0.25, 0.25, 0.75, 0.75], [0.25, 0.25, 0.75, 0.5]],
        {(0, 1): 3, (1, 0): 3},
        0.5,
    ),
    "iou_half_shifted": (
        [[0.25, 0.25, 0.625, 0.625], [0.375, 0.25, 0.75, 0.625]],
        {(0, 1): 3, (1, 0): 3},
        0.5,
    ),
    # Shifted one grid step more: IoU < 0.5, a to the left of b.
    "iou_just_below_half": (
        [[0.25, 0.25, 0.625, 0.625], [0.375 + 1 / 256, 0.25, 0.75 + 1 / 256, 0.625]],
        {(0, 1): 7, (1, 0): 11},
        0.5,
    ),
    # Centres on the 8 sector boundaries around B0 (y down): right 11,
    # lower-right 45deg -> sector 1 -> 4, below 5, lower-left 135deg -> 6,
    # left 7, upper-left 225deg -> 8, above 9, upper-right 315deg -> 10.
    "sector_boundaries": (
        [
            B0,
            box(0.75, 0.5),
            box(0.75, 0.75),
            box(0.5, 0.75),
            box(0.25, 0.75),
            box(0.25, 0.5),
            box(0.25, 0.25),
            box(0.5, 0.25),
            box(0.75, 0.25),
        ],
        {
            (1, 0): 11, (2, 0): 4, (3, 0): 5, (4, 0): 6,
            (5, 0): 7, (6, 0): 8, (7, 0): 9, (8, 0): 10,
            # and B0 seen from each of them, the opposite sector
            (0, 1): 7, (0, 2): 8, (0, 3): 9, (0, 4): 10,
            (0, 5): 11, (0, 6): 4, (0, 7): 5, (0, 8): 6,
        },
        0.5,
    ),
    # One centre strictly inside each sector (22.5deg off the boundaries
    # roughly): (2, 1) steps -> sector 1, (1, 2) -> 2, and so on clockwise.
    "sector_interiors": (
        [
            B0,
            box(0.5 + 0.25, 0.5 + 0.125),
            box(0.5 + 0.125, 0.5 + 0.25),
            box(0.5 - 0.125, 0.5 + 0.25),
            box(0.5 - 0.25, 0.5 + 0.125),
            box(0.5 - 0.25, 0.5 - 0.125),
            box(0.5 - 0.125, 0.5 - 0.25),
            box(0.5 + 0.125, 0.5 - 0.25),
            box(0.5 + 0.25, 0.5 - 0.125),
        ],
        {(k, 0): k + 3 for k in range(1, 9)},
        0.5,
    ),
    # A "+" cross: same centre, neither nested nor overlapping (IoU 1/7).
    "coincident_cross": (
        [[0.25, 0.4375, 0.75, 0.5625], [0.4375, 0.25, 0.5625, 0.75]],
        {(0, 1): 4, (1, 0): 4},
        0.5,
    ),
    # Centres (0.25, 0.25) and (0.75, 0.75): d = 0.5 sqrt(2) exactly.
    "distance_at_threshold": (
        [box(0.25, 0.25), box(0.75, 0.75)],
        {(0, 1): 0, (1, 0): 0},
        0.5,
    ),
    # One grid step closer: a direction (dx = -0.5, dy = -0.5 + 1/256:
    # 180..225deg -> 8; reverse 4).
    "distance_just_below_threshold": (
        [box(0.25, 0.25), box(0.75, 0.75 - 1 / 256)],
        {(0, 1): 8, (1, 0): 4},
        0.5,
    ),
    # Threshold 0.25: d = 0.25 sqrt(2) exactly is cut, a bit less is not.
    "distance_at_other_threshold": (
        [box(0.5, 0.5), box(0.75, 0.75), box(0.75, 0.75 - 1 / 256)],
        {(1, 0): 0, (0, 1): 0, (2, 0): 4, (0, 2): 8},
        0.25,
    ),
    # Padding rows anywhere: every pair with them is 0, diagonal included.
    "padding_rows": (
        [[0, 0, 0, 0], box(0.5, 0.5), [0, 0, 0, 0], box(0.75, 0.5)],
        {
            **{(0, j): 0 for j in range(4)},
            **{(2, j): 0 for j in range(4)},
            **{(i, 0): 0 for i in range(4)},
            **{(i, 2): 0 for i in range(4)},
            (1, 1): 12, (3, 3): 12, (3, 1): 11, (1, 3): 7,
        },
        0.5,
    ),
    # Zero-area boxes: a point strictly inside a box is contained; two equal
    # points have union 0 (not overlap) and coincident centres (4); a
    # segment on the box's left edge is not inside it (centre (0.25,
    # 0.4375) vs (0.5, 0.5): 180..225deg -> 8, reverse 4).
    "zero_area": (
        [
            [0.25, 0.25, 0.75, 0.75],
            [0.5, 0.5, 0.5, 0.5],
            [0.5, 0.5, 0.5, 0.5],
            [0.25, 0.3125, 0.25, 0.5625],
        ],
        {
            (0, 1): 1, (1, 0): 2, (1, 2): 4, (2, 1): 4,
            (3, 0): 8, (0, 3): 4, (1, 1): 12, (3, 3): 12,
        },
        0.5,
    ),
    # Only a row summing to 0 is padding: segments from the origin are real
    # (centres (0, 0.125) and (0.125, 0): 135deg -> 6, reverse 315deg -> 10;
    # union 0, so not overlap).
    "degenerate_at_origin": (
        [[0, 0, 0, 0.25], [0, 0, 0.25, 0], [0, 0, 0, 0]],
        {(0, 0): 12, (1, 1): 12, (2, 2): 0, (0, 1): 6, (1, 0): 10, (0, 2): 0},
        0.5,
    ),
    # Identical boxes: IoU 1, not strict containment.
    "identical": (
        [box(0.5, 0.5), box(0.5, 0.5)],
        {(0, 1): 3, (1, 0): 3},
        0.5,
    ),
}


@pytest.mark.parametrize("name", sorted(HAND_CASES))
def test_hand_made_cases(name):
    boxes, expected, threshold = HAND_CASES[name]
    boxes = np.asarray(boxes, np.float32)
    reference = ref_relations(boxes, threshold=threshold)
    results = {
        "reference": reference,
        "numpy": labels_numpy(boxes, distance_threshold=threshold),
        "ops": labels_ops(boxes, distance_threshold=threshold, eager=True),
    }
    for path_name, got in results.items():
        for (i, j), label in expected.items():
            assert got[i, j] == label, (path_name, name, (i, j), got[i, j], label)
        np.testing.assert_array_equal(got, reference)


def test_valid_mask_overrides_sum_to_zero_rule():
    boxes = np.asarray([[0, 0, 0, 0], box(0.125, 0.125), box(0.75, 0.75)], np.float32)
    valid = np.asarray([True, True, False])
    for path in PATHS.values():
        got = path(boxes, valid)
        # The all-zero row is a valid point box at the origin: self, and the
        # box centred at (0.125, 0.125) is at 45deg from it (sector 1 -> 4).
        assert got[0, 0] == 12 and got[1, 0] == 4 and got[0, 1] == 8
        # The real box marked invalid is padding.
        assert (got[2] == 0).all() and (got[:, 2] == 0).all()
        # Without the mask, the zero row is padding and the box is valid.
        plain = path(boxes)
        assert (plain[0] == 0).all() and plain[2, 2] == 12


def test_labels_in_range_and_diagonal():
    rng = np.random.default_rng(2)
    boxes = grid_boxes(rng, 2, 25)
    valid = boxes.sum(-1) != 0
    for path in PATHS.values():
        got = path(boxes)
        assert got.min() >= 0 and got.max() <= 12
        diagonal = np.diagonal(got, axis1=-2, axis2=-1)
        np.testing.assert_array_equal(diagonal, np.where(valid, 12, 0))
        off_diagonal = got[:, ~np.eye(25, dtype=bool)]
        assert not (off_diagonal == 12).any()


# --------------------------------------------------------------------------
# Symmetry.


def opposite(label):
    """The opposite direction sector: label +/- 4 within 4..11."""
    return label + 4 if label < 8 else label - 4


def assert_symmetric(labels, boxes):
    centres_x = boxes[..., 0] + boxes[..., 2]
    centres_y = boxes[..., 1] + boxes[..., 3]
    n = labels.shape[-1]
    for i in range(n):
        for j in range(n):
            a, b = labels[i, j], labels[j, i]
            if a in (1, 2):
                assert b == 3 - a
            elif a in (0, 3, 12):
                assert b == a
            else:
                coincident = centres_x[i] == centres_x[j] and centres_y[i] == centres_y[j]
                if coincident:
                    assert a == b == 4
                else:
                    assert b == opposite(a), (i, j, a, b)


# 0 or at least 2^-20: TensorFlow and XLA flush subnormal results to zero
# (NumPy does not), so sums of coordinates near the float32 minimum could
# differ by a subnormal amount that only NumPy sees. From 2^-20 up, every
# difference, square and product in the rules stays a normal float32.
coordinate = st.one_of(st.just(0.0), st.floats(2.0**-20, 1.0, width=32))


@st.composite
def box_sets(draw, n=None):
    n = draw(st.integers(2, 8)) if n is None else n
    boxes = []
    for _ in range(n):
        xs = sorted(draw(st.lists(coordinate, min_size=2, max_size=2)))
        ys = sorted(draw(st.lists(coordinate, min_size=2, max_size=2)))
        if draw(st.booleans()) and boxes:
            # Reuse coordinates of an earlier box, so that shared edges,
            # aligned centres and equal boxes are common.
            other = boxes[draw(st.integers(0, len(boxes) - 1))]
            xs = [other[0], other[2]] if draw(st.booleans()) else xs
            ys = [other[1], other[3]] if draw(st.booleans()) else ys
        boxes.append([xs[0], ys[0], xs[1], ys[1]])
    return np.asarray(boxes, np.float32)


@PROPERTY_SETTINGS
@given(boxes=box_sets(), threshold=st.sampled_from([0.5, 0.25, 1.0]))
def test_symmetry_property_numpy(boxes, threshold):
    assert_symmetric(labels_numpy(boxes, distance_threshold=threshold), boxes)


@PROPERTY_SETTINGS
@given(boxes=box_sets(n=6))
def test_symmetry_property_ops(boxes):
    # A fixed N so that JAX compiles its eager kernels once.
    got = labels_ops(boxes, eager=True)
    assert_symmetric(got, boxes)
    np.testing.assert_array_equal(got, labels_numpy(boxes))


@st.composite
def grid_box_sets(draw):
    n = draw(st.integers(1, 7))
    boxes = []
    for _ in range(n):
        w, h = draw(st.integers(0, 16)), draw(st.integers(0, 16))
        x1, y1 = draw(st.integers(0, 32 - w)), draw(st.integers(0, 32 - h))
        boxes.append([x1, y1, x1 + w, y1 + h])
    # A coarse 1/32 grid makes boundaries and ties frequent.
    return np.asarray(boxes, np.float32) / 32


@PROPERTY_SETTINGS
@given(boxes=grid_box_sets(), threshold=st.sampled_from([0.5, 0.125, 0.3]))
def test_reference_property_numpy(boxes, threshold):
    np.testing.assert_array_equal(
        labels_numpy(boxes, distance_threshold=threshold),
        ref_relations(boxes, threshold=threshold),
    )


# --------------------------------------------------------------------------
# Box utilities.


def test_box_utilities():
    rng = np.random.default_rng(4)
    boxes = grid_boxes(rng, 2, 10, pad_fraction=0.0)
    boxes[0, 3] = boxes[0, 4] = [0.5, 0.5, 0.5, 0.5]  # union 0
    centres = np.asarray(ops.convert_to_numpy(sg.box_centers(boxes)))
    areas = np.asarray(ops.convert_to_numpy(sg.box_areas(boxes)))
    iou = np.asarray(ops.convert_to_numpy(sg.pairwise_iou(boxes)))
    contains = np.asarray(ops.convert_to_numpy(sg.pairwise_strict_containment(boxes)))
    assert centres.shape == (2, 10, 2) and areas.shape == (2, 10)
    assert iou.shape == (2, 10, 10) and contains.dtype == bool
    for b in range(2):
        for i in range(10):
            a = [float(v) for v in boxes[b, i]]
            assert centres[b, i, 0] == (a[0] + a[2]) / 2
            assert centres[b, i, 1] == (a[1] + a[3]) / 2
            assert areas[b, i] == (a[2] - a[0]) * (a[3] - a[1])
            for j in range(10):
                c = [float(v) for v in boxes[b, j]]
                assert iou[b, i, j] == pytest.approx(ref_iou(a, c), abs=1e-6)
                assert contains[b, i, j] == ref_strictly_contains(a, c)
    assert iou[0, 3, 4] == 0.0 and not np.isnan(iou).any()


# --------------------------------------------------------------------------
# The TextVQA sequence.


def textvqa_inputs(rng, batch=3, lq=4, no=7, nocr=5):
    question_mask = rng.random((batch, lq)) < 0.7
    question_mask[0] = True
    boxes = grid_boxes(rng, batch, no + nocr, pad_fraction=0.0)
    object_mask = rng.random((batch, no)) < 0.75
    ocr_mask = rng.random((batch, nocr)) < 0.75
    object_mask[1] = False  # an image without objects
    return question_mask, boxes[:, :no], object_mask, boxes[:, no:], ocr_mask


@pytest.mark.parametrize("decoder_length", [0, 1, 4])
def test_textvqa_relations_matches_table(decoder_length):
    rng = np.random.default_rng(decoder_length)
    inputs = textvqa_inputs(rng)
    expected = ref_textvqa(*inputs, decoder_length)
    numpy_out = sg.textvqa_relations_numpy(*inputs, decoder_length)
    assert isinstance(numpy_out, np.ndarray) and numpy_out.dtype == np.int32
    np.testing.assert_array_equal(numpy_out, expected)
    out = sg.textvqa_relations(*inputs, decoder_length)
    assert backend.standardize_dtype(out.dtype) == "int32"
    np.testing.assert_array_equal(np.asarray(ops.convert_to_numpy(out)), expected)
    # Not vacuous: the three kinds of label all occur.
    assert (expected == IMPLICIT).any() and (expected == BLOCKED).any()
    assert ((expected >= 1) & (expected <= 12)).any()


def test_textvqa_relations_threshold_and_block_layout():
    rng = np.random.default_rng(9)
    inputs = textvqa_inputs(rng, batch=2, lq=3, no=4, nocr=6)
    labels = sg.textvqa_relations_numpy(*inputs, 5, distance_threshold=0.25)
    np.testing.assert_array_equal(labels, ref_textvqa(*inputs, 5, threshold=0.25))
    lq, ng = 3, 10
    # Question rows are blocked; the decoder block is lower-triangular.
    assert (labels[:, :lq] == BLOCKED).all()
    decoder = labels[:, lq + ng:, lq + ng:]
    np.testing.assert_array_equal(
        decoder[0], np.where(np.tril(np.ones((5, 5), bool)), IMPLICIT, BLOCKED)
    )


# --------------------------------------------------------------------------
# jit / XLA and inside a keras.Model.


def test_spatial_relations_under_jit():
    rng = np.random.default_rng(12)
    boxes = grid_boxes(rng, 2, 30)
    valid = rng.random((2, 30)) < 0.8
    expected = ref_relations(boxes, threshold=0.3)
    expected_valid = ref_relations(boxes, valid)
    compiled = jit(lambda b: sg.spatial_relations(b, distance_threshold=0.3))
    compiled_valid = jit(lambda b, v: sg.spatial_relations(b, v))
    np.testing.assert_array_equal(np.asarray(compiled(boxes)), expected)
    np.testing.assert_array_equal(np.asarray(compiled_valid(boxes, valid)), expected_valid)


def test_textvqa_relations_under_jit():
    rng = np.random.default_rng(13)
    inputs = textvqa_inputs(rng)
    compiled = jit(lambda *args: sg.textvqa_relations(*args, 3))
    np.testing.assert_array_equal(np.asarray(compiled(*inputs)), ref_textvqa(*inputs, 3))


@pytest.mark.parametrize("jit_compile", [False, True])
def test_spatial_relations_in_keras_model(jit_compile):
    import keras

    rng = np.random.default_rng(14)
    boxes = grid_boxes(rng, 4, 20)
    inputs = keras.Input((20, 4))
    outputs = keras.layers.Lambda(lambda b: sg.spatial_relations(b))(inputs)
    model = keras.Model(inputs, outputs)
    model.compile(jit_compile=jit_compile)
    got = np.asarray(model.predict(boxes, batch_size=4, verbose=0))
    np.testing.assert_array_equal(got, ref_relations(boxes))


def test_textvqa_relations_in_keras_model():
    import keras

    rng = np.random.default_rng(16)
    inputs = textvqa_inputs(rng)
    symbolic = [
        keras.Input(x.shape[1:], dtype="bool" if x.dtype == bool else "float32")
        for x in inputs
    ]
    outputs = keras.layers.Lambda(lambda args: sg.textvqa_relations(*args, 2))(symbolic)
    model = keras.Model(symbolic, outputs)
    got = np.asarray(model.predict(list(inputs), batch_size=3, verbose=0))
    np.testing.assert_array_equal(got, ref_textvqa(*inputs, 2))


def test_unknown_box_count_in_tf_graph():
    if backend.backend() != "tensorflow":
        pytest.skip("only TensorFlow traces with unknown dimensions")
    import tensorflow as tf

    fn = tf.function(
        sg.spatial_relations, input_signature=[tf.TensorSpec([None, None, 4], tf.float32)]
    )
    rng = np.random.default_rng(15)
    for n in (5, 17):
        boxes = grid_boxes(rng, 2, n)
        np.testing.assert_array_equal(fn(boxes).numpy(), ref_relations(boxes))


# --------------------------------------------------------------------------
# The random baseline.


def test_random_relations():
    labels = sg.random_relations((4, 60, 60), seed=0)
    assert labels.dtype == np.int32 and labels.shape == (4, 60, 60)
    np.testing.assert_array_equal(labels, sg.random_relations((4, 60, 60), seed=0))
    assert not np.array_equal(labels, sg.random_relations((4, 60, 60), seed=1))
    # Uniform over 0..12, the diagonal included: 14400 draws, ~1108 each
    # (standard deviation ~32).
    counts = np.bincount(labels.ravel(), minlength=13)
    assert counts.shape == (13,) and (abs(counts - labels.size / 13) < 200).all()
    diagonal = np.diagonal(labels, axis1=-2, axis2=-1)
    assert len(np.unique(diagonal)) > 5
    valid = np.ones((4, 60), bool)
    valid[1, 10:] = False
    masked = sg.random_relations((4, 60, 60), seed=0, valid=valid)
    assert (masked[1, 10:] == 0).all() and (masked[1, :, 10:] == 0).all()
    np.testing.assert_array_equal(masked[0], labels[0])
    np.testing.assert_array_equal(masked[1, :10, :10], labels[1, :10, :10])


# --------------------------------------------------------------------------
# Argument checks.


@pytest.mark.parametrize("path", sorted(PATHS))
def test_bad_arguments(path):
    fn = {"numpy": sg.spatial_relations_numpy, "ops": sg.spatial_relations}[path]
    boxes = np.zeros((2, 5, 4), np.float32)
    with pytest.raises(ValueError, match="`boxes`"):
        fn(np.zeros((2, 5, 3), np.float32))
    with pytest.raises(ValueError, match="`boxes`"):
        fn(np.zeros((4,), np.float32))
    for threshold in (0, 0.0, -0.5, float("nan"), "0.5", True):
        with pytest.raises(ValueError, match="`distance_threshold`"):
            fn(boxes, distance_threshold=threshold)
    for valid in (np.ones((2, 4), bool), np.ones((5,), bool), np.ones((2, 5, 1), bool)):
        with pytest.raises(ValueError, match="`valid`"):
            fn(boxes, valid)


def test_bad_arguments_utilities_and_baseline():
    for fn in (sg.box_centers, sg.box_areas, sg.pairwise_iou, sg.pairwise_strict_containment):
        with pytest.raises(ValueError, match="`boxes`"):
            fn(np.zeros((3, 5), np.float32))
    for shape in ((3,), (2, 3, 4), 5, (2, -1, -1)):
        with pytest.raises(ValueError, match="`shape`"):
            sg.random_relations(shape, seed=0)
    with pytest.raises(ValueError, match="`valid`"):
        sg.random_relations((2, 3, 3), seed=0, valid=np.ones((2, 4), bool))


@pytest.mark.parametrize(
    "fn", [sg.textvqa_relations, sg.textvqa_relations_numpy], ids=["ops", "numpy"]
)
def test_bad_arguments_textvqa(fn):
    rng = np.random.default_rng(0)
    q, ob, om, oc, ocm = textvqa_inputs(rng)
    with pytest.raises(ValueError, match="`decoder_length`"):
        fn(q, ob, om, oc, ocm, -1)
    with pytest.raises(ValueError, match="`decoder_length`"):
        fn(q, ob, om, oc, ocm, 2.0)
    with pytest.raises(ValueError, match="`distance_threshold`"):
        fn(q, ob, om, oc, ocm, 2, distance_threshold=0)
    with pytest.raises(ValueError, match="`object_boxes`"):
        fn(q, ob[..., :3], om, oc, ocm, 2)
    with pytest.raises(ValueError, match="`object_boxes`"):
        fn(q, ob[0], om, oc, ocm, 2)
    with pytest.raises(ValueError, match="`ocr_boxes`"):
        fn(q, ob, om, oc[:2], ocm, 2)
    with pytest.raises(ValueError, match="`object_mask`"):
        fn(q, ob, om[:, :-1], oc, ocm, 2)
    with pytest.raises(ValueError, match="`ocr_mask`"):
        fn(q, ob, om, oc, ocm[:2], 2)
    with pytest.raises(ValueError, match="`question_mask`"):
        fn(q[:2], ob, om, oc, ocm, 2)
    with pytest.raises(ValueError, match="`question_mask`"):
        fn(q[0], ob, om, oc, ocm, 2)


# --------------------------------------------------------------------------
# Issue 17, item 15: the box contract (module docstring), checked where the
# values are known.

GOOD_BOXES = np.array(
    [[[0.1, 0.1, 0.3, 0.4], [0.5, 0.5, 0.5, 0.9], [0.0, 0.0, 0.0, 0.0], [0.2, 0.6, 0.9, 1.0]]],
    np.float32,
)  # a zero-width box and a padding row among them


def with_box(index, box):
    boxes = GOOD_BOXES.copy()
    boxes[(0, index)] = box
    return boxes


# name: (boxes, the index of the only bad box or None, the error)
BAD_BOXES = {
    "x2<x1": (with_box(3, [0.9, 0.6, 0.2, 1.0]), 3, r"x1 <= x2 and y1 <= y2\. Received: "
              r"boxes\[0, 3\] = \[0\.9, 0\.6, 0\.2, 1\.0\] \(x2 < x1\)"),
    "y2<y1": (with_box(1, [0.5, 0.9, 0.5, 0.5]), 1, r"boxes\[0, 1\] = .* \(y2 < y1\)"),
    "pixels": (GOOD_BOXES * 640, None, r"normalised to \[0, 1\]\. Received: boxes\[0, 0\] = "
               r".* \(outside \[0, 1\]\)\. Pixel coordinates must be divided by the image size"),
    "negative": (with_box(1, [-0.1, 0.5, 0.5, 0.9]), 1, r"boxes\[0, 1\] .*outside \[0, 1\]"),
    "nan": (with_box(0, [0.1, np.nan, 0.3, 0.4]), 0, r"finite numbers\. Received: boxes\[0, 0\]"),
}


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("case", sorted(BAD_BOXES))
def test_boxes_outside_the_contract_are_named(path, case):
    fn = {"numpy": sg.spatial_relations_numpy, "ops": sg.spatial_relations}[path]
    boxes, index, message = BAD_BOXES[case]
    for argument in [boxes] if path == "numpy" else [boxes, ops.convert_to_tensor(boxes)]:
        with pytest.raises(ValueError, match=message):
            fn(argument)
    if index is not None:
        # A box flagged as padding by `valid` is not used, so not checked.
        valid = np.ones(boxes.shape[:-1], bool)
        valid[0, index] = False
        np.testing.assert_array_equal(PATHS[path](boxes, valid), ref_relations(boxes, valid))


def test_zero_size_and_padding_boxes_follow_the_contract():
    # Zero width (box 1) is allowed: no rule divides by a size.
    for path in PATHS.values():
        np.testing.assert_array_equal(path(GOOD_BOXES), ref_relations(GOOD_BOXES))
    # TextVQA: masked object and OCR boxes are padding, whatever they hold.
    rng = np.random.default_rng(17)
    q, ob, om, oc, ocm = textvqa_inputs(rng)
    oc[0, 1] = [10.0, 20.0, 50.0, 80.0]  # pixels
    for fn in (sg.textvqa_relations, sg.textvqa_relations_numpy):
        ocm[0, 1] = True
        with pytest.raises(ValueError, match=r"`ocr_boxes` .*ocr_boxes\[0, 1\] = .*Pixel"):
            fn(q, ob, om, oc, ocm, 2)
        ocm[0, 1] = False
        np.testing.assert_array_equal(
            np.asarray(ops.convert_to_numpy(fn(q, ob, om, oc, ocm, 2))),
            ref_textvqa(q, ob, om, oc, ocm, 2),
        )


def test_boxes_outside_the_contract_under_jit_give_labels_in_range():
    # Compiled code cannot read the boxes: no error, and labels in 0..12
    # (meaningless ones) for reversed, pixel and zero-size boxes.
    boxes = np.concatenate([BAD_BOXES[case][0] for case in ("x2<x1", "y2<y1", "pixels")])
    labels = np.asarray(jit(sg.spatial_relations)(boxes))
    assert labels.shape == (3, 4, 4) and labels.min() >= 0 and labels.max() <= 12
