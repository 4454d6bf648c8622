"""Dot-product area attention (Li et al., 2019, "Area Attention"), keras.ops only.

Queries attend to *areas* (spans or rectangles of adjacent memory items)
instead of single items. Reference semantics: tensor2tensor's
`dot_product_area_attention`, with its defects fixed (see
`docs`/README): a query row with no attendable area outputs zeros instead of
NaN, masks are boolean (True = may attend), and the summed-area sums, the
softmax and the mask constant are float32 under mixed precision.

Two implementations give the same numbers:

* `"direct"` materialises the area keys `[B, N, |R|, D]` and area values, as
  tensor2tensor does.
* `"fast"` (default) never materialises area keys for `mean` keys: the area
  logit is the mean of its items' logits, `q . mean_j k_j = mean_j q . k_j`,
  so it takes item logits `QK^T` once and sums them over areas. For `sum` and
  `mean` values it folds the area weights back onto the items
  (`sum_a p_a sum_{j in a} v_j = sum_j (sum_{a ∋ j} p_a) v_j`) and does one
  item-level matmul with V. Other key modes still build area keys, but the
  value fold applies to them too.
"""

from keras import ops
from keras import random

from keras_structattn.ops import _checks
from keras_structattn.ops.areas import area_features
from keras_structattn.ops.areas import area_fold
from keras_structattn.ops.areas import area_grids
from keras_structattn.ops.areas import area_reduce
from keras_structattn.ops.areas import area_shapes
from keras_structattn.ops.areas import concat_area_grids
from keras_structattn.ops.areas import fold_area_grids
from keras_structattn.ops.areas import grid_ndim
from keras_structattn.ops.areas import split_areas

KEY_MODES = ("mean", "max", "sample")
VALUE_MODES = ("sum", "mean", "max")
IMPLEMENTATIONS = ("fast", "direct")

# Masked logits are replaced by this before the max and the exp; float32 only.
_MASKED_LOGIT = -1e9


def _check_common(
    max_area_width,
    max_area_height,
    memory_height,
    value_mode,
    temperature,
    top_k_areas,
    dropout_rate,
    implementation,
):
    _checks.positive_int("max_area_width", max_area_width)
    _checks.positive_int("max_area_height", max_area_height)
    _checks.positive_int("memory_height", memory_height)
    _checks.one_of("value_mode", value_mode, VALUE_MODES)
    _checks.positive_float("temperature", temperature)
    _checks.non_negative_int("top_k_areas", top_k_areas)
    _checks.rate("dropout_rate", dropout_rate)
    _checks.one_of("implementation", implementation, IMPLEMENTATIONS)


def _check_tensors(query, key, value, key_name="key"):
    _checks.rank("query", query, 4)
    _checks.rank(key_name, key, 4)
    _checks.rank("value", value, 4)
    if query.shape[-1] is not None and key.shape[-1] is not None:
        if query.shape[-1] != key.shape[-1]:
            raise ValueError(
                f"`query` and `{key_name}` must have the same depth. Received: "
                f"query.shape={tuple(query.shape)}, "
                f"{key_name}.shape={tuple(key.shape)}"
            )


def _mask_grids(mask, *, length, memory_height, max_area_width, max_area_height):
    """Per-shape area masks: an area may be attended iff all its items may.

    `mask` is boolean (or 0/1), broadcastable to `[..., Lq, length]`. Padding,
    causal (raster order in 2-D) and arbitrary masks all carry over. A mask
    that does not vary along the memory axis (last dim 1) stays as it is.
    """
    mask = ops.cast(mask, "bool")
    layout = dict(
        memory_height=memory_height,
        max_area_width=max_area_width,
        max_area_height=max_area_height,
    )
    if mask.shape[-1] == 1:
        shapes = area_shapes(length, **layout)
        if grid_ndim(memory_height) == 2:
            mask = ops.expand_dims(mask, -1)
        return [mask] * len(shapes)
    if mask.shape[-1] != length:
        raise ValueError(
            f"`mask` must have {length} (the memory length) or 1 entries on "
            f"its last axis. Received: mask.shape={tuple(mask.shape)}"
        )
    return area_grids(mask, "all", axis=-1, **layout)


