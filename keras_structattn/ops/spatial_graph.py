"""The spatial relation graph of SA-M4C: box geometry and relation labels.

SA-M4C (Kant et al., 2020, "Spatially Aware Multimodal Transformers for
TextVQA", arXiv:2007.12146, Section 4.1 and Fig. 2a) labels every ordered
pair of boxes `(a, b)` of an image, "a relative to b", with one of 13
spatial relations (`spatial_relations`), and `textvqa_relations` extends the
labels to the whole TextVQA sequence (question | objects | OCR | decoder,
the paper's Fig. 2b) with the `IMPLICIT` and `BLOCKED` labels of
`relation_tables`. The rules, and where they differ from the released code,
are in docs/graph_attention.md.

Boxes are `[..., N, 4]`, `[x1, y1, x2, y2]` normalised by the image size, y
pointing down. Padding boxes are all-zero rows (or given by a `valid` mask).

**The box contract.** Real boxes (not padding) must have `x1 <= x2`,
`y1 <= y2` and every coordinate in [0, 1] (the distance cut-off is a
fraction of the image diagonal, so pixel coordinates would put every pair
"too far apart"). Where the values are known (NumPy inputs, eager tensors)
a box that breaks it raises a ValueError naming its index; inside compiled
code (a `keras.Model`, `tf.function`, `jax.jit`) the boxes are not checked,
and finite boxes that break it get labels in 0..12 that follow the rules
below but mean nothing. Zero-width or zero-height boxes are allowed: no
rule divides by a width or height (see below).

**One implementation, two entry points.** The rules are written once, against
an array namespace `xp` that is either `keras.ops` or a thin NumPy shim with
the same function names (`_NUMPY`). `spatial_relations` runs them as
`keras.ops` (any backend, eager, in a `keras.Model`, under
`jit_compile`/XLA); `spatial_relations_numpy` runs the very same code on host
NumPy arrays, for data pipelines that must not touch the accelerator or the
Keras backend (e.g. inside `tf.data` with the JAX backend). Both compute in
float32 and give identical labels.

**Float edge cases.** The direction sector is decided without trigonometry,
by exact comparisons of the centre offsets: the signs of `dx` and `dy` and
`|dy|` against `|dx|` (through a 27-entry table, `_DIRECTION_TABLE`). These
reproduce the left-open, right-closed sectors of the rule exactly for any
float offsets. `ceil(atan2(dy, dx) / (pi / 4))` would instead depend on
`atan2` rounding: at the boundaries the quotient must land exactly on an
integer (in float32, `7 pi / 4` over `pi / 4` is 6.9999995, right by one
ulp), and offsets an ulp off a 45-degree diagonal can be rounded onto it;
`atan2` is not correctly rounded on every backend and device. Likewise
IoU >= 0.5 is tested as `2 * intersection >= union` (the same decision as
comparing the rounded quotient, with no division and no 0 / 0) and the
distance cut-off as `(2 dx)^2 + (2 dy)^2 >= 8 t^2` (no square root).
Everything is computed in float32. For coordinates that are exact in binary
(multiples of a power of two such as 1/256, or the hand-made 0.25 / 0.5 /
0.75) every compared quantity is exact in float32, so boundaries (a box
exactly to the right: 11, exactly below: 5, exactly left: 7, exactly above:
9, an exact 45-degree diagonal: the sector that ends there, e.g. lower-right
4, IoU exactly 0.5: overlap, a distance exactly at the threshold: no
relation) come out exactly as the real-number rule says. For other
coordinates (0.1, 0.3) the rule is applied to the float32 centres, so a
diagonal that is exact in decimal may be an ulp off and fall in the
neighbouring sector (float64 `atan2` on the same decimals has ulp-level ties
of the same kind). Under XLA a multiply-add may be fused (one rounding less),
which can move such ulp-level ties, never binary-exact cases.

Zero-area boxes take part like any other, since no rule divides by a
width, height or area: two of them have union 0, and their IoU is taken as
0 (not overlap).
"""

