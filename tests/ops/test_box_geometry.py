"""Tests of `keras_structattn.ops.box_geometry` (Mao et al., 2022, MCAN+PA,
Eqs. 13-14; the embedding of Hu et al., 2018, arXiv:1711.11575).

The references below are written from the papers and the released code's
conventions (size ratio sign, size offset, channel order) with explicit
loops over box pairs, features, frequencies and channels, in float64 with
`math`: nothing is shared with the library's vectorised (and, for
`geometry_logits`, angle-sum) formulation.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from keras import ops

from keras_structattn.ops import box_geometry as bg
from tests._backend import gradients
from tests._backend import jit
from tests._backend import to_numpy


def reference_geometry(query_boxes, key_boxes, size_ratio="key_over_query", size_offset=0.0,
                       clip=1e-3):
    """[Nq, Nk, 4] by loops, for one image."""
    out = np.zeros((len(query_boxes), len(key_boxes), 4))
    for i, (qx1, qy1, qx2, qy2) in enumerate(np.asarray(query_boxes, np.float64)):
        wi = max(qx2 - qx1 + size_offset, bg.MIN_SIZE)
        hi = max(qy2 - qy1 + size_offset, bg.MIN_SIZE)
        for j, (kx1, ky1, kx2, ky2) in enumerate(np.asarray(key_boxes, np.float64)):
            wj = max(kx2 - kx1 + size_offset, bg.MIN_SIZE)
            hj = max(ky2 - ky1 + size_offset, bg.MIN_SIZE)
            dx = abs((qx1 + qx2) / 2 - (kx1 + kx2) / 2)
            dy = abs((qy1 + qy2) / 2 - (ky1 + ky2) / 2)
            ratio = (wj / wi, hj / hi) if size_ratio == "key_over_query" else (wi / wj, hi / hj)
            out[i, j] = (math.log(max(dx / wi, clip)), math.log(max(dy / hi, clip)),
                         math.log(ratio[0]), math.log(ratio[1]))
    return out


def reference_embedding(geometry, dim=64, wavelength=1000.0, scale=100.0, ordering="sin_cos"):
    """[..., dim] by loops over channels."""
    geometry = np.asarray(geometry, np.float64)
    num = dim // 8
    out = np.zeros(geometry.shape[:-1] + (dim,))
    for index in np.ndindex(*geometry.shape[:-1]):
        channels = []
        if ordering == "sin_cos":  # MCAN+PA: all sines (feature-major), then all cosines
            for fn in (math.sin, math.cos):
                for a in range(4):
                    for k in range(num):
                        channels.append(fn(scale * geometry[index][a] / wavelength ** (k / num)))
        else:  # Relation Networks: per feature, its sines then its cosines
            for a in range(4):
                for fn in (math.sin, math.cos):
                    for k in range(num):
                        channels.append(fn(scale * geometry[index][a] / wavelength ** (k / num)))
        out[index] = channels
    return out


def random_boxes(rng, shape, low=0.02, high=0.4):
    corner = rng.uniform(0.0, 0.6, shape + (2,))
    size = rng.uniform(low, high, shape + (2,))
    return np.concatenate([corner, corner + size], -1).astype("float32")


@pytest.mark.parametrize("size_ratio", bg.SIZE_RATIOS)
@pytest.mark.parametrize("size_offset", [0.0, 1.0])
def test_relative_geometry_matches_loops(size_ratio, size_offset):
    rng = np.random.default_rng(0)
    query, key = random_boxes(rng, (2, 5)), random_boxes(rng, (2, 6))
    key[0, 0] = query[0, 0]  # identical centres: the clip is active
    key[1, 1, [0, 2]] = query[1, 2, [0, 2]]  # same x extent only
    got = to_numpy(bg.relative_geometry(query, key, size_ratio, size_offset))
    assert got.shape == (2, 5, 6, 4)
    for b in range(2):
        np.testing.assert_allclose(
            got[b], reference_geometry(query[b], key[b], size_ratio, size_offset),
            rtol=1e-5, atol=2e-5)
    assert got[0, 0, 0, 0] == pytest.approx(math.log(1e-3), abs=1e-5)
    # Self-attention default: key_boxes = query_boxes.
    np.testing.assert_allclose(
        to_numpy(bg.relative_geometry(query, size_ratio=size_ratio, size_offset=size_offset)),
        to_numpy(bg.relative_geometry(query, query, size_ratio, size_offset)))


def test_size_ratio_conventions_differ_by_sign():
    rng = np.random.default_rng(1)
    boxes = random_boxes(rng, (1, 4))
    paper = to_numpy(bg.relative_geometry(boxes, size_ratio="key_over_query"))
    code = to_numpy(bg.relative_geometry(boxes, size_ratio="query_over_key"))
    np.testing.assert_allclose(paper[..., :2], code[..., :2])
    np.testing.assert_allclose(paper[..., 2:], -code[..., 2:], atol=1e-6)
    assert np.abs(paper[..., 2:]).max() > 0.1


@settings(deadline=None, max_examples=15)
@given(seed=st.integers(0, 10_000), factor=st.floats(0.1, 20.0),
       shift=st.tuples(st.floats(-5, 5), st.floats(-5, 5)))
def test_geometry_is_translation_and_scale_invariant(seed, factor, shift):
    """The paper: "R_ij makes the feature invariant to translation and
    scaling" (with sizes measured as they are, size_offset=0)."""
    rng = np.random.default_rng(seed)
    boxes = random_boxes(rng, (1, 5))
    moved = (boxes.astype(np.float64) * factor + np.tile(shift, 2)).astype("float32")
    got = to_numpy(bg.relative_geometry(moved))[0]
    want = to_numpy(bg.relative_geometry(boxes))[0]
    # Rounding the moved corners to float32 (~5e-7 near 5) changes the
    # boxes themselves: their exact geometry drifts from the original's, by
    # up to ~1e-3 for small boxes and nearby centres (log|dx| and log w are
    # ill-conditioned there). Invariance holds up to that drift, measured
    # in float64, plus the library's own float32 error.
    drift = np.abs(reference_geometry(moved[0], moved[0]) - reference_geometry(boxes[0], boxes[0]))
    np.testing.assert_array_less(np.abs(got - want), drift + 2e-5)


