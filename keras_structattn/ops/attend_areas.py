"""Dot-product area attention, keras.ops only.

Li et al., 2019, "Area Attention", arXiv:1810.10126 (Eqs. 3-4 and 9).
Queries attend to *areas* (spans or rectangles of adjacent memory items)
instead of single items. Reference semantics: tensor2tensor's
`dot_product_area_attention`, with its defects fixed (see
docs/area_attention.md): a query row with no attendable area outputs zeros
instead of NaN, masks are boolean (True = may attend), and the summed-area sums, the
softmax and the mask constant are float32 under mixed precision.

Five implementation choices give the same numbers:

* `"direct"` materialises the area keys `[B, N, |R|, D]` and area values, as
  tensor2tensor does.
* `"fast"` (default) never materialises area keys for `mean` keys: the area
  logit is the mean of its items' logits, `q . mean_j k_j = mean_j q . k_j`,
  so it takes item logits `QK^T` once and sums them over areas. For `sum` and
  `mean` values it folds the area weights back onto the items
  (`sum_a p_a sum_{j in a} v_j = sum_j (sum_{a ∋ j} p_a) v_j`) and does one
  item-level matmul with V. With neither `top_k_areas` nor `return_weights`
  this whole softmax-and-fold is `area_softmax.area_item_weights` (per-shape
  tensors, hand-written gradient); otherwise it runs on the slot stack of
  `areas`. Other key modes still build area keys, but the value fold applies
  to them too.
* `"fused"` (JAX only) runs `fused_area_attention`, a Pallas kernel that
  never holds an `[Lq, L]` tensor per area shape (FlashAttention-style
  tiling; docs/fused_area_attention.md), for `mean` keys and `sum`/`mean`
  values without top-k, returned weights or dropout in training; other
  settings take `"fast"`. On a GPU it compiles through Triton, elsewhere it
  runs in Pallas' interpret mode (for tests).
* `"stacked"` materialises the area keys and values like `"direct"` and
  hands them, as a memory of `|R|` items, to `keras.ops.dot_product_attention`
  (with the area mask, and zero rows restored after it): on a GPU under
  bfloat16 that is cuDNN's flash attention, which never writes `[Lq, |R|]`
  either. For any key mode (also the learned keys of `attend_to_areas`) with
  `sum`/`mean` values, equal key and value depths, no top-k, returned
  weights or dropout in training; other settings take `"fast"`.
* `"auto"` is `"fused"` where the kernel compiles (JAX on a GPU), else
  `"fast"`.
"""

from keras import backend
from keras import ops
from keras import random

from keras_structattn import checks
from keras_structattn.ops.area_softmax import area_item_weights
from keras_structattn.ops.areas import area_features
from keras_structattn.ops.areas import area_fold
from keras_structattn.ops.areas import area_layout
from keras_structattn.ops.areas import area_reduce
from keras_structattn.ops.areas import area_slots
from keras_structattn.ops.areas import areas_to_slots
from keras_structattn.ops.areas import fold_area_slots
from keras_structattn.ops.areas import slots_to_areas
from keras_structattn.ops.dropout import dropout
from keras_structattn.ops.masked_softmax import MASKED_LOGIT

KEY_MODES = ("mean", "max", "sample")
VALUE_MODES = ("sum", "mean", "max")
IMPLEMENTATIONS = ("fast", "direct", "fused", "stacked", "auto")



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
    checks.positive_int("max_area_width", max_area_width)
    checks.positive_int("max_area_height", max_area_height)
    checks.positive_int("memory_height", memory_height)
    checks.one_of("value_mode", value_mode, VALUE_MODES)
    checks.positive_float("temperature", temperature)
    checks.non_negative_int("top_k_areas", top_k_areas)
    checks.rate("dropout_rate", dropout_rate)
    checks.one_of("implementation", implementation, IMPLEMENTATIONS)


