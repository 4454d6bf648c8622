"""Areas of a 1-D or 2-D memory: enumeration, per-area reductions, features.

An *area* is a span of adjacent items of a 1-D memory, or a rectangle of a
2-D memory given as the row-major flattening of an `H x W` grid
(`H = memory_height`, `W = length // H`). Areas are enumerated in the
tensor2tensor order that area attention reports its weights in:

    for h in 1..max_area_height:            # area height
      for w in 1..max_area_width:           # area width
        for (r, c) in row-major order:      # top-left corner
          if r + h <= H and c + w <= W: yield area (r, c, h, w)

A shape larger than the grid contributes no area (no error). In 1-D the count
is the paper's `|R| = (L - S) S + S (S + 1) / 2`.

Per-area sums are computed the summed-area-table way, in O(|M| * A) adds for A
area shapes, but as *running* window sums: the width-w window sums are the
width-(w-1) sums plus one shifted slice, first along rows, then along columns.
This gives exactly the sums of the integral-image formula while avoiding its
whole-memory prefix sums, whose large magnitudes cancel badly in float32 when
two corners are subtracted, and cumulative-sum ops, which XLA lowers slowly on
CPU. The same recursion with `maximum` gives the exact per-area max, and with
`logical_and` the "every item may be attended" area mask. `area_fold` is the
adjoint of `area_reduce(..., "sum")`: it spreads a value per area back onto the
items the area covers, which is how area weights become item weights.

All functions here use `keras.ops` only and work on any backend.
"""

import numpy as np
from keras import ops

from keras_structattn.ops import _checks

_REDUCERS = {
    "sum": ops.add,
    "max": ops.maximum,
    "all": ops.logical_and,
}


def area_shapes(length, memory_height=1, max_area_width=1, max_area_height=1):
    """Lists the area shapes that fit the memory, in enumeration order.

    Args:
        length: number of items in the memory, `H * W`.
        memory_height: `H`, the number of rows of the grid (1 for 1-D).
        max_area_width: the largest area width considered.
        max_area_height: the largest area height considered.

    Returns:
        A list of `(h, w, rows, cols)` tuples: the area height and width, and
        how many top-left positions that shape has along each grid axis
        (`rows = H - h + 1`, `cols = W - w + 1`). Shapes that do not fit are
        left out.
    """
    height, width = _checks.grid(length, memory_height)
    _checks.positive_int("max_area_width", max_area_width)
    _checks.positive_int("max_area_height", max_area_height)
    return [
        (h, w, height - h + 1, width - w + 1)
        for h in range(1, min(max_area_height, height) + 1)
        for w in range(1, min(max_area_width, width) + 1)
    ]


def num_areas(length, memory_height=1, max_area_width=1, max_area_height=1):
    """Returns the number of areas `|R|` of a memory (a Python int)."""
    shapes = area_shapes(length, memory_height, max_area_width, max_area_height)
    return sum(rows * cols for _, _, rows, cols in shapes)


def area_coordinates(
    length, memory_height=1, max_area_width=1, max_area_height=1
):
    """Maps each area index to its place in the grid.

    Use it to draw what area attention attended: the attention weights that
    `area_attention` and `MultiHeadAreaAttention` return are over areas in
    this order.

    Args:
        length: number of items in the memory, `H * W`.
        memory_height: `H`, the number of rows of the grid (1 for 1-D).
        max_area_width: the largest area width considered.
        max_area_height: the largest area height considered.

    Returns:
        An int32 NumPy array `[num_areas, 4]` of `(row, col, height, width)`:
        the top-left item of the area and its size, in items. In 1-D, `row`
        is always 0 and `col` is the start position.
    """
    rows_out = []
    for h, w, rows, cols in area_shapes(
        length, memory_height, max_area_width, max_area_height
    ):
        r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        n = rows * cols
        rows_out.append(
            np.stack(
                [r.ravel(), c.ravel(), np.full(n, h), np.full(n, w)], axis=-1
            )
        )
    return np.concatenate(rows_out, axis=0).astype("int32")


def area_sizes(length, memory_height=1, max_area_width=1, max_area_height=1):
    """Returns the heights and widths of all areas as int32 NumPy arrays."""
    coords = area_coordinates(
        length, memory_height, max_area_width, max_area_height
    )
    return coords[:, 2], coords[:, 3]