import numpy as np
from keras import ops

from keras_structattn import checks
from keras_structattn.ops.relation_tables import BLOCKED
from keras_structattn.ops.relation_tables import CONTAINS
from keras_structattn.ops.relation_tables import IMPLICIT
from keras_structattn.ops.relation_tables import INSIDE
from keras_structattn.ops.relation_tables import NUM_SPATIAL_LABELS
from keras_structattn.ops.relation_tables import OVERLAP
from keras_structattn.ops.relation_tables import SELF

# The label of "no relation" (too far apart, or a pair involving padding).
NO_RELATION = 0
# Pairs per NumPy chunk in `spatial_relations_numpy` (see there).
_PAIRS_PER_CHUNK = 1 << 17
# Label of direction sector k (1..8) is k + _SECTOR_OFFSET.
_SECTOR_OFFSET = 3


class _NumpyNamespace:
    """NumPy under the `keras.ops` names that the rules below use.

    Everything but `cast` and `convert_to_tensor` has the same name and
    meaning in NumPy, so attribute access falls through to `numpy`; `where`
    is replaced by a faster equivalent for integers.
    """

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def cast(x, dtype):
        return np.asarray(x).astype(dtype, copy=False)

    @staticmethod
    def convert_to_tensor(x, dtype=None):
        return np.asarray(x, dtype=dtype)

    @staticmethod
    def where(condition, x1, x2):
        # `np.where` branches per element, which is slow when the
        # condition is irregular, as it is for box pairs; a branchless
        # select is not. For integers, `x2 + condition * (x1 - x2)` is
        # exact (wrap-around cancels out) and takes ~3 cheap passes.
        dtype = np.result_type(x1, x2)
        if not np.issubdtype(dtype, np.integer):
            return np.where(condition, x1, x2)
        x1, x2 = np.asarray(x1, dtype), np.asarray(x2, dtype)
        return x2 + np.asarray(condition, bool) * (x1 - x2)


_NUMPY = _NumpyNamespace()


# --------------------------------------------------------------------------
# Argument checks (static shapes only: unknown dims are not checked).


def _check_boxes(name, boxes):
    shape = tuple(boxes.shape)
    if len(shape) < 2 or shape[-1] != 4:
        raise ValueError(
            f"Argument `{name}` must be boxes of shape [..., N, 4] "
            f"([x1, y1, x2, y2] each). Received: {name}.shape={shape}"
        )


def _compatible(shape, expected):
    return len(shape) == len(expected) and all(
        a is None or b is None or a == b for a, b in zip(shape, expected)
    )


def _check_mask(name, mask, expected, what):
    shape = tuple(mask.shape)
    if not _compatible(shape, expected):
        raise ValueError(
            f"Argument `{name}` must have the shape {tuple(expected)} of {what}. "
            f"Received: {name}.shape={shape}"
        )


# --------------------------------------------------------------------------
# Geometry, written once against `xp` (keras.ops or `_NUMPY`).


def _coords(boxes):
    """The four coordinates of each box, each `[..., N]`."""
    return [boxes[..., i] for i in range(4)]


def _as_rows(xp, x):
    """`[..., N]` -> `[..., N, 1]`: the box of the query (a, the row)."""
    return xp.expand_dims(x, -1)


def _as_cols(xp, x):
    """`[..., N]` -> `[..., 1, N]`: the box of the key (b, the column)."""
    return xp.expand_dims(x, -2)


def _intersection_union(xp, boxes):
    """Pairwise intersection and union areas, float32 `[..., N, N]` each."""
    x1, y1, x2, y2 = _coords(boxes)
    area = (x2 - x1) * (y2 - y1)
    width = xp.maximum(
        xp.minimum(_as_rows(xp, x2), _as_cols(xp, x2))
        - xp.maximum(_as_rows(xp, x1), _as_cols(xp, x1)),
        0.0,
    )
    height = xp.maximum(
        xp.minimum(_as_rows(xp, y2), _as_cols(xp, y2))
        - xp.maximum(_as_rows(xp, y1), _as_cols(xp, y1)),
        0.0,
    )
    intersection = width * height
    union = _as_rows(xp, area) + _as_cols(xp, area) - intersection
    return intersection, union