def _resolve(implementation, fusable, stackable=False):
    """The path that runs: `"fused"` and `"stacked"` where asked for and the
    settings allow them, else `"fast"`; `"auto"` is `"fused"` where the
    kernel compiles (a JAX GPU) and the settings allow it, else `"fast"`;
    `"fast"` and `"direct"` as they are."""
    if implementation == "stacked":
        return "stacked" if stackable else "fast"
    if implementation not in ("fused", "auto"):
        return implementation
    if backend.backend() != "jax":
        if implementation == "fused":
            raise ValueError(
                "implementation='fused' (the Pallas kernel) needs the JAX "
                f"backend; the backend is {backend.backend()!r}. Use "
                "'auto' (the fused kernel on a JAX GPU, else 'fast') or 'fast'."
            )
        return "fast"
    if not fusable:
        return "fast"
    if implementation == "auto":
        from keras_structattn.ops.fused_area_attention import on_gpu

        return "fused" if on_gpu() else "fast"
    return "fused"


def _plain_settings(layout, value_mode, top_k_areas, return_weights, training, dropout_rate):
    """Whether the call is plain attention over areas, as the fused kernel
    and the stacked path compute it: a static layout, `sum`/`mean` values,
    no top-k, no returned weights and no dropout in training."""
    return (
        layout is not None
        and value_mode in ("sum", "mean")
        and top_k_areas == 0
        and not return_weights
        and not (training and dropout_rate > 0)
    )


def _equal_depths(query, value):
    """Static and equal key and value depths: what flash attention and
    `jax.nn.dot_product_attention` take (a condition of the stacked path)."""
    return query.shape[-1] is not None and query.shape[-1] == value.shape[-1]


def _stacked_attention(query, area_key, value, mask, layout, *, value_mode, temperature):
    """Attention over the stacked area memory through
    `keras.ops.dot_product_attention`.

    Area `a` is one memory item with key `area_key[a]` and value the sum (or
    mean) of its items' values, allowed iff all its items are; its
    logit `q . k_a / temperature` and the softmax over areas are those of
    Eqs. 3-4. `dot_product_attention` averages a row with nothing allowed
    uniformly: that row is set to zeros after it (no NaN, no gradient).
    """
    grid = dict(
        memory_height=layout.height,
        max_area_width=layout.max_area_width,
        max_area_height=layout.max_area_height,
    )
    area_value = area_features(value, features=(value_mode,), axis=-2, **grid)[
        value_mode
    ]
    queries = query.shape[-2]
    allowed = None
    if mask is not None:
        allowed = ops.cast(mask, "bool")
        if allowed.shape[-1] != 1:
            allowed = area_reduce(allowed, "all", axis=-1, **grid)
        while len(allowed.shape) < 4:
            allowed = ops.expand_dims(allowed, 0)
        if queries is not None:
            query, area_key, area_value, allowed = _as_cudnn_takes_masks(
                query, area_key, area_value, allowed
            )

    def heads_last(x):  # [B, N, T, D] -> [B, T, N, D], dot_product_attention's
        return ops.transpose(ops.cast(x, query.dtype), (0, 2, 1, 3))

    output = ops.dot_product_attention(
        heads_last(query),
        heads_last(area_key),
        heads_last(area_value),
        mask=allowed,
        scale=1.0 / temperature,
    )
    output = ops.transpose(output, (0, 2, 1, 3))
    if allowed is None:
        return output
    anything = ops.any(allowed, axis=-1, keepdims=True)
    output = ops.where(anything, output, ops.zeros_like(output))
    return output[:, :, :queries] if queries is not None else output


def _as_cudnn_takes_masks(query, area_key, area_value, allowed):
    """cuDNN's flash attention takes a mask only as a bias of the full
    `[Lq, |R|]` extent, and in training only with even lengths (otherwise
    Keras falls back to XLA): broadcasts the area mask over the queries and
    appends one masked dummy area and/or query row where a length is odd
    (the caller drops the dummy query's output)."""
    queries, areas = query.shape[-2], area_key.shape[-2]
    allowed = ops.broadcast_to(allowed, tuple(ops.shape(allowed)[:2]) + (queries, areas))
    allowed = ops.cast(allowed, "int8")
    one_more = [[0, 0], [0, 0], [0, 1], [0, 0]]  # on axis 2
    if areas % 2:
        area_key, area_value = ops.pad(area_key, one_more), ops.pad(area_value, one_more)
        allowed = ops.pad(allowed, [[0, 0], [0, 0], [0, 0], [0, 1]])
    if queries % 2:
        query = ops.pad(query, one_more)
        allowed = ops.pad(allowed, one_more)
    return query, area_key, area_value, allowed > 0