def _masked_exp(logit_grids, mask_grids, stabiliser=None, grid_axes=(-2, -1)):
    """Unnormalised float32 softmax over all areas of all shapes.

    Args:
        logit_grids: per-shape float32 logits `[..., rows_s, cols_s]`.
        mask_grids: per-shape boolean masks (broadcastable), or None.
        stabiliser: optional upper bound of the allowed logits that is
            attained by one of them (default: their max), shaped like
            `totals`.
        grid_axes: the trailing grid axes (see `grid_ndim`).

    Returns:
        `(numerators, totals)`: per-shape `exp(logit - max)`, exactly 0 where
        masked, and their sum over all areas `[..., 1, 1]`. A row with no
        allowed area sums to 0; callers divide by `where(total > 0, total, 1)`
        so that the row is 0, not NaN. The stabiliser is the max over allowed
        areas and carries no gradient (the softmax does not depend on it).
    """
    if mask_grids is not None:
        logit_grids = [
            ops.where(m, g, _MASKED_LOGIT) for g, m in zip(logit_grids, mask_grids)
        ]
    if stabiliser is None:
        stabiliser = ops.max(logit_grids[0], axis=grid_axes, keepdims=True)
        for g in logit_grids[1:]:
            stabiliser = ops.maximum(
                stabiliser, ops.max(g, axis=grid_axes, keepdims=True)
            )
    stabiliser = ops.stop_gradient(stabiliser)
    numerators = [ops.exp(g - stabiliser) for g in logit_grids]
    if mask_grids is not None:
        # For a row with every area masked, logit - stabiliser is 0: the mask
        # product makes that row 0 (no inf is involved, so no NaN gradient).
        numerators = [
            e * ops.cast(m, "float32") for e, m in zip(numerators, mask_grids)
        ]
    totals = ops.sum(numerators[0], axis=grid_axes, keepdims=True)
    for e in numerators[1:]:
        totals = totals + ops.sum(e, axis=grid_axes, keepdims=True)
    return numerators, totals


def _nonzero(totals):
    return ops.where(totals > 0, totals, ops.ones_like(totals))


def _top_k(weights, k):
    """Keeps the weights >= the k-th largest per row (ties kept); renormalises."""
    k = min(k, weights.shape[-1])
    kth = ops.top_k(weights, k, sorted=True)[0][..., -1:]
    kept = ops.where(weights >= kth, weights, ops.zeros_like(weights))
    return kept / _nonzero(ops.sum(kept, axis=-1, keepdims=True))


def _attend(
    logit_grids,
    mask,
    value,
    *,
    stabiliser=None,
    memory_height,
    max_area_width,
    max_area_height,
    value_mode,
    top_k_areas,
    training,
    return_weights,
    dropout_rate,
    seed,
    implementation,
):
    """Softmax over area logits and aggregation of area values.

    Args:
        logit_grids: per-shape float32 area logits `[B, N, Lq, rows, cols]`
            (layout of `area_grids(..., axis=-1)`), already divided by the
            temperature.
        mask: item mask broadcastable to `[B, N, Lq, L]`, or None.
        value: `[B, N, L, Dv]`.
        stabiliser: see `_masked_exp`.
        (the rest as in `area_attention`.)
    """
    length = value.shape[-2]
    layout = dict(
        memory_height=memory_height,
        max_area_width=max_area_width,
        max_area_height=max_area_height,
    )
    shapes = area_shapes(length, **layout)
    mask_grids = None
    if mask is not None:
        mask_grids = _mask_grids(mask, length=length, **layout)
    grid_axes = (-2, -1) if grid_ndim(memory_height) == 2 else (-1,)
    numerators, totals = _masked_exp(
        logit_grids, mask_grids, stabiliser, grid_axes
    )
    # Row totals as [..., 1], to divide item- or area-axis tensors.
    row_totals = _nonzero(totals)
    if len(grid_axes) == 2:
        row_totals = ops.squeeze(row_totals, -1)
    fold = implementation == "fast" and value_mode in ("sum", "mean")
    use_dropout = bool(training) and dropout_rate > 0

    weights = None  # concatenated [B, N, Lq, num_areas], when needed
    if return_weights or top_k_areas > 0 or not fold:
        weights = (
            concat_area_grids(numerators, memory_height=memory_height)
            / row_totals
        )
        if top_k_areas > 0:
            weights = _top_k(weights, top_k_areas)
    returned = weights

    if fold and top_k_areas == 0:
        # Fold the unnormalised per-shape weights onto items and normalise
        # once per row: no concatenation, and L instead of |R| divisions.
        if use_dropout:
            numerators = [
                random.dropout(e, dropout_rate, seed=seed) for e in numerators
            ]
        if value_mode == "mean":
            numerators = [
                e * (1.0 / (h * w)) for (h, w, _, _), e in zip(shapes, numerators)
            ]
        items = fold_area_grids(numerators, length=length, axis=-1, **layout)
        item_weights = items / row_totals
    else:
        if use_dropout:
            weights = random.dropout(weights, dropout_rate, seed=seed)
        if fold:
            item_weights = area_fold(
                weights, length=length, per_item=value_mode == "mean", **layout
            )
    if fold:
        output = ops.einsum(
            "bnqk,bnkd->bnqd", ops.cast(item_weights, value.dtype), value
        )
    else:
        if value_mode == "max":
            area_values = area_reduce(
                ops.cast(value, "float32"), "max", axis=-2, **layout
            )
        else:
            area_values = area_features(
                value, axis=-2, features=(value_mode,), **layout
            )[value_mode]
        output = ops.einsum(
            "bnqa,bnad->bnqd",
            ops.cast(weights, value.dtype),
            ops.cast(area_values, value.dtype),
        )
    if return_weights:
        return output, ops.cast(returned, value.dtype)
    return output