def _take(x, axis, start, stop):
    """`x[..., start:stop, ...]` on a negative `axis`."""
    index = (Ellipsis, slice(start, stop)) + (slice(None),) * (-axis - 1)
    return x[index]


def _pad(x, axis, before, after):
    """Zero-pads `x` along a negative `axis`."""
    widths = [[0, 0] for _ in range(len(x.shape))]
    widths[axis] = [before, after]
    return ops.pad(x, widths)


def _running(x, axis, size, max_window, reduce):
    """Running window reductions of windows 1..max_window along `axis`.

    Returns a list whose entry `w - 1` holds the reduction over the windows of
    width `w`, of length `size - w + 1` along `axis`.
    """
    out = [x]
    for w in range(2, min(max_window, size) + 1):
        out.append(
            reduce(_take(out[-1], axis, 0, size - w + 1), _take(x, axis, w - 1, size))
        )
    return out


def _running_adjoint(parts, axis, size):
    """Adjoint of `_running(..., reduce=add)`.

    `parts[w - 1]` holds one value per window of width `w` (length
    `size - w + 1` along `axis`). Returns, for every item, the sum of the
    values of the windows that contain it (length `size`).
    """
    # Walk the recursion backwards: `grad` is the total weight that reaches
    # the width-w running sums, which fed the width-(w+1) sums at positions
    # 0..size-w-1 (hence the pad at the end), and each width-w sum added the
    # item w-1 places after its start (hence the pad at the front).
    if len(parts) == 1:
        return parts[0]
    grad = parts[-1]
    total = _pad(grad, axis, len(parts) - 1, 0)
    for w in range(len(parts) - 1, 0, -1):
        grad = parts[w - 1] + _pad(grad, axis, 0, 1)
        total = total + _pad(grad, axis, w - 1, 0)
    return total


def grid_ndim(memory_height):
    """Number of trailing axes of a per-shape area grid: 1 for a 1-D memory
    (`[..., cols]`), 2 for a 2-D one (`[..., rows, cols]`).

    1-D grids carry no singleton row axis: XLA fuses the 4-D tensors of the
    1-D case much better than 5-D ones with a degenerate axis.
    """
    return 1 if memory_height == 1 else 2


def _to_grid(x, axis, height, width, memory_height):
    """Splits the memory axis into `(H, W)` (left as is for 1-D memories);
    returns the grid and W's (negative) axis."""
    ndim = len(x.shape)
    if grid_ndim(memory_height) == 1:
        return x, axis if axis < 0 else axis - ndim
    axis = axis % ndim
    shape = list(ops.shape(x))
    shape[axis : axis + 1] = [height, width]
    return ops.reshape(x, shape), axis + 1 - (ndim + 1)


def _from_grid(x, row_axis, memory_height):
    """Merges the `(rows, cols)` axes at `row_axis, row_axis + 1` into one
    (nothing to do for 1-D memories, whose grids have no row axis)."""
    if grid_ndim(memory_height) == 1:
        return x
    shape = list(ops.shape(x))
    ndim = len(shape)
    row_axis = row_axis % ndim
    merged = shape[:row_axis] + [shape[row_axis] * shape[row_axis + 1]]
    return ops.reshape(x, merged + shape[row_axis + 2 :])


def _layout(length, memory_height, max_area_width, max_area_height):
    height, width = _checks.grid(length, memory_height)
    shapes = area_shapes(length, memory_height, max_area_width, max_area_height)
    return height, width, shapes


def area_grids(
    x,
    reduction="sum",
    *,
    memory_height=1,
    max_area_width=1,
    max_area_height=1,
    axis=-1,
):
    """Like `area_reduce`, but one tensor per area shape, in grid form.

    Returns a list aligned with `area_shapes(...)`: entry `s` has the memory
    axis of `x` replaced by the two axes `(rows_s, cols_s)` of that shape's
    top-left positions (by the single axis `cols_s` for a 1-D memory; see
    `grid_ndim`). Keeping shapes apart (instead of concatenating
    them) lets the fast attention path reduce, exponentiate and fold each
    shape without slicing a concatenated tensor apart again.
    """
    _checks.one_of("reduction", reduction, sorted(_REDUCERS))
    reduce = _REDUCERS[reduction]
    height, width, shapes = _layout(
        x.shape[axis], memory_height, max_area_width, max_area_height
    )
    grid, w_axis = _to_grid(x, axis, height, width, memory_height)
    h_axis = w_axis - 1  # unused for 1-D memories (a single row)
    by_width = _running(grid, w_axis, width, max_area_width, reduce)
    by_height = [
        _running(row_sums, h_axis, height, max_area_height, reduce)
        for row_sums in by_width
    ]
    return [by_height[w - 1][h - 1] for h, w, _, _ in shapes]