def nearby_boxes(rng, shape, spread=3e-4, size=0.02):
    """float32 boxes with corners near 0.5, 1e-4 apart and 0.02 wide: centre
    offsets of 1e-4 against widths of 0.02, above the 1e-3 clip."""
    x1 = 0.5 + rng.uniform(-spread, spread, shape + (2,))
    x2 = x1 + size + rng.uniform(-spread, spread, shape + (2,))
    return np.concatenate([x1, x2], -1).astype("float32")


def test_offsets_of_nearby_boxes_keep_float32_precision():
    """The offset features' top-frequency angles (`100 * feature`) against a
    float64 reference from the same float32 corners. Centres rounded to
    float32 first (`(x1 + x2) / 2`, then `|c_i - c_j|`) lose ~3e-8 of 1e-4:
    angle errors of 0.01-0.2 rad here. Coordinate differences first are
    exact for nearby boxes: ~1e-4 rad, from the float32 logs."""
    rng = np.random.default_rng(8)
    query, key = nearby_boxes(rng, (2, 9)), nearby_boxes(rng, (2, 10))
    got = to_numpy(bg.relative_geometry(query, key))[..., :2]
    want = np.stack([reference_geometry(query[b], key[b])[..., :2] for b in range(2)])
    assert (want > math.log(1e-3) + 0.5).mean() > 0.5  # mostly above the clip
    top_rate = bg.frequencies(64)[0]
    assert top_rate == 100.0
    assert top_rate * np.abs(got - want).max() < 1e-3