def _area_logit_grids(query, area_key, *, length, temperature, layout):
    """Logits of queries against materialised area keys, as per-shape grids."""
    logits = ops.cast(
        ops.einsum("bnqd,bnad->bnqa", query, ops.cast(area_key, query.dtype)),
        "float32",
    )
    if temperature != 1.0:
        logits = logits / temperature
    return split_areas(logits, length=length, axis=-1, **layout)


def area_keys(
    key,
    key_mode="mean",
    *,
    memory_height=1,
    max_area_width=1,
    max_area_height=1,
    training=False,
    seed=None,
):
    """Area keys `[..., num_areas, D]` (float32) for the parameter-free modes.

    Args:
        key: `[..., L, D]`.
        key_mode: `"mean"` (Eq. 3), `"max"` (exact per-channel max), or
            `"sample"` (`mean + std * N(0, 1)` when training, else `mean`).
        memory_height, max_area_width, max_area_height: the area layout.
        training: whether `sample` draws noise.
        seed: an int or `keras.random.SeedGenerator` for the noise.
    """
    _checks.one_of("key_mode", key_mode, KEY_MODES)
    layout = dict(
        memory_height=memory_height,
        max_area_width=max_area_width,
        max_area_height=max_area_height,
        axis=-2,
    )
    if key_mode == "max":
        return area_reduce(ops.cast(key, "float32"), "max", **layout)
    if key_mode == "mean" or not training:
        return area_features(key, features=("mean",), **layout)["mean"]
    feats = area_features(key, features=("mean", "std"), **layout)
    noise = random.normal(ops.shape(feats["std"]), seed=seed)
    return feats["mean"] + feats["std"] * noise