def _strict_containment(xp, boxes):
    """bool `[..., N, N]`: box a (row) strictly contains box b (column)."""
    x1, y1, x2, y2 = _coords(boxes)
    return xp.logical_and(
        xp.logical_and(
            xp.less(_as_rows(xp, x1), _as_cols(xp, x1)),
            xp.less(_as_rows(xp, y1), _as_cols(xp, y1)),
        ),
        xp.logical_and(
            xp.greater(_as_rows(xp, x2), _as_cols(xp, x2)),
            xp.greater(_as_rows(xp, y2), _as_cols(xp, y2)),
        ),
    )


def _direction_rule(dx, dy):
    """Direction label 4..11 of NumPy offsets `(dx, dy)` (y down), exactly.

    Sector k (1..8) covers theta in ((k-1) 45deg, k 45deg] with
    theta = atan2(dy, dx) taken in (0, 2 pi]. The lower half, theta in
    (pi, 2 pi] (dy < 0, or dy == 0 with dx > 0, i.e. theta = 2 pi), is the
    upper half turned by pi: negating the offsets there gives a point of the
    upper half, whose sector is then shifted by 4. In the upper half, theta
    in (0, pi] (dy > 0, or dy == 0 with dx < 0):

        dx >= 0: sector 1 iff dy <= dx  (45deg is in sector 1), else 2;
        dx <  0: sector 3 iff dy >= -dx (135deg is in sector 3), else 4.

    Coincident centres (dx == dy == 0) are not in the lower half and get
    sector 1, i.e. label 4, both ways (neither nested nor overlapping
    boxes with the same centre, e.g. a "+" cross).
    """
    lower = (dy < 0) | ((dy == 0) & (dx > 0))
    u = np.where(lower, -dx, dx)
    v = np.where(lower, -dy, dy)
    sector = np.where(u >= 0, np.where(v <= u, 1, 2), np.where(v >= -u, 3, 4))
    return sector + 4 * lower + _SECTOR_OFFSET


def _direction_table():
    """`_direction_rule` tabulated over (sign dx, sign dy, sign(|dy| - |dx|)).

    Those three signs decide the sector (the rule only compares dx and dy
    with 0 and |dy| with |dx|), so the rule evaluated on one representative
    offset per combination gives the label of every offset with the same
    signs. Entry `9 (sign dx + 1) + 3 (sign dy + 1) + sign(|dy| - |dx|) + 1`;
    impossible combinations (dx == 0 with |dy| < |dx|) hold whatever the
    representative gives and are never looked up.
    """
    signs = [-1, 0, 1]
    grids = np.meshgrid(signs, signs, signs, indexing="ij")
    sx, sy, sc = (grid.ravel() for grid in grids)
    # |dx|, |dy| = (2, 1) for |dy| < |dx|, (1, 1) for equal, (1, 2) for |dy| > |dx|.
    dx = sx * np.where(sc < 0, 2, 1)
    dy = sy * np.where(sc > 0, 2, 1)
    return _direction_rule(dx, dy).astype("int32")


_DIRECTION_TABLE = _direction_table()


def _direction_labels(xp, dx, dy):
    """Direction label 4..11 of offsets `(dx, dy)`, by `_DIRECTION_TABLE`.

    A table look-up of three exact signs (the sign of a float difference is
    exact: `a - b == 0` iff `a == b`) costs a few elementwise passes where
    the nested selections of `_direction_rule` cost several times more.
    """
    code = (
        xp.sign(dx) * 9.0
        + xp.sign(dy) * 3.0
        + xp.sign(xp.abs(dy) - xp.abs(dx))
        + 13.0
    )
    return xp.take(xp.convert_to_tensor(_DIRECTION_TABLE), xp.cast(code, "int32"))