def fold_area_grids(grids, *, length, memory_height=1, max_area_width=1,
                    max_area_height=1, axis=-1):
    """Adjoint of `area_grids(..., "sum")`: per-shape grids back to items.

    Args:
        grids: a list aligned with `area_shapes(...)`, entry `s` holding one
            value per area of shape `s` on the two axes `(rows_s, cols_s)`
            that `area_grids` produces for memory axis `axis`.
        length, memory_height, max_area_width, max_area_height: the layout.
        axis: the memory axis of the result (negative).

    Returns:
        The per-item sums of the values of all areas containing the item,
        with the memory axis (of length `length`) at `axis`.
    """
    height, width, shapes = _layout(
        length, memory_height, max_area_width, max_area_height
    )
    ndim = len(grids[0].shape)
    w_axis = axis if axis < 0 else axis - (ndim - grid_ndim(memory_height) + 1)
    h_axis = w_axis - 1
    by_shape = {(h, w): g for (h, w, _, _), g in zip(shapes, grids)}
    n_heights = min(max_area_height, height)
    n_widths = min(max_area_width, width)
    by_width = [
        _running_adjoint(
            [by_shape[(h, w)] for h in range(1, n_heights + 1)], h_axis, height
        )
        for w in range(1, n_widths + 1)
    ]
    items = _running_adjoint(by_width, w_axis, width)
    return _from_grid(items, h_axis, memory_height)


def area_reduce(
    x,
    reduction="sum",
    *,
    memory_height=1,
    max_area_width=1,
    max_area_height=1,
    axis=-2,
):
    """Reduces `x` over every area of the memory laid along `axis`.

    Args:
        x: a tensor whose `axis` runs over the `L = H * W` items of the memory
            (row-major for 2-D). Boolean for `reduction="all"`.
        reduction: `"sum"`, `"max"` (exact per-channel maximum) or `"all"`
            (logical AND, e.g. "every item of the area may be attended").
        memory_height: `H`, the number of rows of the grid (1 for 1-D).
        max_area_width: the largest area width considered.
        max_area_height: the largest area height considered.
        axis: the memory axis (negative or positive).

    Returns:
        A tensor like `x` with `axis` of length `num_areas`, areas in the
        enumeration order of this module.
    """
    if axis >= 0:
        axis -= len(x.shape)
    grids = area_grids(
        x,
        reduction,
        memory_height=memory_height,
        max_area_width=max_area_width,
        max_area_height=max_area_height,
        axis=axis,
    )
    return concat_area_grids(grids, memory_height=memory_height, axis=axis)


def split_areas(
    area_values,
    *,
    length,
    memory_height=1,
    max_area_width=1,
    max_area_height=1,
    axis=-1,
):
    """Splits a concatenated area axis into per-shape grids (the inverse of
    the concatenation in `area_reduce`; the layout of `area_grids`)."""
    if axis >= 0:
        axis -= len(area_values.shape)
    _, _, shapes = _layout(length, memory_height, max_area_width, max_area_height)
    grids = []
    start = 0
    for _, _, rows, cols in shapes:
        piece = _take(area_values, axis, start, start + rows * cols)
        start += rows * cols
        grids.append(_to_grid(piece, axis, rows, cols, memory_height)[0])
    return grids


def concat_area_grids(grids, *, memory_height=1, axis=-1):
    """Flattens per-shape grids (from `area_grids`) and concatenates them into
    one area axis at `axis` (negative), in enumeration order."""
    pieces = [_from_grid(g, axis - 1, memory_height) for g in grids]
    return ops.concatenate(pieces, axis=axis) if len(pieces) > 1 else pieces[0]