def area_attention(
    query,
    key,
    value,
    mask=None,
    *,
    max_area_width=1,
    max_area_height=1,
    memory_height=1,
    key_mode="mean",
    value_mode="sum",
    temperature=1.0,
    top_k_areas=0,
    training=False,
    return_weights=False,
    dropout_rate=0.0,
    seed=None,
    implementation="fast",
):
    """Multi-head dot-product area attention.

    The queries are *not* scaled here: scale them by `depth ** -0.5` first,
    as `MultiHeadAreaAttention` (and tensor2tensor) do.

    Args:
        query: `[B, N, Lq, D]`.
        key: `[B, N, L, D]`; a 2-D memory is the row-major flattening of an
            `H x W` grid with `H = memory_height`.
        value: `[B, N, L, Dv]`.
        mask: optional boolean tensor broadcastable to `[B, N, Lq, L]`, True
            where a query may attend an item. An area may be attended iff
            every item in it may. A query row with no attendable area
            outputs zeros.
        max_area_width: largest area width (span length in 1-D).
        max_area_height: largest area height (2-D only).
        memory_height: `H`; `L` must be a multiple of it.
        key_mode: `"mean"`, `"max"` or `"sample"` (see `area_keys`). The
            learned MLP modes live in `MultiHeadAreaAttention`, which calls
            `attend_to_areas` with its own area keys.
        value_mode: `"sum"` (Eq. 4), `"mean"` or `"max"`.
        temperature: logits are divided by it before the softmax.
        top_k_areas: if > 0, keep the weights >= the k-th largest of each row
            (ties kept) and renormalise.
        training: enables `sample` noise and dropout.
        return_weights: also return the weights over areas.
        dropout_rate: dropout on the area weights (training only).
        seed: an int or `keras.random.SeedGenerator` for noise and dropout.
        implementation: `"fast"` (default) or `"direct"` (materialises area
            keys and values, like tensor2tensor); both give the same result.

    Returns:
        `[B, N, Lq, Dv]`, and with `return_weights=True` also the weights
        `[B, N, Lq, num_areas]` over areas in `area_coordinates` order.
    """
    _check_common(
        max_area_width,
        max_area_height,
        memory_height,
        value_mode,
        temperature,
        top_k_areas,
        dropout_rate,
        implementation,
    )
    _checks.one_of("key_mode", key_mode, KEY_MODES)
    _check_tensors(query, key, value)
    layout = dict(
        memory_height=memory_height,
        max_area_width=max_area_width,
        max_area_height=max_area_height,
    )
    length = key.shape[-2]
    _checks.grid(length, memory_height)
    if implementation == "fast" and key_mode == "mean":
        # The mean of the items' logits is the logit of the mean key.
        item_logits = ops.cast(
            ops.einsum("bnqd,bnkd->bnqk", query, key), "float32"
        )
        logit_grids = [
            g * (1.0 / (h * w * temperature))
            for (h, w, _, _), g in zip(
                area_shapes(length, **layout),
                area_grids(item_logits, "sum", axis=-1, **layout),
            )
        ]
        # An allowed area's mean logit is at most the largest logit of the
        # allowed items, and that item's 1x1 area attains it: so the softmax
        # stabiliser comes from the L item logits, not the |R| area logits.
        allowed = item_logits
        if mask is not None:
            allowed = ops.where(ops.cast(mask, "bool"), item_logits, _MASKED_LOGIT)
        stabiliser = ops.max(allowed, axis=-1, keepdims=True) / temperature
        if grid_ndim(memory_height) == 2:
            stabiliser = ops.expand_dims(stabiliser, -1)
    else:
        stabiliser = None
        keys = area_keys(key, key_mode, training=training, seed=seed, **layout)
        logit_grids = _area_logit_grids(
            query, keys, length=length, temperature=temperature, layout=layout
        )
    return _attend(
        logit_grids,
        mask,
        value,
        stabiliser=stabiliser,
        value_mode=value_mode,
        top_k_areas=top_k_areas,
        training=training,
        return_weights=return_weights,
        dropout_rate=dropout_rate,
        seed=seed,
        implementation=implementation,
        **layout,
    )


def attend_to_areas(
    query,
    area_key,
    value,
    mask=None,
    *,
    max_area_width=1,
    max_area_height=1,
    memory_height=1,
    value_mode="sum",
    temperature=1.0,
    top_k_areas=0,
    training=False,
    return_weights=False,
    dropout_rate=0.0,
    seed=None,
    implementation="fast",
):
    """Area attention with area keys computed by the caller.

    For key modes that need parameters (the MLP modes of Eq. 9): compute the
    area keys `[B, N, num_areas, D]` from `area_features`, then call this.
    Arguments and returns are those of `area_attention`, with `area_key`
    instead of `key`. With `implementation="fast"`, `sum`/`mean` values are
    still folded onto items instead of being materialised.
    """
    _check_common(
        max_area_width,
        max_area_height,
        memory_height,
        value_mode,
        temperature,
        top_k_areas,
        dropout_rate,
        implementation,
    )
    _check_tensors(query, area_key, value, key_name="area_key")
    layout = dict(
        memory_height=memory_height,
        max_area_width=max_area_width,
        max_area_height=max_area_height,
    )
    length = value.shape[-2]
    logit_grids = _area_logit_grids(
        query, area_key, length=length, temperature=temperature, layout=layout
    )
    return _attend(
        logit_grids,
        mask,
        value,
        value_mode=value_mode,
        top_k_areas=top_k_areas,
        training=training,
        return_weights=return_weights,
        dropout_rate=dropout_rate,
        seed=seed,
        implementation=implementation,
        **layout,
    )