def _padding(xp, boxes, valid):
    """bool `[..., N]`: which boxes are valid."""
    if valid is not None:
        return xp.cast(valid, "bool")
    # Without a mask, a row whose coordinates sum to 0 is padding: padding
    # boxes are all-zero rows.
    return xp.not_equal(xp.sum(boxes, axis=-1), 0.0)


def _spatial_relations(xp, boxes, valid, distance_threshold):
    """The relation rules on float32 boxes; see `spatial_relations`."""
    boxes = xp.cast(boxes, "float32")
    valid = _padding(xp, boxes, valid)
    # Padding boxes take no part, whatever they hold: a NaN would otherwise
    # reach the sign table below as an index.
    boxes = xp.where(xp.expand_dims(valid, -1), boxes, 0.0)
    x1, y1, x2, y2 = _coords(boxes)

    contains = _strict_containment(xp, boxes)
    inside = xp.swapaxes(contains, -1, -2)
    intersection, union = _intersection_union(xp, boxes)
    # IoU >= 0.5 without the division; union == 0 (two zero-area boxes) has
    # IoU 0.
    overlap = xp.logical_and(
        xp.greater_equal(intersection * 2.0, union), xp.greater(union, 0.0)
    )

    # Offsets of twice the centres (x1 + x2): halving is exact in binary
    # floating point, so the directions are those of the centres, and the
    # cut-off d >= t sqrt(2) becomes (2 dx)^2 + (2 dy)^2 >= 8 t^2.
    sum_x, sum_y = x1 + x2, y1 + y2
    dx = _as_rows(xp, sum_x) - _as_cols(xp, sum_x)
    dy = _as_rows(xp, sum_y) - _as_cols(xp, sum_y)
    # (`t * t`, not `t ** 2`, which raises OverflowError for huge floats.)
    threshold = float(distance_threshold)
    cutoff = 8.0 * threshold * threshold
    far = xp.greater_equal(dx * dx + dy * dy, xp.cast(cutoff, "float32"))

    labels = _direction_labels(xp, dx, dy)
    # Precedence, last applied wins: direction < far < overlap < inside <
    # contains < self < padding.
    labels = xp.where(far, NO_RELATION, labels)
    labels = xp.where(overlap, OVERLAP, labels)
    labels = xp.where(inside, INSIDE, labels)
    labels = xp.where(contains, CONTAINS, labels)
    n = xp.shape(boxes)[-2]
    index = xp.arange(n)
    labels = xp.where(xp.equal(_as_rows(xp, index), _as_cols(xp, index)), SELF, labels)
    both_valid = xp.logical_and(_as_rows(xp, valid), _as_cols(xp, valid))
    labels = xp.where(both_valid, labels, NO_RELATION)
    return xp.cast(labels, "int32")