def _check_mask(mask, length):
    if mask is None:
        return
    last = mask.shape[-1] if len(mask.shape) else None
    if len(mask.shape) > 4 or (
        length is not None and last is not None and last not in (1, length)
    ):
        raise ValueError(
            "`mask` must be broadcastable to [batch, heads, query_length, "
            f"{length}] (the memory length, or 1, on its last axis). "
            f"Received: mask.shape={tuple(mask.shape)}"
        )


def _check_tensors(query, key, value, key_name="key"):
    checks.rank("query", query, 4)
    checks.rank(key_name, key, 4)
    checks.rank("value", value, 4)
    if query.shape[-1] is not None and key.shape[-1] is not None:
        if query.shape[-1] != key.shape[-1]:
            raise ValueError(
                f"`query` and `{key_name}` must have the same depth. Received: "
                f"query.shape={tuple(query.shape)}, "
                f"{key_name}.shape={tuple(key.shape)}"
            )


def _validate(
    query,
    key,
    value,
    mask,
    *,
    key_name,
    max_area_width,
    max_area_height,
    memory_height,
    value_mode,
    temperature,
    top_k_areas,
    dropout_rate,
    implementation,
):
    """Checks the arguments shared by the entry points; returns the layout."""
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
    _check_tensors(query, key, value, key_name=key_name)
    length = value.shape[-2]
    if length is None:
        length = key.shape[-2] if key_name == "key" else None
    _check_mask(mask, length)
    if length is None:
        return None  # see `_dynamic_length_error`
    return area_layout(length, memory_height, max_area_width, max_area_height)


def _dynamic_length_error(reason):
    return ValueError(
        "The memory length (axis -2 of `key` and `value`) is not static, "
        "which area attention supports only for 1-D memories "
        "(memory_height=1) on the fast path: key_mode='mean', value_mode "
        "'sum' or 'mean', top_k_areas=0, return_weights=False and "
        f"implementation='fast'. {reason} Pad the memory to a fixed length "
        "(e.g. bucket boundaries) or use one of those settings."
    )


def _allowed_slots(mask, layout):
    """Which slots may be attended: valid areas all of whose items may be.

    `mask` is boolean (or 0/1), broadcastable to `[..., Lq, L]`, or None.
    Padding, causal (raster order in 2-D) and arbitrary masks all carry over.
    Returns a boolean tensor broadcastable to `[..., Lq, S * L]`.
    """
    valid = ops.convert_to_tensor(layout.valid)
    if mask is None:
        return valid
    mask = ops.cast(mask, "bool")
    if mask.shape[-1] == 1:
        return ops.logical_and(mask, valid)
    # min over a 0/1 mask: 1 iff every item of the area may be attended.
    every = area_slots(ops.cast(mask, "float32"), "min", layout, axis=-1)
    return ops.logical_and(every > 0.5, valid)


def _nonzero(totals):
    return ops.where(totals > 0, totals, ops.ones_like(totals))


def _top_k(weights, k):
    """Keeps the weights >= the k-th largest per row (ties kept); renormalises."""
    k = min(k, weights.shape[-1])
    kth = ops.top_k(weights, k, sorted=True)[0][..., -1:]
    kept = ops.where(weights >= kth, weights, ops.zeros_like(weights))
    return kept / _nonzero(ops.sum(kept, axis=-1, keepdims=True))