@pytest.mark.parametrize("compiled", [False, True])
def test_geometry_logits_of_nearby_boxes_keep_float32_precision(compiled):
    """The same through `geometry_logits`, whose pairwise offsets have their
    own layouts (op by op and, compiled, flat for XLA): against the float64
    embedding projected by the kernel's offset rows (the size-ratio rows
    are zero, so only the offset angles count)."""
    rng = np.random.default_rng(9)
    query, key = nearby_boxes(rng, (2, 9)), nearby_boxes(rng, (2, 10))
    kernel = rng.normal(size=(64, 2)).astype("float32")
    index = bg.embedding_index(64, "sin_cos")
    for a in (2, 3):
        for s in (0, 1):
            for k in range(8):
                kernel[index(a, s, k)] = 0.0
    fn = jit(bg.geometry_logits) if compiled else bg.geometry_logits
    got = to_numpy(fn(query, key, kernel))
    for b in range(2):
        embedded = reference_embedding(reference_geometry(query[b], key[b]), 64)
        expected = np.einsum("ijd,dh->hij", embedded, kernel)
        # Rounded centres: errors of 0.1-0.4 here.
        np.testing.assert_allclose(got[b], expected, atol=2e-3)


def test_padding_boxes_give_finite_features():
    boxes = np.zeros((1, 3, 4), "float32")
    boxes[0, 0] = [0.1, 0.1, 0.5, 0.6]
    geometry = to_numpy(bg.relative_geometry(boxes))
    assert np.isfinite(geometry).all()
    assert np.isfinite(to_numpy(bg.geometry_embedding(geometry))).all()
    kernel = np.random.default_rng(2).normal(size=(64, 2)).astype("float32")
    assert np.isfinite(to_numpy(bg.geometry_logits(boxes, boxes, kernel))).all()


@pytest.mark.parametrize("ordering", bg.ORDERINGS)
@pytest.mark.parametrize("dim", [8, 64])
def test_embedding_matches_loops(ordering, dim):
    geometry = np.random.default_rng(3).normal(size=(2, 3, 4)).astype("float32")
    got = to_numpy(bg.geometry_embedding(geometry, dim=dim, ordering=ordering))
    np.testing.assert_allclose(got, reference_embedding(geometry, dim, ordering=ordering),
                               atol=2e-5)


def test_orderings_are_a_permutation_of_each_other():
    geometry = np.random.default_rng(4).normal(size=(5, 4)).astype("float32")
    sin_cos = to_numpy(bg.geometry_embedding(geometry, ordering="sin_cos"))
    per_feature = to_numpy(bg.geometry_embedding(geometry, ordering="per_feature"))
    a_index, b_index = bg.embedding_index(64, "sin_cos"), bg.embedding_index(64, "per_feature")
    permutation = [a_index(a, s, k) for a in range(4) for s in range(2) for k in range(8)]
    inverse = [b_index(a, s, k) for a in range(4) for s in range(2) for k in range(8)]
    np.testing.assert_array_equal(sin_cos[:, permutation], per_feature[:, inverse])
    assert not np.allclose(sin_cos, per_feature)


@pytest.mark.parametrize("ordering", bg.ORDERINGS)
@pytest.mark.parametrize("size_ratio", bg.SIZE_RATIOS)
@pytest.mark.parametrize("heads,compiled", [(3, False), (3, True), (1, True)])
def test_geometry_logits_equal_the_projected_embedding(ordering, size_ratio, heads, compiled):
    """The angle-sum formulation equals embedding every pair and projecting,
    op by op and compiled (TensorFlow lays the pairs out differently under
    XLA), and with one head (whose projection is padded to 8 rows)."""
    rng = np.random.default_rng(5)
    query, key = random_boxes(rng, (2, 4)), random_boxes(rng, (2, 7))
    kernel = rng.normal(scale=0.3, size=(32, heads)).astype("float32")
    bias = rng.normal(size=heads).astype("float32")

    def logits(query, key, kernel, bias):
        return bg.geometry_logits(query, key, kernel, bias, ordering=ordering,
                                  size_ratio=size_ratio, size_offset=1.0)

    got = to_numpy((jit(logits) if compiled else logits)(query, key, kernel, bias))
    assert got.shape == (2, heads, 4, 7)
    for b in range(2):
        embedded = reference_embedding(
            reference_geometry(query[b], key[b], size_ratio, 1.0), 32, ordering=ordering)
        expected = np.einsum("ijd,dh->hij", embedded, kernel) + bias[:, None, None]
        # float32 angles reach 100 |log 1e-3| = 690 rad (a 4e-5 rounding),
        # summed over 32 channels; a wrong channel would be off by ~0.1.
        np.testing.assert_allclose(got[b], expected, atol=5e-4)