def _spatial_relations_numpy(boxes, valid, distance_threshold):
    """`_spatial_relations` with NumPy, a few images at a time.

    Still vectorised over all the pairs of an image, but the ~50 elementwise
    passes over a chunk of ~128 K pairs stay in the CPU caches, which is
    about twice as fast (64 images of 150 boxes) as passes over the whole
    batch.
    """
    *batch_shape, n, _ = boxes.shape
    boxes = boxes.reshape(-1, n, 4)
    if valid is not None:
        valid = valid.reshape(-1, n)
    labels = np.empty((boxes.shape[0], n, n), np.int32)
    step = max(1, _PAIRS_PER_CHUNK // max(n * n, 1))
    for start in range(0, boxes.shape[0], step):
        chunk = slice(start, start + step)
        labels[chunk] = _spatial_relations(
            _NUMPY,
            boxes[chunk],
            None if valid is None else valid[chunk],
            distance_threshold,
        )
    return labels.reshape(*batch_shape, n, n)


def _checked(boxes, valid, distance_threshold):
    _check_boxes("boxes", boxes)
    checks.positive_float("distance_threshold", distance_threshold)
    if valid is not None:
        _check_mask("valid", valid, tuple(boxes.shape)[:-1], "boxes[..., 0]")
    _check_box_values("boxes", boxes, valid)


def _check_box_values(name, boxes, valid):
    """The box contract (module docstring), where the values are known.

    Without `valid`, the padding rows that escape the check are the all-zero
    ones: any other row summing to 0 has a negative coordinate.
    """
    checks.box_values(name, boxes, valid, normalised=True)


# --------------------------------------------------------------------------
# Public box utilities (keras.ops).


def box_centers(boxes):
    """Centres of boxes.

    Args:
        boxes: `[..., N, 4]` boxes `[x1, y1, x2, y2]`.

    Returns:
        float32 `[..., N, 2]`: `((x1 + x2) / 2, (y1 + y2) / 2)`.
    """
    boxes = ops.cast(ops.convert_to_tensor(boxes), "float32")
    _check_boxes("boxes", boxes)
    x1, y1, x2, y2 = _coords(boxes)
    return ops.stack([(x1 + x2) * 0.5, (y1 + y2) * 0.5], axis=-1)


def box_areas(boxes):
    """Areas of boxes, `(x2 - x1) (y2 - y1)` (no "+1 pixel" term).

    Args:
        boxes: `[..., N, 4]` boxes `[x1, y1, x2, y2]`.

    Returns:
        float32 `[..., N]`.
    """
    boxes = ops.cast(ops.convert_to_tensor(boxes), "float32")
    _check_boxes("boxes", boxes)
    x1, y1, x2, y2 = _coords(boxes)
    return (x2 - x1) * (y2 - y1)


def pairwise_iou(boxes):
    """Intersection over union of every pair of boxes.

    Args:
        boxes: `[..., N, 4]` boxes `[x1, y1, x2, y2]`.

    Returns:
        float32 `[..., N, N]`, symmetric; 0 where the union is 0 (two
        zero-area boxes) rather than NaN.
    """
    boxes = ops.cast(ops.convert_to_tensor(boxes), "float32")
    _check_boxes("boxes", boxes)
    intersection, union = _intersection_union(ops, boxes)
    positive = ops.greater(union, 0.0)
    # The inner `where` keeps 0 / 0 out of the graph (its gradient is NaN
    # even where the outer `where` discards it).
    return ops.where(positive, intersection / ops.where(positive, union, 1.0), 0.0)


def pairwise_strict_containment(boxes):
    """Whether box a strictly contains box b, for every ordered pair.

    All four sides must be strict: `a.x1 < b.x1`, `a.y1 < b.y1`,
    `a.x2 > b.x2`, `a.y2 > b.y2`, so nesting that shares an edge is not
    containment, and no box contains itself.

    Args:
        boxes: `[..., N, 4]` boxes `[x1, y1, x2, y2]`.

    Returns:
        bool `[..., N, N]`, `[..., a, b]`.
    """
    boxes = ops.cast(ops.convert_to_tensor(boxes), "float32")
    _check_boxes("boxes", boxes)
    return _strict_containment(ops, boxes)


# --------------------------------------------------------------------------
# Relation labels.


def spatial_relations(boxes, valid=None, distance_threshold=0.5):
    """Spatial relation label of every ordered pair of boxes (keras.ops).

    Label `[..., a, b]` says where box a is relative to box b (the
    relations of SA-M4C, Kant et al., 2020, arXiv:2007.12146, Fig. 2a; see
    docs/graph_attention.md), in order of precedence:

    - 0 for every pair involving a padding box (the diagonal included);
    - 12 on the diagonal;
    - 1 if a strictly contains b (all four sides strict), 2 if a is
      strictly inside b;
    - 3 if IoU >= 0.5;
    - 0 if the centres are at least `distance_threshold * sqrt(2)` apart;
    - otherwise 4..11, the 45-degree sector of a's centre seen from b's,
      `k + 3` for `theta = atan2(dy, dx)` in `((k-1) 45deg, k 45deg]`,
      theta in (0, 2 pi], y down: exactly right 11, below 5, left 7,
      above 9; coincident centres 4 both ways.

    Sector boundaries, IoU and distance thresholds are decided by exact
    float32 comparisons (see the module docstring). Usable eagerly, in a
    `keras.Model` and under `jit_compile` on any backend; see
    `spatial_relations_numpy` for host NumPy arrays.

    Args:
        boxes: `[..., N, 4]` finite boxes `[x1, y1, x2, y2]`, normalised to
            [0, 1], with `x1 <= x2` and `y1 <= y2` (any float dtype;
            computed in float32). Zero width or height is allowed.
        valid: optional bool `[..., N]`, which boxes are real. Without it, a
            box whose four coordinates sum to 0 is padding.
        distance_threshold: positive float, the cut-off distance as a
            fraction of the image diagonal (the paper's 0.5).

    Returns:
        int32 `[..., N, N]` labels in 0..12.

    Raises:
        ValueError: where the boxes' values are known (NumPy inputs, eager
            tensors), for a real box with `x2 < x1` or `y2 < y1`, a
            coordinate outside [0, 1] (pixel coordinates: divide by the
            image size) or a non-finite one. In compiled code boxes are
            not checked, and finite ones that break the contract get
            meaningless labels in 0..12.
    """
    boxes = ops.convert_to_tensor(boxes)
    if valid is not None:
        valid = ops.convert_to_tensor(valid)
    _checked(boxes, valid, distance_threshold)
    return _spatial_relations(ops, boxes, valid, distance_threshold)


def spatial_relations_numpy(boxes, valid=None, distance_threshold=0.5):
    """`spatial_relations` on host NumPy arrays (for data pipelines).

    The same rules and code as `spatial_relations`, run with NumPy: no
    Keras backend op, so it can run in a `tf.data` map (through
    `tf.numpy_function`) or a Python loader whatever the backend.

    Args:
        boxes: array-like `[..., N, 4]`.
        valid: optional bool array-like `[..., N]`.
        distance_threshold: positive float.

    Returns:
        `np.ndarray` int32 `[..., N, N]`, equal to what `spatial_relations`
        gives for the same inputs.

    Raises:
        ValueError: for boxes that break the contract of
            `spatial_relations`, naming the first such box.
    """
    boxes = np.asarray(boxes)
    if valid is not None:
        valid = np.asarray(valid)
    _checked(boxes, valid, distance_threshold)
    return _spatial_relations_numpy(boxes, valid, distance_threshold)


def random_relations(shape, seed=None, valid=None):
    """The random graph baseline (M4C-Random of SA-M4C's Table 2).

    Every pair, the diagonal included, gets a label drawn uniformly from
    0..12; pairs that involve a padding box (per `valid`) get 0, as in
    `spatial_relations`.

    Args:
        shape: `(..., N, N)`, the shape of the labels (a tuple of ints).
        seed: anything `np.random.default_rng` accepts (an int, None or a
            `Generator`).
        valid: optional bool array-like `(..., N)`, which boxes are real.

    Returns:
        `np.ndarray` int32 of `shape`.
    """
    if isinstance(shape, (int, np.integer)) or not hasattr(shape, "__len__"):
        raise ValueError(
            "Argument `shape` must be a tuple (..., N, N). "
            f"Received: shape={shape!r}"
        )
    shape = tuple(shape)
    if (
        len(shape) < 2
        or shape[-1] != shape[-2]
        or not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0
            for s in shape
        )
    ):
        raise ValueError(
            "Argument `shape` must be a tuple of non-negative ints (..., N, N) "
            f"with equal last two sizes. Received: shape={shape!r}"
        )
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUM_SPATIAL_LABELS, size=shape, dtype=np.int32)
    if valid is not None:
        valid = np.asarray(valid, bool)
        _check_mask("valid", valid, shape[:-1], "shape[:-1]")
        labels[~(valid[..., :, None] & valid[..., None, :])] = NO_RELATION
    return labels


