"""Brute-force NumPy (float64) reference for area attention.

Written from the paper (Li et al., 2019, arXiv:1810.10126) with tensor2tensor
semantics (docs/area_attention.md), independently of `keras_structattn.ops`:
every area is visited by an explicit Python loop and every per-area quantity
is accumulated item by item. No summed-area tables, cumulative sums or
running sums are used, so the reference cannot share a bug with the
library's fast formulations.

Conventions:
- A memory of `L` items is an `H x W` grid, `H = memory_height`,
  `W = L // H`; item `r * W + c` is row `r`, column `c` (row-major).
- Areas are enumerated as in tensor2tensor: area height `h = 1..max_h`
  (outer), area width `w = 1..max_w` (middle), top-left corner `(r, c)` in
  row-major order (inner). A shape larger than the grid contributes nothing.
"""

import math

import numpy as np

STD_EPSILON = 1e-6


def enumerate_areas(length, memory_height=1, max_area_width=1, max_area_height=1):
    """Returns the areas as a list of `(row, col, height, width)` tuples."""
    height = memory_height
    width = length // memory_height
    areas = []
    for h in range(1, max_area_height + 1):
        for w in range(1, max_area_width + 1):
            for r in range(0, height - h + 1):
                for c in range(0, width - w + 1):
                    areas.append((r, c, h, w))
    return areas


def area_items(area, width):
    """Flat (row-major) indices of the items an area covers."""
    r, c, h, w = area
    return [(r + i) * width + (c + j) for i in range(h) for j in range(w)]


def paper_area_count(length, max_area_width):
    """The paper's 1-D count `|R| = (L - S) S + S (S + 1) / 2`, `S <= L`."""
    s = max_area_width
    assert s <= length
    return (length - s) * s + s * (s + 1) // 2


def _areas_and_width(length, memory_height, max_area_width, max_area_height):
    areas = enumerate_areas(length, memory_height, max_area_width, max_area_height)
    return areas, length // memory_height


def area_reduce_reference(
    x, reduction, *, memory_height=1, max_area_width=1, max_area_height=1, axis=-2
):
    """Reduces `x` over every area of the memory laid along `axis`.

    `reduction` is `"sum"`, `"max"` or `"all"`. Float inputs are reduced in
    float64; `"all"` works on booleans.
    """
    x = np.asarray(x)
    if reduction == "all":
        x = x.astype(bool)
    else:
        x = x.astype(np.float64)
    x = np.moveaxis(x, axis, -1)
    length = x.shape[-1]
    areas, width = _areas_and_width(
        length, memory_height, max_area_width, max_area_height
    )
    out = []
    for area in areas:
        items = area_items(area, width)
        acc = x[..., items[0]].copy()
        for j in items[1:]:
            if reduction == "sum":
                acc = acc + x[..., j]
            elif reduction == "max":
                acc = np.maximum(acc, x[..., j])
            elif reduction == "all":
                acc = np.logical_and(acc, x[..., j])
            else:
                raise ValueError(reduction)
        out.append(acc)
    return np.moveaxis(np.stack(out, axis=-1), -1, axis)


def area_features_reference(
    x, *, memory_height=1, max_area_width=1, max_area_height=1, axis=-2,
    epsilon=STD_EPSILON,
):
    """Per-area sum, mean, std, max, heights and widths (float64).

    `std = sqrt(|E[x^2] - mean^2| + epsilon)` as in tensor2tensor.
    """
    x = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    length = x.shape[-1]
    areas, width = _areas_and_width(
        length, memory_height, max_area_width, max_area_height
    )
    sums, means, stds, maxes, heights, widths = [], [], [], [], [], []
    for area in areas:
        items = area_items(area, width)
        total = np.zeros(x.shape[:-1])
        total_sq = np.zeros(x.shape[:-1])
        biggest = np.full(x.shape[:-1], -np.inf)
        for j in items:
            total = total + x[..., j]
            total_sq = total_sq + x[..., j] ** 2
            biggest = np.maximum(biggest, x[..., j])
        n = len(items)
        mean = total / n
        sums.append(total)
        means.append(mean)
        stds.append(np.sqrt(np.abs(total_sq / n - mean**2) + epsilon))
        maxes.append(biggest)
        heights.append(area[2])
        widths.append(area[3])

    def stack(parts):
        return np.moveaxis(np.stack(parts, axis=-1), -1, axis)

    return {
        "sum": stack(sums),
        "mean": stack(means),
        "std": stack(stds),
        "max": stack(maxes),
        "heights": np.array(heights),
        "widths": np.array(widths),
    }


