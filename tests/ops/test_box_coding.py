"""Tests of `keras_structattn.ops.box_coding` (the Faster R-CNN box deltas,
Ren et al., 2015, arXiv:1506.01497, Eq. 2).

The references are values derived by hand from the equations and a
per-box `math` loop; nothing is shared with the library's vectorised code.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_structattn.ops import box_coding as bc
from tests._backend import jit
from tests._backend import to_numpy


def reference_encode(box, target):
    """`[dx, dy, dw, dh]` of one pair with `math`."""
    x1, y1, x2, y2 = box
    t1, u1, t2, u2 = target
    w, h = max(x2 - x1, bc.MIN_SIZE), max(y2 - y1, bc.MIN_SIZE)
    tw, th = max(t2 - t1, bc.MIN_SIZE), max(u2 - u1, bc.MIN_SIZE)
    return [
        ((t1 + t2) / 2 - (x1 + x2) / 2) / w,
        ((u1 + u2) / 2 - (y1 + y2) / 2) / h,
        math.log(tw / w),
        math.log(th / h),
    ]


def test_hand_derived_values():
    # Box centre (0.2, 0.3), size (0.2, 0.4); target centre (0.3, 0.2),
    # size (0.4, 0.1): dx = 0.1 / 0.2, dy = -0.1 / 0.4, dw = log 2,
    # dh = log 0.25.
    box = np.array([[0.1, 0.1, 0.3, 0.5]], np.float32)
    target = np.array([[0.1, 0.15, 0.5, 0.25]], np.float32)
    expected = np.array([[0.5, -0.25, math.log(2.0), math.log(0.25)]])
    np.testing.assert_allclose(to_numpy(bc.encode_box_deltas(box, target)), expected, atol=1e-6)
    np.testing.assert_allclose(bc.encode_box_deltas_numpy(box, target), expected, atol=1e-6)
    # Decoding: centre moves by (dx w, dy h), the size scales by exp.
    deltas = np.array([[0.5, -0.25, math.log(2.0), math.log(0.25)]], np.float32)
    np.testing.assert_allclose(to_numpy(bc.decode_box_deltas(box, deltas)), target, atol=1e-6)
    np.testing.assert_allclose(bc.decode_box_deltas_numpy(box, deltas), target, atol=1e-6)


def test_identity_and_broadcast_against_loop():
    rng = np.random.default_rng(0)
    corners = np.sort(rng.uniform(size=(2, 5, 2, 2)), axis=2)  # [B, N, (lo, hi), (x, y)]
    boxes = corners.reshape(2, 5, 4).astype(np.float32)  # [lo x, lo y, hi x, hi y]
    target = np.array([[[0.2, 0.3, 0.6, 0.9]], [[0.0, 0.0, 1.0, 1.0]]], np.float32)
    expected = np.array([[reference_encode(b, target[i, 0]) for b in boxes[i]] for i in range(2)])
    got = to_numpy(bc.encode_box_deltas(boxes, target))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(bc.encode_box_deltas_numpy(boxes, target), expected,
                               rtol=1e-5, atol=1e-5)
    # A box onto itself: zero deltas.
    np.testing.assert_allclose(bc.encode_box_deltas_numpy(boxes, boxes), 0.0, atol=1e-7)


def test_degenerate_boxes_are_finite():
    zero = np.zeros((1, 3, 4), np.float32)
    target = np.array([[[0.2, 0.3, 0.6, 0.9]]], np.float32)
    for deltas in (to_numpy(bc.encode_box_deltas(zero, target)),
                   bc.encode_box_deltas_numpy(zero, target),
                   bc.encode_box_deltas_numpy(target, zero)):
        assert np.all(np.isfinite(deltas))
    huge = np.full((1, 3, 4), 1e30, np.float32)
    for boxes in (to_numpy(bc.decode_box_deltas(target, huge)),
                  bc.decode_box_deltas_numpy(target, huge)):
        assert np.all(np.isfinite(boxes))


def test_compiled_equals_eager():
    rng = np.random.default_rng(1)
    boxes = np.sort(rng.uniform(size=(3, 4, 2, 2)), axis=2).reshape(3, 4, 4).astype(np.float32)
    target = boxes[:, :1]
    eager = to_numpy(bc.encode_box_deltas(boxes, target))
    compiled = to_numpy(jit(bc.encode_box_deltas)(boxes, target))
    np.testing.assert_allclose(compiled, eager, rtol=1e-6, atol=1e-6)


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="boxes"):
        bc.encode_box_deltas(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="deltas"):
        bc.decode_box_deltas_numpy(np.zeros((2, 4)), np.zeros((2, 5)))


def _box(draw):
    # Sizes of at least 1e-3 of the image, so float32 keeps 1e-5 accuracy.
    x1, y1 = draw(st.floats(0.0, 0.99)), draw(st.floats(0.0, 0.99))
    w = draw(st.floats(1e-3, 1.0 - x1)) if x1 < 0.999 else 1e-3
    h = draw(st.floats(1e-3, 1.0 - y1)) if y1 < 0.999 else 1e-3
    return [x1, y1, min(x1 + w, 1.0), min(y1 + h, 1.0)]


@st.composite
def _box_pairs(draw):
    return [_box(draw) for _ in range(4)], [_box(draw) for _ in range(4)]


@settings(max_examples=25, deadline=None)
@given(_box_pairs())
def test_decode_inverts_encode(pairs):
    boxes = np.asarray(pairs[0], np.float32)
    targets = np.asarray(pairs[1], np.float32)
    round_trip = to_numpy(bc.decode_box_deltas(boxes, bc.encode_box_deltas(boxes, targets)))
    np.testing.assert_allclose(round_trip, targets, atol=2e-5)
    numpy_trip = bc.decode_box_deltas_numpy(boxes, bc.encode_box_deltas_numpy(boxes, targets))
    np.testing.assert_allclose(numpy_trip, targets, atol=2e-5)