def _textvqa_relations(
    xp, question_mask, object_boxes, object_mask, ocr_boxes, ocr_mask,
    decoder_length, distance_threshold,
):
    """The SA-M4C sequence mask as labels; see `textvqa_relations`."""
    num_question = question_mask.shape[-1]
    num_graph = object_boxes.shape[-2] + ocr_boxes.shape[-2]
    length = num_question + num_graph + decoder_length

    # One graph over objects and OCR tokens together.
    boxes = xp.concatenate(
        [xp.cast(object_boxes, "float32"), xp.cast(ocr_boxes, "float32")], axis=-2
    )
    graph_valid = xp.concatenate(
        [xp.cast(object_mask, "bool"), xp.cast(ocr_mask, "bool")], axis=-1
    )
    if xp is _NUMPY:
        spatial = _spatial_relations_numpy(boxes, graph_valid, distance_threshold)
    else:
        spatial = _spatial_relations(xp, boxes, graph_valid, distance_threshold)
    # Spatial labels placed in the object/OCR block of the [B, L, L] matrix.
    spatial = xp.pad(
        spatial,
        [[0, 0], [num_question, decoder_length], [num_question, decoder_length]],
    )

    # Which tokens are real, [B, L]: decoder steps always are, and question
    # rows do not matter (they are blocked anyway).
    token_valid = xp.concatenate(
        [xp.cast(xp.cast(question_mask, "bool"), "int32"), xp.cast(graph_valid, "int32")],
        axis=-1,
    )
    token_valid = xp.greater(
        xp.pad(token_valid, [[0, 0], [0, decoder_length]], constant_values=1), 0
    )
    pair_valid = xp.logical_and(_as_rows(xp, token_valid), _as_cols(xp, token_valid))

    # The static layout of the table, NumPy [L, L] whatever the batch.
    kind = np.repeat([0, 1, 2], [num_question, num_graph, decoder_length])
    query, key = kind[:, None], kind[None, :]
    position = np.arange(length)
    causal = position[None, :] <= position[:, None]
    graph_to_graph = (query == 1) & (key == 1)
    implicit = (
        ((query == 1) & (key == 0))  # object/OCR -> question
        | ((query == 2) & (key <= 1))  # decoder -> question, objects, OCR
        | ((query == 2) & (key == 2) & causal)  # decoder -> earlier decoder
    )

    labels = xp.where(
        xp.logical_and(pair_valid, xp.convert_to_tensor(graph_to_graph)),
        spatial,
        BLOCKED,
    )
    labels = xp.where(
        xp.logical_and(pair_valid, xp.convert_to_tensor(implicit)), IMPLICIT, labels
    )
    return xp.cast(labels, "int32")


