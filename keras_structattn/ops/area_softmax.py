"""Area softmax folded onto items: the fused core of the fast path.

For `mean` keys the logit of an area is the mean of its items' logits, and
for `sum` (or `mean`) values the output is `sum_a p_a sum_{j in a} v_j =
sum_j w_j v_j` with item weights `w_j = sum_{a ∋ j} p_a` (or `p_a / |a|`).
`area_item_weights` maps item logits `s` straight to the item weights `w`,
so area attention is `w @ V`: one matmul, as in plain attention.

Why a separate function, and not the slot stack of `areas.py`:

* **Per-shape tensors of their true extent.** Shape `(h, w)` has
  `(H - h + 1) x (W - w + 1)` areas, so its tensor holds exactly those: no
  invalid slots, no padding, no validity mask. Window sums of all shapes
  share work (width-w sums are width-(w-1) sums plus one shifted slice,
  then the same along columns). Nine 2-D shapes of a 16x16 grid in one
  stack make 75 MB tensors per batch of 8 x 4 heads, which the CPU
  allocator maps fresh (page faults) on every op; per-shape tensors stay
  at the size of a plain attention matrix.
* **A hand-written gradient.** With `P_a = e_a / Z` and item weights
  `w = fold(c P)` (`c_a = 1`, or `1 / |a|` for mean values), the gradient
  of the loss with respect to the item logits, given `dw`, is

      ds = fold( P * (c * window_sum(dw) - <w, dw>) / |a| )

  where `<w, dw>` is one dot product per query row (it equals
  `sum_a P_a c_a window_sum(dw)_a`, since `fold` and `window_sum` are
  adjoint). The backward pass is one more window sum and one more fold,
  reusing the forward exponentials: autodiff through the same graph would
  keep and revisit many more intermediates.

Masks: masked item logits are replaced by `-1e30` before this function, so
the mean logit of any area holding a masked item is at most
`-1e30 / |a|` plus real logits and its exponential underflows to exactly
zero: an area is attendable iff every item in it is. A row with no
attendable item gets all-zero weights.
"""

import functools

import keras
from keras import ops

from keras_structattn.ops.areas import area_layout
from keras_structattn.ops.masked_softmax import MASKED_LOGIT
from keras_structattn.ops.trig import tracing_for_xla

# Masked item logits: the library's one masked-logit constant (-1e30); see
# the module docstring.
MASKED_ITEM_LOGIT = MASKED_LOGIT
# A row whose largest logit is below this has no attendable item.
_EMPTY_ROW = -1e29


def _shapes(layout):
    return [(h, w) for h, w, _, _ in layout.shapes]


def window_sums(x, layout):
    """Sums of `x` over every area, one tensor per area shape.

    Args:
        x: `[..., H, W]` (1-D memories: `H = 1`).
        layout: the `AreaLayout` (`areas.area_layout`).

    Returns:
        A dict `(h, w) -> [..., H - h + 1, W - w + 1]`: the sum over the
        area of that shape whose top-left item is at each position.
    """
    sums = {}
    row = x  # width-w sums along rows, [..., H, W - w + 1]
    for w in range(1, layout.widths_used + 1):
        if w > 1:
            row = row[..., :, :-1] + x[..., :, w - 1 :]
        block = row
        for h in range(1, layout.heights_used + 1):
            if h > 1:
                block = block[..., :-1, :] + row[..., h - 1 :, :]
            sums[(h, w)] = block
    return sums


def _pad2(x, top, bottom, left, right):
    if top == bottom == left == right == 0:
        return x
    widths = [[0, 0]] * (len(x.shape) - 2) + [[top, bottom], [left, right]]
    return ops.pad(x, widths)


def fold_windows(parts, layout):
    """Adjoint of `window_sums`: spreads each area's value over its items.

    Args:
        parts: a dict `(h, w) -> [..., H - h + 1, W - w + 1]` (as returned by
            `window_sums`).
        layout: the `AreaLayout`.

    Returns:
        `[..., H, W]`: at each item, the sum of the values of the areas that
        contain it.
    """
    # Reverse-mode of `window_sums`, shape by shape from the largest:
    # `block_h = block_{h-1}[:-1] + row[h-1:]` sends its cotangent to
    # `block_{h-1}` (padded by one row at the bottom) and to `row` (padded
    # by h - 1 rows at the top); the same along columns.
    row_total = None  # cotangent of the width-w row sums, [..., H, W-w+1]
    x_total = None  # cotangent of x from the shifted slices
    for w in range(layout.widths_used, 0, -1):
        acc = parts[(layout.heights_used, w)]
        row_cot = None
        for h in range(layout.heights_used, 1, -1):
            shifted = _pad2(acc, h - 1, 0, 0, 0)
            row_cot = shifted if row_cot is None else row_cot + shifted
            acc = _pad2(acc, 0, 1, 0, 0) + parts[(h - 1, w)]
        row_cot = acc if row_cot is None else row_cot + acc
        # `row_w = row_{w-1}[:, :-1] + x[:, w-1:]`.
        if row_total is not None:
            row_cot = row_cot + row_total
        if w == 1:
            return row_cot if x_total is None else row_cot + x_total
        shifted = _pad2(row_cot, 0, 0, w - 1, 0)
        x_total = shifted if x_total is None else x_total + shifted
        row_total = _pad2(row_cot, 0, 0, 0, 1)
    raise AssertionError("unreachable")


def _stabiliser(logits):
    """Each row's largest item logit (0 for a row with nothing attendable:
    every area then goes to exp(<= -1e30 / |a|) = 0, so its weights are all
    zero)."""
    stabiliser = ops.max(logits, axis=(-2, -1), keepdims=True)
    return ops.where(stabiliser > _EMPTY_ROW, stabiliser, ops.zeros_like(stabiliser))