def test_geometry_logits_gradient_and_xla():
    """d(sum(r * logits)) / d kernel = sum over pairs of r * E; and the
    compiled op gives the eager numbers."""
    rng = np.random.default_rng(6)
    boxes = random_boxes(rng, (1, 5))
    kernel = rng.normal(size=(16, 2)).astype("float32")
    weights = rng.normal(size=(1, 2, 5, 5)).astype("float32")

    def loss(k):
        return ops.sum(bg.geometry_logits(boxes, boxes, k) * weights)

    (grad,) = gradients(loss, kernel)
    embedded = reference_embedding(reference_geometry(boxes[0], boxes[0]), 16)
    np.testing.assert_allclose(grad, np.einsum("ijd,hij->dh", embedded, weights[0]), atol=1e-3)
    compiled = jit(lambda b, k: bg.geometry_logits(b, b, k))
    np.testing.assert_allclose(to_numpy(compiled(boxes, kernel)),
                               to_numpy(bg.geometry_logits(boxes, boxes, kernel)), atol=1e-4)


def test_outputs_are_float32_for_half_inputs():
    boxes = random_boxes(np.random.default_rng(7), (1, 3))
    half = ops.cast(boxes, "float16")
    for tensor in (bg.relative_geometry(half), bg.box_position_features(half),
                   bg.geometry_embedding(bg.relative_geometry(half)),
                   bg.geometry_logits(half, half, np.ones((8, 1), "float16"))):
        assert ops.convert_to_numpy(tensor).dtype == np.float32


def test_box_position_features():
    boxes = np.array([[[10, 20, 50, 80], [0, 0, 0, 0]],
                      [[0, 0, 100, 50], [25, 5, 75, 45]]], "float32")
    sizes = np.array([[100, 200], [100, 50]], "float32")
    got = to_numpy(bg.box_position_features(boxes, sizes))
    expected = np.zeros((2, 2, 5))
    for b in range(2):
        width, height = sizes[b]
        for n in range(2):
            x1, y1, x2, y2 = boxes[b, n]
            expected[b, n] = [x1 / width, y1 / height, x2 / width, y2 / height,
                              (x2 - x1) * (y2 - y1) / (width * height)]
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert (got[0, 1] == 0).all()  # padding stays zero
    # One (width, height) pair for all; normalised boxes as they are.
    np.testing.assert_allclose(to_numpy(bg.box_position_features(boxes[1:], (100, 50))),
                               expected[1:], atol=1e-6)
    np.testing.assert_allclose(to_numpy(bg.box_position_features(expected[..., :4])),
                               expected, atol=1e-6)


# Issue 17, item 15: the box contract (module docstring).

PADDED = np.array([[[0.1, 0.2, 0.4, 0.6], [0.5, 0.1, 0.9, 0.3], [0.0, 0.0, 0.0, 0.0]]],
                  "float32")  # the last row is padding


def changed(index, box, boxes=PADDED):
    boxes = boxes.copy()
    boxes[0, index] = box
    return boxes


