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

**Slots.** Internally, per-area values live in *slots*: one full copy of the
memory per area shape, `S = min(max_area_height, H) * min(max_area_width, W)`
copies, flattened to a single axis of `S * L` entries (shape-major, then the
top-left item row-major). Slot `(shape, item)` holds the area of that shape
whose top-left item it is; slots whose area would leave the grid are
*invalid* (`AreaLayout.valid`) and are masked or dropped. A fixed-size stack
keeps every operation one big tensor op (one exp, one max, one sum over all
shapes), which TensorFlow and XLA run far better than a list of ragged
per-shape tensors. `AreaLayout.order` gathers the valid slots into the
enumeration order above.

**Sums.** Per-area sums are computed the summed-area-table way, in O(|M| A)
adds for A area shapes, but as *running* window sums: width-w sums are the
width-(w-1) sums plus the memory shifted by w-1, first along rows, then
along columns. This gives the sums of the integral-image formula while
avoiding its whole-memory prefix sums (whose large magnitudes cancel in
float32 when two corners are subtracted) and cumulative-sum ops. The same
recursion with `maximum` gives the exact per-area max, and with `minimum`
over a 0/1 mask the "every item may be attended" area mask.

**Fold.** `fold_area_slots` spreads one value per area back onto the items the
area covers. It is the exact adjoint (transpose) of `area_slots(..., "sum")`,
and each is registered as the other's gradient, so back-propagation through
area sums costs what the forward pass costs.