def _attend(
    logits,
    mask,
    value,
    layout,
    *,
    stabiliser=None,
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
        logits: float32 slot logits `[B, N, Lq, S * L]` (see `areas`), already
            divided by the temperature.
        mask: item mask broadcastable to `[B, N, Lq, L]`, or None.
        value: `[B, N, L, Dv]`.
        layout: the `AreaLayout`.
        stabiliser: optional `[B, N, Lq, 1]` upper bound of the allowed
            logits attained by one of them (default: their max). It carries
            no gradient: the softmax does not depend on it.
        (the rest as in `area_attention`.)
    """
    allowed = _allowed_slots(mask, layout)
    if stabiliser is None:
        stabiliser = ops.max(
            ops.where(allowed, logits, MASKED_LOGIT), axis=-1, keepdims=True
        )
    stabiliser = ops.stop_gradient(stabiliser)
    # Masked slots get exp(-1e9) = 0 exactly, whatever the stabiliser (a row
    # with nothing allowed has a stabiliser near -1e9 / temperature); allowed
    # ones are <= 0 before the exp. No inf arises, so no NaN gradient either.
    numerators = ops.exp(
        ops.where(allowed, logits - stabiliser, MASKED_LOGIT)
    )
    totals = _nonzero(ops.sum(numerators, axis=-1, keepdims=True))

    fold = implementation == "fast" and value_mode in ("sum", "mean")
    use_dropout = bool(training) and dropout_rate > 0
    weights = None  # over areas in enumeration order, when needed
    if return_weights or top_k_areas > 0 or not fold:
        weights = slots_to_areas(numerators, layout) / totals
        if top_k_areas > 0:
            weights = _top_k(weights, top_k_areas)
    returned = weights

    if fold and top_k_areas == 0:
        # Fold the unnormalised slot weights onto the items and normalise once
        # per row: L divisions instead of |R|.
        if use_dropout:
            numerators = dropout(numerators, dropout_rate, seed=seed)
        if value_mode == "mean":
            numerators = numerators * ops.convert_to_tensor(
                1.0 / layout.slot_sizes
            )
        item_weights = fold_area_slots(numerators, layout) / totals
    else:
        if use_dropout:
            weights = dropout(weights, dropout_rate, seed=seed)
        if fold:
            item_weights = area_fold(
                weights,
                length=layout.length,
                memory_height=layout.height,
                max_area_width=layout.max_area_width,
                max_area_height=layout.max_area_height,
                per_item=value_mode == "mean",
            )
    if fold:
        output = ops.einsum(
            "bnqk,bnkd->bnqd", ops.cast(item_weights, value.dtype), value
        )
    else:
        grid = dict(
            memory_height=layout.height,
            max_area_width=layout.max_area_width,
            max_area_height=layout.max_area_height,
            axis=-2,
        )
        if value_mode == "max":
            area_values = area_reduce(ops.cast(value, "float32"), "max", **grid)
        else:
            area_values = area_features(value, features=(value_mode,), **grid)[
                value_mode
            ]
        output = ops.einsum(
            "bnqa,bnad->bnqd",
            ops.cast(weights, value.dtype),
            ops.cast(area_values, value.dtype),
        )
    if return_weights:
        return output, ops.cast(returned, value.dtype)
    return output


def _slot_logits(query, area_key, layout, temperature):
    """Logits of queries against materialised area keys, as slots."""
    logits = ops.cast(
        ops.einsum("bnqd,bnad->bnqa", query, ops.cast(area_key, query.dtype)),
        "float32",
    )
    if temperature != 1.0:
        logits = logits / temperature
    return areas_to_slots(logits, layout, fill=MASKED_LOGIT)


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

    Returns:
        float32 `[..., num_areas, D]`, areas in `area_coordinates` order.
    """
    checks.one_of("key_mode", key_mode, KEY_MODES)
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
        implementation: `"fast"` (default), `"direct"` (materialises area
            keys and values, like tensor2tensor), `"fused"` (the Pallas
            kernel, JAX only; settings it does not cover run `"fast"`),
            `"stacked"` (the area memory through
            `keras.ops.dot_product_attention`; see the module docstring) or
            `"auto"` (`"fused"` on a JAX GPU, else `"fast"`); all give the
            same result.

    Returns:
        `[B, N, Lq, Dv]`, and with `return_weights=True` also the weights
        `[B, N, Lq, num_areas]` over areas in `area_coordinates` order.
    """
    checks.one_of("key_mode", key_mode, KEY_MODES)
    layout = _validate(
        query,
        key,
        value,
        mask,
        key_name="key",
        max_area_width=max_area_width,
        max_area_height=max_area_height,
        memory_height=memory_height,
        value_mode=value_mode,
        temperature=temperature,
        top_k_areas=top_k_areas,
        dropout_rate=dropout_rate,
        implementation=implementation,
    )
    layout_args = dict(
        memory_height=memory_height,
        max_area_width=max_area_width,
        max_area_height=max_area_height,
    )
    fusable = (
        key_mode == "mean"
        and value_mode in ("sum", "mean")
        and top_k_areas == 0
        and not return_weights
    )
    plain = _plain_settings(
        layout, value_mode, top_k_areas, return_weights, training, dropout_rate
    )
    kernel = _resolve(
        implementation,
        fusable=plain and key_mode == "mean",
        stackable=plain and _equal_depths(query, value),
    )
    if kernel == "stacked":
        keys = area_keys(key, key_mode, training=training, seed=seed, **layout_args)
        return _stacked_attention(
            query, keys, value, mask, layout, value_mode=value_mode,
            temperature=temperature,
        )
    if kernel == "fused":
        from keras_structattn.ops.fused_area_attention import fused_area_attention

        return fused_area_attention(
            query,
            key,
            value,
            mask,
            value_mode=value_mode,
            temperature=temperature,
            **layout_args,
        )
    implementation = kernel
    fused = implementation == "fast" and fusable
    if layout is None and not (fused and memory_height == 1):
        raise _dynamic_length_error(
            f"Received memory_height={memory_height}, key_mode={key_mode!r}, "
            f"value_mode={value_mode!r}, top_k_areas={top_k_areas}, "
            f"return_weights={return_weights}, "
            f"implementation={implementation!r}.",
        )
    if fused:
        return _fused_mean_attention(
            query,
            key,
            value,
            mask,
            layout,
            value_mode=value_mode,
            temperature=temperature,
            dropout_rate=dropout_rate if training else 0.0,
            seed=seed,
            max_area_width=max_area_width,
        )
    stabiliser = None
    if implementation == "fast" and key_mode == "mean":
        # The mean of the items' logits is the logit of the mean key, so sum
        # the L item logits over areas instead of building |R| area keys.
        item_logits = ops.cast(
            ops.einsum("bnqd,bnkd->bnqk", query, key), "float32"
        )
        inverse_sizes = ops.convert_to_tensor(
            1.0 / (layout.slot_sizes * temperature)
        )
        logits = area_slots(item_logits, "sum", layout) * inverse_sizes
        # An allowed area's mean logit is at most the largest logit of its
        # (allowed) items, and that item's 1x1 area attains it: so the
        # softmax stabiliser comes from the L item logits, not the slots.
        allowed = item_logits
        if mask is not None:
            allowed = ops.where(ops.cast(mask, "bool"), item_logits, MASKED_LOGIT)
        stabiliser = ops.max(allowed, axis=-1, keepdims=True) / temperature
    else:
        keys = area_keys(key, key_mode, training=training, seed=seed, **layout_args)
        logits = _slot_logits(query, keys, layout, temperature)
    return _attend(
        logits,
        mask,
        value,
        layout,
        stabiliser=stabiliser,
        value_mode=value_mode,
        top_k_areas=top_k_areas,
        training=training,
        return_weights=return_weights,
        dropout_rate=dropout_rate,
        seed=seed,
        implementation=implementation,
    )


def _fused_mean_attention(
    query,
    key,
    value,
    mask,
    layout,
    *,
    value_mode,
    temperature,
    dropout_rate,
    seed,
    max_area_width,
):
    """The fast path end to end: item logits, item weights, one matmul.

    `layout` is None for a 1-D memory of unknown (dynamic) length: the item
    logits are then padded with `max_area_width - 1` masked items, so that
    every width fits whatever the length, and the weights of the padding are
    dropped again (areas touching it have weight exactly 0).
    """
    logits = ops.cast(ops.einsum("bnqd,bnkd->bnqk", query, key), "float32")
    if temperature != 1.0:
        logits = logits / temperature
    if mask is not None:
        logits = ops.where(ops.cast(mask, "bool"), logits, MASKED_LOGIT)
    shape = ops.shape(logits)
    if layout is None:
        padding = max_area_width - 1
        grid = ops.expand_dims(logits, -2)  # [B, N, Lq, 1, L]
        if padding:
            widths = [[0, 0]] * 4 + [[0, padding]]
            grid = ops.pad(grid, widths, constant_values=MASKED_LOGIT)
        # Shape bookkeeping only: a template whose widths all fit.
        layout = area_layout(max_area_width, 1, max_area_width, 1)
    else:
        padding = 0
        grid = ops.reshape(
            logits, tuple(shape[:-1]) + (layout.height, layout.width)
        )
    keep = None
    if dropout_rate > 0:
        keep = {}
        for index, (h, w, _, _) in enumerate(layout.shapes):
            # Distinct draws per shape even when `seed` is a plain int.
            shape_seed = seed + index if isinstance(seed, int) else seed
            keep[(h, w)] = dropout(
                ops.ones_like(grid[..., h - 1 :, w - 1 :]),
                dropout_rate,
                seed=shape_seed,
            )
    weights = area_item_weights(grid, layout, value_mode=value_mode, keep=keep)
    if padding:
        weights = weights[..., :-padding]
    weights = ops.reshape(weights, shape)
    return ops.einsum("bnqk,bnkd->bnqd", ops.cast(weights, value.dtype), value)


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
    With `implementation="fast"` (and `"fused"`/`"auto"`, which run it
    here), `sum`/`mean` values are still folded onto items instead of being
    materialised.

    Args:
        query: `[B, N, Lq, D]`, already scaled.
        area_key: `[B, N, num_areas, D]`, areas in `area_coordinates` order.
        value: `[B, N, L, Dv]`, the item values.
        mask, max_area_width, max_area_height, memory_height, value_mode,
            temperature, top_k_areas, training, return_weights,
            dropout_rate, seed, implementation: as in `area_attention`.

    Returns:
        As `area_attention`: `[B, N, Lq, Dv]`, and with
        `return_weights=True` also the weights `[B, N, Lq, num_areas]`.
    """
    layout = _validate(
        query,
        area_key,
        value,
        mask,
        key_name="area_key",
        max_area_width=max_area_width,
        max_area_height=max_area_height,
        memory_height=memory_height,
        value_mode=value_mode,
        temperature=temperature,
        top_k_areas=top_k_areas,
        dropout_rate=dropout_rate,
        implementation=implementation,
    )
    if layout is None:
        raise _dynamic_length_error("`attend_to_areas` needs the area count.")
    # Caller-made area keys: no Pallas kernel for them; the stacked path
    # takes them as they are, the fast path folds values.
    plain = _plain_settings(
        layout, value_mode, top_k_areas, return_weights, training, dropout_rate
    )
    implementation = _resolve(
        implementation, fusable=False, stackable=plain and _equal_depths(query, value)
    )
    if area_key.shape[-2] != layout.num_areas:
        raise ValueError(
            f"`area_key` must have {layout.num_areas} areas (axis -2) for a "
            f"memory of length {layout.length} with memory_height="
            f"{memory_height}, max_area_width={max_area_width} and "
            f"max_area_height={max_area_height}. Received: "
            f"area_key.shape={tuple(area_key.shape)}"
        )
    if implementation == "stacked":
        return _stacked_attention(
            query, area_key, value, mask, layout, value_mode=value_mode,
            temperature=temperature,
        )
    return _attend(
        _slot_logits(query, area_key, layout, temperature),
        mask,
        value,
        layout,
        value_mode=value_mode,
        top_k_areas=top_k_areas,
        training=training,
        return_weights=return_weights,
        dropout_rate=dropout_rate,
        seed=seed,
        implementation=implementation,
    )