def area_fold_reference(
    area_values, *, length, memory_height=1, max_area_width=1, max_area_height=1,
    axis=-1, per_item=False,
):
    """`out[j] = sum over areas a containing j of p[a]` (or `p[a] / |a|`)."""
    p = np.moveaxis(np.asarray(area_values, dtype=np.float64), axis, -1)
    areas, width = _areas_and_width(
        length, memory_height, max_area_width, max_area_height
    )
    out = np.zeros(p.shape[:-1] + (length,))
    for a, area in enumerate(areas):
        items = area_items(area, width)
        for j in items:
            out[..., j] += p[..., a] / (len(items) if per_item else 1)
    return np.moveaxis(out, -1, axis)


def area_mask_reference(
    mask, *, length, memory_height=1, max_area_width=1, max_area_height=1
):
    """Area mask: an area may be attended iff every item in it may."""
    return area_reduce_reference(
        np.asarray(mask, dtype=bool),
        "all",
        memory_height=memory_height,
        max_area_width=max_area_width,
        max_area_height=max_area_height,
        axis=-1,
    )


def area_attention_reference(
    q, k, v, mask=None, *, max_area_width=1, max_area_height=1, memory_height=1,
    key_mode="mean", value_mode="sum", temperature=1.0, top_k_areas=0,
):
    """Area attention, brute force, float64. Returns `(output, weights)`.

    q: `[B, N, Lq, D]`, k: `[B, N, L, D]`, v: `[B, N, L, Dv]`; `mask` a
    boolean array broadcastable to `[B, N, Lq, L]` (True = may attend) or
    None. `key_mode` in {"mean", "max", "sample"} ("sample" without training
    is "mean"); `value_mode` in {"sum", "mean", "max"}.

    logits = q . area_key (no scaling), an area is allowed iff all its items
    are, logits are divided by the temperature, softmax over allowed areas; a
    row with no allowed area gets zero weights and a zero output. With
    `top_k_areas > 0`, weights below the k-th largest are dropped (ties
    kept) and the rest renormalised. output = weights @ area values.
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    batch, heads, q_len, _ = q.shape
    length = k.shape[2]
    layout = dict(
        memory_height=memory_height,
        max_area_width=max_area_width,
        max_area_height=max_area_height,
    )
    areas, width = _areas_and_width(length, **layout)
    num = len(areas)

    key_feats = area_features_reference(k, axis=-2, **layout)
    if key_mode in ("mean", "sample"):
        area_k = key_feats["mean"]
    elif key_mode == "max":
        area_k = key_feats["max"]
    else:
        raise ValueError(key_mode)
    if value_mode not in ("sum", "mean", "max"):
        raise ValueError(value_mode)
    area_v = area_features_reference(v, axis=-2, **layout)[value_mode]

    if mask is None:
        item_mask = np.ones((batch, heads, q_len, length), dtype=bool)
    else:
        item_mask = np.broadcast_to(
            np.asarray(mask, dtype=bool), (batch, heads, q_len, length)
        )

    out = np.zeros((batch, heads, q_len, v.shape[-1]))
    weights = np.zeros((batch, heads, q_len, num))
    for b in range(batch):
        for n in range(heads):
            for i in range(q_len):
                logits = np.zeros(num)
                allowed = np.zeros(num, dtype=bool)
                for a, area in enumerate(areas):
                    logits[a] = np.dot(q[b, n, i], area_k[b, n, a]) / temperature
                    allowed[a] = all(
                        item_mask[b, n, i, j] for j in area_items(area, width)
                    )
                if not allowed.any():
                    continue  # zero weights, zero output
                top = max(logits[a] for a in range(num) if allowed[a])
                row = np.zeros(num)
                for a in range(num):
                    if allowed[a]:
                        row[a] = np.exp(logits[a] - top)
                row = row / row.sum()
                if top_k_areas > 0:
                    kth = np.sort(row)[::-1][min(top_k_areas, num) - 1]
                    row = np.where(row >= kth, row, 0.0)
                    row = row / row.sum()
                weights[b, n, i] = row
                for a in range(num):
                    out[b, n, i] += row[a] * area_v[b, n, a]
    return out, weights


def softmax_row(logits, allowed):
    """One query row's attention weights by loops: the softmax of `logits`
    over the `allowed` keys, 0 elsewhere (all 0 when no key is allowed)."""
    if not any(allowed):
        return [0.0] * len(logits)
    top = max(logit for logit, ok in zip(logits, allowed) if ok)
    exps = [math.exp(logit - top) if ok else 0.0 for logit, ok in zip(logits, allowed)]
    total = sum(exps)
    return [e / total for e in exps]


def plain_attention_reference(q, k, v, mask=None):
    """Ordinary (item-level, unscaled) softmax attention; masked rows are 0."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    logits = np.einsum("bnqd,bnkd->bnqk", q, k)
    if mask is None:
        mask = np.ones(logits.shape, dtype=bool)
    mask = np.broadcast_to(np.asarray(mask, dtype=bool), logits.shape)
    top = np.max(np.where(mask, logits, -np.inf), axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(mask, np.exp(logits - top), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    w = e / np.where(total > 0, total, 1.0)
    return np.einsum("bnqk,bnkd->bnqd", w, v), w