All functions here use `keras.ops` only and work on any backend.
"""

import dataclasses
import functools

import numpy as np
from keras import ops

from keras_structattn import checks

_REDUCERS = {
    "sum": ops.add,
    "max": ops.maximum,
    "min": ops.minimum,
}


@dataclasses.dataclass(frozen=True)
class AreaLayout:
    """Static description of the areas of a memory (all NumPy / Python).

    Attributes:
        length: `L = H * W` items.
        height, width: the grid (`H = memory_height`, `W = L // H`).
        max_area_height, max_area_width: the largest area considered.
        heights_used, widths_used: `min(max_area_height, H)`,
            `min(max_area_width, W)`: the shape stack is
            `heights_used x widths_used`.
        shapes: `(h, w, rows, cols)` of each area shape that fits, in order.
        valid: bool `[S * L]`, which slots hold a real area.
        order: int `[num_areas]`, the slot of each area in enumeration order.
        slot_sizes: float32 `[S * L]`, the item count `h * w` of each slot's
            area.
    """

    length: int
    height: int
    width: int
    max_area_height: int
    max_area_width: int
    heights_used: int
    widths_used: int
    shapes: tuple
    valid: np.ndarray
    order: np.ndarray
    slot_sizes: np.ndarray

    @property
    def num_shapes(self):
        """The number of area shapes that fit, `S`."""
        return len(self.shapes)

    @property
    def num_areas(self):
        """The number of areas `|R|`."""
        return int(self.order.shape[0])



@functools.lru_cache(maxsize=256)
def area_layout(length, memory_height=1, max_area_width=1, max_area_height=1):
    """Builds (and caches) the `AreaLayout` of a memory.

    Args:
        length: number of items in the memory, `H * W`.
        memory_height: `H`, the number of rows of the grid (1 for 1-D).
        max_area_width: the largest area width considered.
        max_area_height: the largest area height considered.

    Returns:
        An `AreaLayout`.
    """
    height, width = checks.grid(length, memory_height)
    checks.positive_int("max_area_width", max_area_width)
    checks.positive_int("max_area_height", max_area_height)
    heights_used = min(max_area_height, height)
    widths_used = min(max_area_width, width)
    shapes = tuple(
        (h, w, height - h + 1, width - w + 1)
        for h in range(1, heights_used + 1)
        for w in range(1, widths_used + 1)
    )
    rows = np.arange(height)[:, None]
    cols = np.arange(width)[None, :]
    valid = np.concatenate(
        [((rows <= height - h) & (cols <= width - w)).ravel() for h, w, _, _ in shapes]
    )
    sizes = np.concatenate(
        [np.full(length, h * w, dtype="float32") for h, w, _, _ in shapes]
    )
    valid.setflags(write=False)
    sizes.setflags(write=False)
    order = np.flatnonzero(valid).astype("int32")
    order.setflags(write=False)
    return AreaLayout(
        length=length,
        height=height,
        width=width,
        max_area_height=max_area_height,
        max_area_width=max_area_width,
        heights_used=heights_used,
        widths_used=widths_used,
        shapes=shapes,
        valid=valid,
        order=order,
        slot_sizes=sizes,
    )


def area_shapes(length, memory_height=1, max_area_width=1, max_area_height=1):
    """Lists the area shapes that fit the memory, in enumeration order.

    Args:
        length, memory_height, max_area_width, max_area_height: the memory
            and the largest area, as in `area_layout`.

    Returns:
        A list of `(h, w, rows, cols)` tuples: the area height and width, and
        how many top-left positions that shape has along each grid axis
        (`rows = H - h + 1`, `cols = W - w + 1`).
    """
    return list(
        area_layout(length, memory_height, max_area_width, max_area_height).shapes
    )


def num_areas(length, memory_height=1, max_area_width=1, max_area_height=1):
    """The number of areas `|R|` of a memory.

    Args:
        length, memory_height, max_area_width, max_area_height: the memory
            and the largest area, as in `area_layout`.

    Returns:
        A Python int.
    """
    return area_layout(
        length, memory_height, max_area_width, max_area_height
    ).num_areas


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
    layout = area_layout(length, memory_height, max_area_width, max_area_height)
    shape_index, item = np.divmod(layout.order, length)
    hw = np.array([(h, w) for h, w, _, _ in layout.shapes], dtype="int32")
    row, col = np.divmod(item, layout.width)
    return np.stack(
        [row, col, hw[shape_index, 0], hw[shape_index, 1]], axis=-1
    ).astype("int32")


def area_sizes(length, memory_height=1, max_area_width=1, max_area_height=1):
    """The heights and widths of all areas, in enumeration order.

    Args:
        length, memory_height, max_area_width, max_area_height: the memory
            and the largest area, as in `area_layout`.

    Returns:
        `(heights, widths)`, int32 NumPy arrays `[num_areas]`.
    """
    coords = area_coordinates(
        length, memory_height, max_area_width, max_area_height
    )
    return coords[:, 2], coords[:, 3]


# --------------------------------------------------------------- tensor helpers


def _normalise_axis(axis, ndim):
    return axis - ndim if axis >= 0 else axis


def _take(x, axis, start, stop):
    """`x[..., start:stop, ...]` on a negative `axis`."""
    index = (Ellipsis, slice(start, stop)) + (slice(None),) * (-axis - 1)
    return x[index]


def _pad(x, axis, before, after):
    """Zero-pads `x` along a negative `axis`."""
    widths = [[0, 0] for _ in range(len(x.shape))]
    widths[axis] = [before, after]
    return ops.pad(x, widths)


def _shift_up(x, axis, offset):
    """`y[i] = x[i + offset]`, zero past the end (a window's far item)."""
    if offset == 0:
        return x
    size = x.shape[axis]
    return _pad(_take(x, axis, offset, size), axis, 0, offset)


def _shift_down(x, axis, offset):
    """`y[i] = x[i - offset]`, zero before the start (adjoint of `_shift_up`)."""
    if offset == 0:
        return x
    size = x.shape[axis]
    return _pad(_take(x, axis, 0, size - offset), axis, offset, 0)


def _split_axis(x, axis, sizes):
    """Reshapes the (negative) `axis` of `x` into `sizes`."""
    shape = list(ops.shape(x))
    ndim = len(shape)
    axis = axis % ndim
    shape[axis : axis + 1] = list(sizes)
    return ops.reshape(x, shape)


def _merge_axes(x, axis, count):
    """Merges `count` axes starting at the (negative) `axis` into one."""
    shape = list(ops.shape(x))
    ndim = len(shape)
    axis = axis % ndim
    merged = 1
    for size in shape[axis : axis + count]:
        merged = merged * size
    return ops.reshape(x, shape[:axis] + [merged] + shape[axis + count :])


def _running_stack(x, axis, count, reduce, stack_axis):
    """Stacks the running window reductions of widths 1..count along `axis`.

    Entry `w - 1` of the new `stack_axis` holds, at position i, the reduction
    of `x[i : i + w]` (entries past the end are partial and invalid).
    """
    out = [x]
    for w in range(2, count + 1):
        out.append(reduce(out[-1], _shift_up(x, axis, w - 1)))
    return ops.stack(out, axis=stack_axis)


def _running_stack_adjoint(stack, axis, stack_axis):
    """Adjoint of `_running_stack(..., reduce=add)`.

    `stack` holds one value per (window width, start); returns, for every
    item, the sum of the values of the windows that contain it.
    """
    parts = ops.unstack(stack, axis=stack_axis)
    # The width-w sums fed every wider sum, and each added the item w-1
    # places after the window start: walk widths from the widest down,
    # accumulating, and shift each accumulated part back by w-1.
    accumulated = parts[-1]
    total = _shift_down(accumulated, axis, len(parts) - 1)
    for w in range(len(parts) - 1, 0, -1):
        accumulated = accumulated + parts[w - 1]
        total = total + _shift_down(accumulated, axis, w - 1)
    return total


# ----------------------------------------------------------- slots and areas


def _slots_forward(x, layout, reduction, axis):
    """Per-area reductions of `x` into slots (no custom gradient)."""
    reduce = _REDUCERS[reduction]
    if layout.height == 1:
        # 1-D: stack widths in front of the memory axis, [..., Wn, L, rest];
        # no row axis to carry around.
        stacked = _running_stack(
            x, axis, layout.widths_used, reduce, stack_axis=len(x.shape) + axis
        )
        return _merge_axes(stacked, axis - 1, 2)
    # [..., H, W, rest] -> [..., Wn, H, W, rest] -> [..., Hn, Wn, H, W, rest]:
    # in the grid W sits where the memory axis sat, H just before it.
    grid = _split_axis(x, axis, (layout.height, layout.width))
    w_axis, h_axis = axis, axis - 1
    ndim = len(grid.shape)
    by_width = _running_stack(
        grid, w_axis, layout.widths_used, reduce, stack_axis=ndim + h_axis
    )
    by_both = _running_stack(
        by_width,
        h_axis,
        layout.heights_used,
        reduce,
        stack_axis=ndim + 1 + h_axis - 1,
    )
    return _merge_axes(by_both, h_axis - 2, 4)


def _fold_forward(slots, layout, axis):
    """Adjoint of the `sum` slots (no custom gradient)."""
    if layout.height == 1:
        stacked = _split_axis(slots, axis, (layout.widths_used, layout.length))
        return _running_stack_adjoint(stacked, axis, stack_axis=axis - 1)
    stacked = _split_axis(
        slots,
        axis,
        (layout.heights_used, layout.widths_used, layout.height, layout.width),
    )
    # axes: [..., Hn, Wn, H, W, rest]; W at `axis`, H at axis-1.
    by_width = _running_stack_adjoint(stacked, axis - 1, stack_axis=axis - 3)
    grid = _running_stack_adjoint(by_width, axis, stack_axis=axis - 2)
    return _merge_axes(grid, axis - 1, 2)


def _with_adjoint(forward, adjoint, x):
    """`forward(x)` for a linear `forward`, whose gradient is `adjoint`
    applied to the upstream gradient."""

    @ops.custom_gradient
    def linear(x):
        def grad(*args, upstream=None):
            # The upstream gradient comes positionally on TensorFlow and
            # JAX, by keyword on PyTorch.
            if upstream is None:
                (upstream,) = args
            return adjoint(upstream)

        return forward(x), grad

    return linear(x)


def _sum_slots(x, layout, axis):
    """`area_slots(x, "sum")` whose gradient is the fold (its adjoint)."""
    return _with_adjoint(
        lambda x: _slots_forward(x, layout, "sum", axis),
        lambda upstream: _fold(upstream, layout, axis),
        x,
    )


def _fold(slots, layout, axis):
    """`fold_area_slots` whose gradient is the area sum (its adjoint)."""
    return _with_adjoint(
        lambda slots: _fold_forward(slots, layout, axis),
        lambda upstream: _sum_slots(upstream, layout, axis),
        slots,
    )


def area_slots(x, reduction, layout, axis=-1):
    """Reduces `x` over every area, into slots (see the module docstring).

    Args:
        x: a tensor whose `axis` runs over the `L` memory items.
        reduction: `"sum"`, `"max"` (exact per-channel max) or `"min"`.
        layout: the `AreaLayout`.
        axis: the memory axis.

    Returns:
        A tensor like `x` with `axis` of length `S * L`. Invalid slots hold
        partial reductions: mask them (`layout.valid`) or gather the valid
        ones (`slots_to_areas`).
    """
    checks.one_of("reduction", reduction, sorted(_REDUCERS))
    axis = _normalise_axis(axis, len(x.shape))
    if x.shape[axis] != layout.length:
        raise ValueError(
            f"The memory axis {axis} of the input has {x.shape[axis]} items; "
            f"the area layout expects {layout.length}."
        )
    if reduction == "sum":
        return _sum_slots(x, layout, axis)
    return _slots_forward(x, layout, reduction, axis)


def fold_area_slots(slots, layout, axis=-1):
    """Spreads one value per slot back onto the items its area covers.

    `fold(p)[j] = sum over slots s whose area contains item j of p[s]`; the
    adjoint of `area_slots(x, "sum")`. Invalid slots must hold 0.

    Args:
        slots: a tensor whose `axis` has `S * L` entries.
        layout: the `AreaLayout`.
        axis: the slot axis.

    Returns:
        A tensor like `slots` with `axis` of length `L`.
    """
    axis = _normalise_axis(axis, len(slots.shape))
    return _fold(slots, layout, axis)


def slots_to_areas(slots, layout, axis=-1):
    """Gathers the valid slots into areas in enumeration order (`[.., |R|]`).

    Each shape's valid slots are the top-left `rows x cols` corner of its
    `H x W` block, so this is slices and one concatenation (no gather).

    Args:
        slots: a tensor whose `axis` holds `num_shapes * H * W` slots.
        layout: the memory's `AreaLayout`.
        axis: the slot axis.

    Returns:
        The tensor with `axis` holding the `num_areas` valid slots.
    """
    axis = _normalise_axis(axis, len(slots.shape))
    pieces = []
    for index, (_, _, rows, cols) in enumerate(layout.shapes):
        block = _take(slots, axis, index * layout.length, (index + 1) * layout.length)
        if layout.height > 1:
            block = _split_axis(block, axis, (layout.height, layout.width))
            block = _take(_take(block, axis - 1, 0, rows), axis, 0, cols)
            block = _merge_axes(block, axis - 1, 2)
        else:
            block = _take(block, axis, 0, cols)
        pieces.append(block)
    return ops.concatenate(pieces, axis=axis) if len(pieces) > 1 else pieces[0]


def areas_to_slots(areas, layout, axis=-1, fill=0.0):
    """Scatters areas (enumeration order) into slots; invalid slots get `fill`.

    The inverse of `slots_to_areas` on valid slots: slices and pads.

    Args:
        areas: a tensor whose `axis` holds `num_areas` areas.
        layout: the memory's `AreaLayout`.
        axis: the area axis.
        fill: the value of the invalid slots.

    Returns:
        The tensor with `axis` holding `num_shapes * H * W` slots.
    """
    axis = _normalise_axis(axis, len(areas.shape))
    pieces = []
    start = 0
    for _, _, rows, cols in layout.shapes:
        block = _take(areas, axis, start, start + rows * cols)
        start += rows * cols
        if layout.height > 1:
            block = _split_axis(block, axis, (rows, cols))
            block = _pad_with(block, axis - 1, 0, layout.height - rows, fill)
            block = _pad_with(block, axis, 0, layout.width - cols, fill)
            block = _merge_axes(block, axis - 1, 2)
        else:
            block = _pad_with(block, axis, 0, layout.width - cols, fill)
        pieces.append(block)
    return ops.concatenate(pieces, axis=axis) if len(pieces) > 1 else pieces[0]


def _pad_with(x, axis, before, after, value):
    if before == 0 and after == 0:
        return x
    widths = [[0, 0] for _ in range(len(x.shape))]
    widths[axis] = [before, after]
    return ops.pad(x, widths, constant_values=value)


# ----------------------------------------------------------------- public API


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
    checks.one_of("reduction", reduction, ["all", "max", "sum"])
    layout = area_layout(
        x.shape[axis], memory_height, max_area_width, max_area_height
    )
    if reduction == "all":
        as_float = ops.cast(ops.cast(x, "bool"), "float32")
        slots = area_slots(as_float, "min", layout, axis)
        return slots_to_areas(slots, layout, axis) > 0.5
    return slots_to_areas(area_slots(x, reduction, layout, axis), layout, axis)


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
        axis: the area axis.
        per_item: divide each area's value by its size first (the adjoint of
            area means instead of area sums).

    Returns:
        A tensor like `area_values` with `axis` of length `length`.
    """
    layout = area_layout(length, memory_height, max_area_width, max_area_height)
    axis = _normalise_axis(axis, len(area_values.shape))
    if area_values.shape[axis] != layout.num_areas:
        raise ValueError(
            f"`area_values` has {area_values.shape[axis]} areas along axis "
            f"{axis}, but a memory of length {length} with "
            f"memory_height={memory_height}, max_area_width={max_area_width} "
            f"and max_area_height={max_area_height} has {layout.num_areas}."
        )
    slots = areas_to_slots(area_values, layout, axis)
    if per_item:
        scale = _along_axis(1.0 / layout.slot_sizes, axis, len(slots.shape))
        slots = slots * ops.cast(scale, slots.dtype)
    return fold_area_slots(slots, layout, axis)


def _along_axis(vector, axis, ndim):
    """A NumPy vector shaped to broadcast along `axis` of an `ndim` tensor."""
    shape = [1] * ndim
    shape[axis] = vector.shape[0]
    return ops.convert_to_tensor(np.asarray(vector, "float32").reshape(shape))


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
    axis = _normalise_axis(axis, len(x.shape))
    layout = area_layout(
        x.shape[axis], memory_height, max_area_width, max_area_height
    )
    heights, widths = area_sizes(
        layout.length, memory_height, max_area_width, max_area_height
    )
    out = {"heights": heights, "widths": widths}
    sizes = _along_axis(
        (heights * widths).astype("float32"), axis, len(x.shape)
    )
    if {"sum", "mean", "std"} & set(features):
        total = slots_to_areas(area_slots(x, "sum", layout, axis), layout, axis)
        mean = total / sizes
        if "sum" in features:
            out["sum"] = total
        if "mean" in features:
            out["mean"] = mean
        if "std" in features:
            squares = area_slots(ops.square(x), "sum", layout, axis)
            mean_sq = slots_to_areas(squares, layout, axis) / sizes
            out["std"] = ops.sqrt(ops.abs(mean_sq - ops.square(mean)) + epsilon)
    if "max" in features:
        out["max"] = slots_to_areas(area_slots(x, "max", layout, axis), layout, axis)
    return out