def _area_exps(logits, stabiliser, layout, inverse_sizes):
    """The stabilised exponentials of the areas' mean logits, by shape."""
    # Subtract the stabiliser from the items once: an area of n items then
    # sums to its logit sum minus n times the stabiliser, and exp(sum / n)
    # is the stabilised exponential of its mean logit: one multiply and one
    # exp per shape. An area's mean logit is at most its largest item
    # logit, so every exponent is <= 0 (no overflow).
    exps = {}
    for shape, area_sum in window_sums(logits - stabiliser, layout).items():
        if inverse_sizes[shape] != 1.0:
            area_sum = area_sum * inverse_sizes[shape]
        exps[shape] = ops.exp(area_sum)
    return exps


def _weights_forward(logits, keep, layout, inverse_sizes, value_scales):
    exps = _area_exps(logits, _stabiliser(logits), layout, inverse_sizes)
    total = None
    for e in exps.values():
        row = ops.sum(e, axis=(-2, -1), keepdims=True)
        total = row if total is None else total + row
    total = ops.where(total > 0, total, ops.ones_like(total))
    scaled = {}
    for shape, e in exps.items():
        if keep is not None:
            e = e * keep[shape]
        scale = value_scales[shape]
        scaled[shape] = e * scale if scale != 1.0 else e
    weights = fold_windows(scaled, layout) / total
    return weights, exps, total


def area_item_weights(logits, layout, value_mode="sum", keep=None):
    """Item weights of area attention with mean keys and sum/mean values.

    Args:
        logits: float32 item logits `[..., H, W]` (already divided by the
            temperature; masked items set to `MASKED_ITEM_LOGIT`).
        layout: the `AreaLayout`.
        value_mode: `"sum"` or `"mean"`.
        keep: optional dropout of the area weights: a dict
            `(h, w) -> [..., H - h + 1, W - w + 1]` of float32 multipliers
            (0, or 1 / (1 - rate)), broadcastable to the area tensors.

    Returns:
        `[..., H, W]` float32 weights `w` such that area attention's output
        is `sum_j w_j v_j`.
    """
    shapes = _shapes(layout)
    # The dropout multipliers are explicit inputs (with zero gradient), not
    # captured tensors: JAX's custom gradients must not close over tracers.
    keep_list = [keep[shape] for shape in shapes] if keep is not None else []
    function = _weights_function(
        layout.length, layout.height, layout.max_area_width, layout.max_area_height, value_mode
    )
    return function(logits, *keep_list)


@functools.lru_cache(maxsize=64)
def _weights_function(length, height, max_area_width, max_area_height, value_mode):
    """`weights_fn(logits, *keep_list)` of one layout, with its gradient,
    made once per layout (so that TensorFlow traces and compiles it once)."""
    layout = area_layout(length, height, max_area_width, max_area_height)
    shapes = _shapes(layout)
    inverse_sizes = {(h, w): 1.0 / (h * w) for h, w in shapes}
    value_scales = {
        shape: (inverse_sizes[shape] if value_mode == "mean" else 1.0)
        for shape in shapes
    }

    def forward(logits, *keep_list):
        keep = dict(zip(shapes, keep_list)) if keep_list else None
        weights, exps, total = _weights_forward(
            logits, keep, layout, inverse_sizes, value_scales
        )
        return (weights, total) + tuple(exps[shape] for shape in shapes)

    def backward(upstream, weights, total, *exps_and_keep):
        # The forward's exponentials are kept: recomputing them here from
        # the item logits (one residual instead of one per shape) measured
        # slower on a CPU (1-D L=256, width 3).
        exps = dict(zip(shapes, exps_and_keep[: len(shapes)]))
        keep_list = exps_and_keep[len(shapes) :]
        keep = dict(zip(shapes, keep_list)) if keep_list else None
        upstream = ops.cast(upstream, "float32")
        # <w, dw> = sum_a P_a d(P_a): the softmax's shared term.
        inner = ops.sum(weights * upstream, axis=(-2, -1), keepdims=True)
        windows = window_sums(upstream, layout)
        parts = {}
        for shape, e in exps.items():
            window = windows[shape]
            scale = value_scales[shape]
            if scale != 1.0:
                window = window * scale
            if keep is not None:
                window = window * keep[shape]
            part = e * (window - inner)
            if inverse_sizes[shape] != 1.0:
                part = part * inverse_sizes[shape]
            parts[shape] = part
        return fold_windows(parts, layout) / total

    forward = _compiled_outside_xla(forward)
    backward = _compiled_outside_xla(backward)

    @ops.custom_gradient
    def weights_fn(logits, *keep_list):
        weights, total, *exps = forward(logits, *keep_list)

        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            logits_grad = backward(upstream, weights, total, *exps, *keep_list)
            if not keep_list:
                return logits_grad
            return (logits_grad,) + tuple(ops.zeros_like(k) for k in keep_list)

        return weights, grad

    return weights_fn


def _compiled_outside_xla(function):
    """`function`, compiled by XLA where TensorFlow would run it op by op.

    The area softmax is some twenty elementwise passes over `[..., L]`
    tensors per area shape, forward and backward: TensorFlow's graph runtime
    runs each as its own kernel through memory, XLA fuses them into a few
    loops (2.6x faster forward + backward at 1-D L=256, width 3, on a CPU;
    benchmarks/results_area_attention_cpu.txt). Under JAX, or inside a
    TensorFlow `jit_compile=True` function, XLA compiles it anyway and
    `function` runs as it is.
    """
    if keras.backend.backend() != "tensorflow":
        return function
    import tensorflow as tf

    compiled = tf.function(function, jit_compile=True)

    def run(*args):
        if tracing_for_xla():
            return function(*args)
        return compiled(*args)

    return run