def _textvqa_checked(
    question_mask, object_boxes, object_mask, ocr_boxes, ocr_mask,
    decoder_length, distance_threshold,
):
    checks.non_negative_int("decoder_length", decoder_length)
    checks.positive_float("distance_threshold", distance_threshold)
    for name, boxes in (("object_boxes", object_boxes), ("ocr_boxes", ocr_boxes)):
        if len(boxes.shape) != 3 or boxes.shape[-1] != 4:
            raise ValueError(
                f"Argument `{name}` must be boxes of shape [B, N, 4]. "
                f"Received: {name}.shape={tuple(boxes.shape)}"
            )
    for name, size in (
        ("question_mask", question_mask.shape[-1] if len(question_mask.shape) else 0),
        ("object_boxes", object_boxes.shape[1]),
        ("ocr_boxes", ocr_boxes.shape[1]),
    ):
        # The block layout of the sequence is built statically.
        if size is None:
            raise ValueError(
                f"Argument `{name}` needs a static token axis (axis 1); "
                "received an axis of unknown size (None)."
            )
    batch = object_boxes.shape[0]
    if not _compatible((ocr_boxes.shape[0],), (batch,)):
        raise ValueError(
            "Argument `ocr_boxes` must have the batch size of `object_boxes` "
            f"({batch}). Received: ocr_boxes.shape={tuple(ocr_boxes.shape)}"
        )
    _check_mask("object_mask", object_mask, tuple(object_boxes.shape[:2]), "object_boxes[..., 0]")
    _check_mask("ocr_mask", ocr_mask, tuple(ocr_boxes.shape[:2]), "ocr_boxes[..., 0]")
    if len(question_mask.shape) != 2 or not _compatible(
        (question_mask.shape[0],), (batch,)
    ):
        raise ValueError(
            f"Argument `question_mask` must have shape [B, Lq] with B = {batch} "
            "(the batch size of `object_boxes`). "
            f"Received: question_mask.shape={tuple(question_mask.shape)}"
        )
    _check_box_values("object_boxes", object_boxes, object_mask)
    _check_box_values("ocr_boxes", ocr_boxes, ocr_mask)