def area_fold(
    area_values,
    *,
    length,
    memory_height=1,
    max_area_width=1,
    max_area_height=1,
    axis=-1,
    per_item=False,
):
    """Spreads one value per area back onto the items the area covers.

    `area_fold(p)[j] = sum over areas a containing item j of p[a]` (or of
    `p[a] / |a|` with `per_item=True`). It is the adjoint (transpose) of
    `area_reduce(x, "sum")`, so
    `sum_a p[a] * area_sum(v)[a] == sum_j area_fold(p)[j] * v[j]`: this is
    how area attention with `sum` (or `mean`) values becomes a single
    item-level matmul.

    Args:
        area_values: a tensor whose `axis` runs over the areas, in
            enumeration order.
        length: `L = H * W`, the number of items of the memory.
        memory_height: `H`, the number of rows of the grid (1 for 1-D).
        max_area_width: the largest area width considered.
        max_area_height: the largest area height considered.
        axis: the area axis (negative).
        per_item: divide each area's value by its size first (the adjoint of
            area means instead of area sums).

    Returns:
        A tensor like `area_values` with `axis` of length `length`.
    """
    if axis >= 0:
        axis -= len(area_values.shape)
    _, _, shapes = _layout(length, memory_height, max_area_width, max_area_height)
    grids = split_areas(
        area_values,
        length=length,
        memory_height=memory_height,
        max_area_width=max_area_width,
        max_area_height=max_area_height,
        axis=axis,
    )
    if per_item:
        grids = [g * (1.0 / (h * w)) for (h, w, _, _), g in zip(shapes, grids)]
    return fold_area_grids(
        grids,
        length=length,
        memory_height=memory_height,
        max_area_width=max_area_width,
        max_area_height=max_area_height,
        axis=axis,
    )


def area_features(
    x,
    *,
    memory_height=1,
    max_area_width=1,
    max_area_height=1,
    axis=-2,
    features=("sum", "mean", "std", "max"),
    epsilon=1e-6,
):
    """Computes per-area features of a memory, in float32.

    Args:
        x: a float tensor `[..., L, D]` (the memory along `axis`).
        memory_height: `H`, the number of rows of the grid (1 for 1-D).
        max_area_width: the largest area width considered.
        max_area_height: the largest area height considered.
        axis: the memory axis.
        features: which of `"sum"`, `"mean"`, `"std"`, `"max"` to compute
            (heights and widths are always returned).
        epsilon: added to the variance before the square root.

    Returns:
        A dict with the requested float32 tensors (memory axis replaced by
        the area axis), plus `"heights"` and `"widths"`: int32 NumPy arrays
        `[num_areas]`. `std = sqrt(|E[x^2] - mean^2| + epsilon)`, with the
        absolute value and epsilon of the tensor2tensor reference.
    """
    unknown = set(features) - {"sum", "mean", "std", "max"}
    if unknown:
        raise ValueError(
            "Argument `features` may contain 'sum', 'mean', 'std' and 'max'. "
            f"Received: features={features!r}"
        )
    x = ops.cast(x, "float32")
    length = x.shape[axis]
    grid_args = dict(
        memory_height=memory_height,
        max_area_width=max_area_width,
        max_area_height=max_area_height,
        axis=axis,
    )
    heights, widths = area_sizes(
        length, memory_height, max_area_width, max_area_height
    )
    out = {"heights": heights, "widths": widths}
    # Area sizes broadcast along the area axis.
    size_shape = [1] * len(x.shape)
    size_shape[axis] = heights.shape[0]
    sizes = ops.convert_to_tensor(
        (heights * widths).astype("float32").reshape(size_shape)
    )
    if {"sum", "mean", "std"} & set(features):
        total = area_reduce(x, "sum", **grid_args)
        mean = total / sizes
        if "sum" in features:
            out["sum"] = total
        if "mean" in features:
            out["mean"] = mean
        if "std" in features:
            mean_sq = area_reduce(ops.square(x), "sum", **grid_args) / sizes
            out["std"] = ops.sqrt(ops.abs(mean_sq - ops.square(mean)) + epsilon)
    if "max" in features:
        out["max"] = area_reduce(x, "max", **grid_args)
    return out