@pytest.mark.parametrize("tensor", [False, True], ids=["numpy", "tensor"])
def test_geometry_boxes_outside_the_contract_are_named(tensor):
    convert = ops.convert_to_tensor if tensor else np.asarray
    kernel = np.ones((16, 2), "float32")
    reversed_box = convert(changed(1, [0.9, 0.1, 0.5, 0.3]))
    flat_box = convert(changed(0, [0.1, 0.2, 0.4, 0.2]))
    for call, match in (
        (lambda: bg.relative_geometry(reversed_box),
         r"`query_boxes` must hold boxes \[x1, y1, x2, y2\] with x1 <= x2 and y1 <= y2\. "
         r"Received: query_boxes\[0, 1\] = \[0\.9, 0\.1, 0\.5, 0\.3\] \(x2 < x1\)"),
        (lambda: bg.relative_geometry(PADDED, flat_box),
         r"`key_boxes` must hold boxes .* with a positive width and height \(the box geometry "
         r"divides by them\), or all-zero padding rows\. Received: key_boxes\[0, 0\] = .*"
         r"\(zero height\)"),
        (lambda: bg.geometry_logits(flat_box, PADDED, kernel), r"query_boxes\[0, 0\]"),
        (lambda: bg.box_position_features(convert(PADDED * 640)),
         r"normalised to \[0, 1\]\. Received: boxes\[0, 0\] = .*Pixel coordinates must be "
         r"divided by the image size .*`image_size=\(width, height\)`"),
        (lambda: bg.box_position_features(convert(PADDED * 640), (320, 640)),
         r"`boxes / image_size` .*boxes / image_size\[0, 1\]"),
    ):
        with pytest.raises(ValueError, match=match):
            call()


def test_geometry_box_contract_allows_padding_pixels_and_offset_sizes():
    # All-zero rows are padding; pixels are fine (the features are scale-free).
    np.testing.assert_allclose(to_numpy(bg.relative_geometry(PADDED * 640))[0, :2, :2],
                               to_numpy(bg.relative_geometry(PADDED))[0, :2, :2], atol=1e-4)
    # With a size offset nothing divides by a zero size.
    flat = changed(0, [0.1, 0.2, 0.4, 0.2])
    assert np.isfinite(to_numpy(bg.relative_geometry(flat, size_offset=1.0))).all()
    # Zero sizes are allowed in the 5-d feature: nothing divides by them.
    assert to_numpy(bg.box_position_features(flat))[0, 0, 4] == 0


def test_geometry_of_boxes_outside_the_contract_is_finite_under_jit():
    # Compiled code cannot read the boxes: sizes below MIN_SIZE are taken as
    # MIN_SIZE, so reversed and zero-size boxes give finite (meaningless) logits.
    boxes = np.concatenate([changed(1, [0.9, 0.1, 0.5, 0.3]), changed(0, [0.1, 0.2, 0.4, 0.2]),
                            changed(0, [0.3, 0.3, 0.3, 0.3]), PADDED * 640])
    kernel = np.random.default_rng(9).normal(size=(16, 2)).astype("float32")
    logits = to_numpy(jit(lambda b: bg.geometry_logits(b, b, kernel))(boxes))
    geometry = to_numpy(jit(bg.relative_geometry)(boxes))
    assert np.isfinite(logits).all() and np.isfinite(geometry).all()


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: bg.relative_geometry(np.zeros((2, 3))), "query_boxes"),
        (lambda: bg.relative_geometry(np.zeros((2, 4)), np.zeros((2, 5))), "key_boxes"),
        (lambda: bg.relative_geometry(np.zeros((2, 4)), size_ratio="ratio"), "size_ratio"),
        (lambda: bg.relative_geometry(np.zeros((2, 4)), size_offset=-1), "size_offset"),
        (lambda: bg.relative_geometry(np.zeros((2, 4)), clip=0), "clip"),
        (lambda: bg.geometry_embedding(np.zeros((2, 4)), dim=60), "dim"),
        (lambda: bg.geometry_embedding(np.zeros((2, 4)), ordering="cos_sin"), "ordering"),
        (lambda: bg.geometry_embedding(np.zeros((2, 4)), wavelength=0), "wavelength"),
        (lambda: bg.geometry_embedding(np.zeros((2, 3))), "geometry"),
        (lambda: bg.box_position_features(np.zeros((2, 4)), (1, 2, 3)), "image_size"),
    ],
)
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