def textvqa_relations(
    question_mask, object_boxes, object_mask, ocr_boxes, ocr_mask,
    decoder_length, distance_threshold=0.5,
):
    """Labels of the whole SA-M4C sequence (the paper's Fig. 2b), keras.ops.

    The sequence is question | objects | OCR | decoder, of length
    `L = Lq + No + Nocr + decoder_length`; label `[b, i, j]` says whether and
    how query i may attend to key j:

    | query \\ key | question | objects / OCR | decoder |
    | --- | --- | --- | --- |
    | question | `BLOCKED` | `BLOCKED` | `BLOCKED` |
    | objects / OCR | `IMPLICIT` | spatial label 0..12 | `BLOCKED` |
    | decoder | `IMPLICIT` | `IMPLICIT` | `IMPLICIT` if j <= i |

    The spatial labels are `spatial_relations` over the concatenated object
    and OCR boxes (one graph over both). Padding keys are `BLOCKED`
    everywhere and padding object / OCR query rows are all `BLOCKED`.

    Runs as `keras.ops` (it accepts NumPy inputs and returns a backend
    tensor); `textvqa_relations_numpy` runs the same code on host NumPy.

    Args:
        question_mask: bool `[B, Lq]`, which question tokens are real.
        object_boxes: `[B, No, 4]` object boxes, as in `spatial_relations`
            (normalised to [0, 1], `x1 <= x2`, `y1 <= y2`; checked where
            the values are known, except for masked boxes).
        object_mask: bool `[B, No]`.
        ocr_boxes: `[B, Nocr, 4]` OCR token boxes, likewise.
        ocr_mask: bool `[B, Nocr]`.
        decoder_length: int >= 0, the number of answer-decoding steps.
        distance_threshold: as in `spatial_relations`.

    Returns:
        int32 `[B, L, L]` labels in 0..14 (`IMPLICIT` = 13,
        `BLOCKED` = 14).
    """
    args = [
        ops.convert_to_tensor(x)
        for x in (question_mask, object_boxes, object_mask, ocr_boxes, ocr_mask)
    ]
    _textvqa_checked(*args, decoder_length, distance_threshold)
    return _textvqa_relations(ops, *args, decoder_length, distance_threshold)


def textvqa_relations_numpy(
    question_mask, object_boxes, object_mask, ocr_boxes, ocr_mask,
    decoder_length, distance_threshold=0.5,
):
    """`textvqa_relations` on host NumPy arrays (for data pipelines).

    Args:
        question_mask, object_boxes, object_mask, ocr_boxes, ocr_mask,
            decoder_length, distance_threshold: as in `textvqa_relations`,
            as array-likes.

    Returns:
        `np.ndarray` int32 `[B, L, L]`, equal to what `textvqa_relations`
        gives for the same inputs.
    """
    args = [
        np.asarray(x)
        for x in (question_mask, object_boxes, object_mask, ocr_boxes, ocr_mask)
    ]
    _textvqa_checked(*args, decoder_length, distance_threshold)
    return _textvqa_relations(_NUMPY, *args, decoder_length, distance_threshold)
