"""Fused (flash-style) area attention: a Pallas kernel for the JAX backend.

Li et al., 2019, "Area Attention", arXiv:1810.10126, Eqs. 3-4: an area's key
is the mean of its items' keys and its value the sum (or mean) of theirs.
This module computes exactly what the `"fast"` path of `attend_areas`
computes for `mean` keys and `sum`/`mean` values, without ever holding an
`[Lq, L]` tensor per area shape: memory is O(L) per query row, as in
FlashAttention (Dao et al., 2022, arXiv:2205.14135; FlashAttention-2, Dao,
2023, arXiv:2307.08691). See docs/fused_area_attention.md.

**Tiling.** Areas are assigned to the tile holding their top-left item. For
a tile of `block_k` start items and an area-shape stack `hu x wu`, the
kernel loads the key tile at every *offset* `o = dr * W + dc`
(`dr < hu`, `dc < wu`, `W` the grid width): `wu` shifted tiles in 1-D (the
`(w - 1)`-item halo), `hu x wu` in 2-D (the `(h - 1)`-row halo). One matmul
per offset gives the item logits `s_o`; an area's logit sum is the sum of
the offsets it covers, accumulated shape by shape in registers (width `w`
sums are width `w - 1` sums plus one more offset, then the same down the
rows), and its logit is that sum over its item count. One online softmax
(running row maximum and total) runs over the exponentials of every area
shape. The area weights are folded back onto the offsets they cover
(`u_o = sum over shapes containing o of c * e`, `c = 1` for sum values and
`1 / |a|` for mean values) and multiplied by the value tile at that offset.
Every load is a rectangular tile at a shifted start, every product a
`[block_q, block_k] x [block_k, D]` matmul: what Triton lowers.

**Backward** (FlashAttention-2 style) recomputes the logits from the saved
row log-sum-exp. With `P_a` an area's weight, `dP_a = c_a sum_{o in a} dO .
v_o`, and `delta = rowsum(dO * O) = sum_a P_a dP_a`, the gradient of an
area's logit sum is `P_a (dP_a - delta) / |a|`, folded back onto the
offsets' item logits like the weights. One kernel accumulates `dQ` over the
key tiles; another accumulates, per start tile and offset, `dK` and `dV`
parts over the query blocks; the parts are shifted by their offset and
added outside the kernels (O(offsets x L x D) memory, in the inputs'
dtype when that is half precision).

**Masks and empty rows.** A masked item's logit is `-1e30`, so every area
holding it has an exponential of exactly 0 (the library's masked-logit
constant; see `area_softmax`); items past the memory are masked the same
way and areas leaving the grid are dropped by their position. The running
maximum is taken over the item logits of every offset, an upper bound of
every area logit of the tile, so no exponent is positive. A row with no
attendable area keeps a maximum below `-1e29`; its shift is then 0, every
exponential underflows to 0, and its output is zeros, not NaN.

Dropout on the area weights needs random numbers inside the kernel, which
Pallas offers on TPU only: training with dropout takes the fast path
(`attend_areas` decides; see docs/fused_area_attention.md).

On a GPU the kernels are compiled by Pallas' Triton backend; elsewhere they
run in Pallas' interpret mode (slow; for tests).
"""

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from keras_structattn.ops.masked_softmax import MASKED_LOGIT

# A row whose running maximum stays below this has no attendable item.
_EMPTY_ROW = -1e29
DEFAULT_BLOCK_Q = 64
DEFAULT_BLOCK_K = 64
# What the tiles of one loop step may take of an SM's shared memory (the
# H100 has 227 KiB per block; Triton needs some for itself). Every offset's
# key and value tiles are live at once, so a float32 w=5 or a bf16 3x3 stack
# at block_k=64 overflowed it on an H100 (docs/fused_area_attention.md).
SHARED_MEMORY_BUDGET = 200 * 1024
# Past this, a smaller key tile ran faster in the H100 sweep
# (benchmarks/results_fused_tiles_gpu_jax.txt): bf16 w=3 best at block_k=32
# (57 KiB), float32 w=5 and bf16 3x3 at 16 (98 and 82 KiB).
FAST_SHARED_MEMORY = 100 * 1024
DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES = 2


class FusedPlan(NamedTuple):
    """Static description of one fused call (hashable: a `custom_vjp` argument).

    Attributes:
        length: `L`, the memory's item count.
        height, width: the grid `H x W` (`H = 1` in 1-D).
        heights, widths: the area-shape stack `hu x wu`
            (`min(max_area_height, H)`, `min(max_area_width, W)`).
        value_mode: `"sum"` or `"mean"`.
        scale: multiplies the item logits (`1 / temperature`).
        block_q, block_k: tile sizes (queries, start items).
        num_k_blocks: start tiles, `ceil(L / block_k)`.
        mask_rows: the query extent of the mask block (1 when the mask is
            broadcast over queries, `block_q` otherwise), 0 without a mask.
        interpret: whether Pallas interprets the kernels (off GPU).
        num_warps, num_stages: Triton's launch and pipelining settings.
    """

    length: int
    height: int
    width: int
    heights: int
    widths: int
    value_mode: str
    scale: float
    block_q: int
    block_k: int
    num_k_blocks: int
    mask_rows: int
    interpret: bool
    num_warps: int = DEFAULT_NUM_WARPS
    num_stages: int = DEFAULT_NUM_STAGES

    @property
    def offsets(self):
        """`(dr, dc, flat offset)` of every item an area may cover."""
        return [
            (dr, dc, dr * self.width + dc)
            for dr in range(self.heights)
            for dc in range(self.widths)
        ]

    @property
    def shapes(self):
        return [(h, w) for h in range(1, self.heights + 1) for w in range(1, self.widths + 1)]

    @property
    def halo(self):
        return (self.heights - 1) * self.width + self.widths - 1

    @property
    def padded_length(self):
        """Keys and values are padded so that every shifted tile is in bounds."""
        return self.num_k_blocks * self.block_k + self.halo

    def value_scale(self, h, w):
        return 1.0 / (h * w) if self.value_mode == "mean" else 1.0


# ----------------------------------------------------------------------------
# Tile arithmetic shared by the three kernels (values, not refs).


def _area_sums(per_offset, plan):
    """`(h, w) -> sum of per_offset[(dr, dc)] over dr < h, dc < w`."""
    sums = {}
    rows = [None] * plan.heights  # width-w sums of each offset row
    for w in range(1, plan.widths + 1):
        for dr in range(plan.heights):
            item = per_offset[(dr, w - 1)]
            rows[dr] = item if rows[dr] is None else rows[dr] + item
        block = None
        for h in range(1, plan.heights + 1):
            block = rows[h - 1] if block is None else block + rows[h - 1]
            sums[(h, w)] = block
    return sums


def _fold(per_shape, plan):
    """Adjoint of `_area_sums`: `(dr, dc) -> sum of per_shape[(h, w)] over
    h > dr, w > dc` (each area's value spread onto the offsets it covers)."""
    columns = {}  # (h, dc) -> sum over w > dc
    for h in range(1, plan.heights + 1):
        running = None
        for dc in range(plan.widths - 1, -1, -1):
            item = per_shape[(h, dc + 1)]
            running = item if running is None else running + item
            columns[(h, dc)] = running
    folded = {}
    for dc in range(plan.widths):
        running = None
        for dr in range(plan.heights - 1, -1, -1):
            item = columns[(dr + 1, dc)]
            running = item if running is None else running + item
            folded[(dr, dc)] = running
    return folded


def _valid_areas(start, plan):
    """`(h, w) -> bool [1, block_k]`: which start items begin an area of
    that shape inside the grid (start items past the memory begin none)."""
    positions = start + jax.lax.broadcasted_iota(jnp.int32, (1, plan.block_k), 1)
    rows = positions // plan.width
    cols = positions % plan.width
    return {
        (h, w): (rows + h <= plan.height) & (cols + w <= plan.width)
        for h, w in plan.shapes
    }


def _item_logits(q, key_ref, mask_ref, start, plan, mask_rows=slice(None)):
    """Scaled item logits of the tile at every offset, `(dr, dc) -> float32
    [block_q, block_k]`, masked or missing items at `MASKED_LOGIT`.
    `mask_rows` picks the block's rows of a mask ref that holds more (one
    index per load: Triton's lowering takes no `ref.at[...]` then index)."""
    positions = start + jax.lax.broadcasted_iota(jnp.int32, (1, plan.block_k), 1)
    logits = {}
    for dr, dc, offset in plan.offsets:
        k = key_ref[pl.ds(start + offset, plan.block_k), :]
        s = jax.lax.dot_general(
            q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
        )
        s = s * plan.scale
        allowed = positions + offset < plan.length
        if mask_ref is not None:
            items = mask_ref[mask_rows, pl.ds(start + offset, plan.block_k)]
            allowed = allowed & (items != 0)
        logits[(dr, dc)] = jnp.where(allowed, s, MASKED_LOGIT)
    return logits


def _row_shift(maximum):
    """The softmax shift of each row: its maximum, or 0 for an empty row."""
    return jnp.where(maximum > _EMPTY_ROW, maximum, 0.0)


def _area_probabilities(logits, start, lse, plan):
    """`(h, w) -> float32 [block_q, block_k]`: each area's softmax weight,
    from the saved row log-sum-exp `lse` `[block_q, 1]`."""
    sums = _area_sums(logits, plan)
    valid = _valid_areas(start, plan)
    return {
        (h, w): jnp.where(valid[(h, w)], jnp.exp(sums[(h, w)] / (h * w) - lse), 0.0)
        for h, w in plan.shapes
    }


def _backward_tile(
    q, do, lse, delta, key_ref, value_ref, mask_ref, start, plan, mask_rows=slice(None)
):
    """Recomputes a tile; returns per offset the folded normalised weights
    `u` (for dV) and the item-logit gradients `ds` (for dQ and dK)."""
    logits = _item_logits(q, key_ref, mask_ref, start, plan, mask_rows)
    probs = _area_probabilities(logits, start, lse, plan)
    # dO . v at every offset, summed over each area's offsets: dP_a / c_a.
    dov = {}
    for dr, dc, offset in plan.offsets:
        v = value_ref[pl.ds(start + offset, plan.block_k), :]
        dov[(dr, dc)] = jax.lax.dot_general(
            do, v, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
        )
    dov_sums = _area_sums(dov, plan)
    weights = {}
    grads = {}
    for h, w in plan.shapes:
        c = plan.value_scale(h, w)
        p = probs[(h, w)]
        weights[(h, w)] = p * c if c != 1.0 else p
        grads[(h, w)] = p * (c * dov_sums[(h, w)] - delta) / (h * w)
    return _fold(weights, plan), _fold(grads, plan)


def _split_refs(refs, plan, inputs, outputs):
    """Names the kernel refs: `inputs` before the optional mask, the rest
    after it, then `outputs`."""
    refs = list(refs)
    named = dict(zip(inputs[:3], refs[:3]))
    rest = refs[3:]
    named["mask"] = rest.pop(0) if plan.mask_rows else None
    names = list(inputs[3:]) + list(outputs)
    named.update(zip(names, rest))
    return named


# ----------------------------------------------------------------------------
# Kernels. Grid (batch, head, block); the key and value refs hold the whole
# padded memory of one (batch, head), the query refs one block (forward, dQ)
# or the whole padded query axis (dK/dV).


def _forward_kernel(*refs, plan):
    r = _split_refs(refs, plan, ("q", "k", "v"), ("out", "lse"))
    q = r["q"][...]
    rows = q.shape[0]

    def body(block, carry):
        acc, maximum, total = carry
        start = block * plan.block_k
        logits = _item_logits(q, r["k"], r["mask"], start, plan)
        tile_max = None
        for s in logits.values():
            m = jnp.max(s, axis=1, keepdims=True)
            tile_max = m if tile_max is None else jnp.maximum(tile_max, m)
        new_max = jnp.maximum(maximum, tile_max)
        shift = _row_shift(new_max)
        # An empty row's accumulators are exactly 0: keep them (no inf * 0).
        alpha = jnp.where(
            maximum > _EMPTY_ROW, jnp.exp(_row_shift(maximum) - shift), 1.0
        )
        sums = _area_sums(logits, plan)
        valid = _valid_areas(start, plan)
        weights = {}
        tile_total = jnp.zeros((rows, 1), jnp.float32)
        for h, w in plan.shapes:
            e = jnp.where(valid[(h, w)], jnp.exp(sums[(h, w)] / (h * w) - shift), 0.0)
            tile_total = tile_total + jnp.sum(e, axis=1, keepdims=True)
            c = plan.value_scale(h, w)
            weights[(h, w)] = e * c if c != 1.0 else e
        folded = _fold(weights, plan)
        acc = acc * alpha
        for dr, dc, offset in plan.offsets:
            v = r["v"][pl.ds(start + offset, plan.block_k), :]
            acc = acc + jnp.dot(
                folded[(dr, dc)].astype(v.dtype), v, preferred_element_type=jnp.float32
            )
        return acc, new_max, total * alpha + tile_total

    init = (
        jnp.zeros((rows, r["v"].shape[-1]), jnp.float32),
        jnp.full((rows, 1), MASKED_LOGIT, jnp.float32),
        jnp.zeros((rows, 1), jnp.float32),
    )
    acc, maximum, total = jax.lax.fori_loop(0, plan.num_k_blocks, body, init)
    total = jnp.where(total > 0, total, 1.0)
    r["out"][...] = (acc / total).astype(r["out"].dtype)
    r["lse"][...] = _row_shift(maximum) + jnp.log(total)


def _dq_kernel(*refs, plan):
    r = _split_refs(refs, plan, ("q", "k", "v", "do", "lse", "delta"), ("dq",))
    q, do = r["q"][...], r["do"][...]
    lse, delta = r["lse"][...], r["delta"][...]

    def body(block, dq):
        start = block * plan.block_k
        _, ds = _backward_tile(q, do, lse, delta, r["k"], r["v"], r["mask"], start, plan)
        for dr, dc, offset in plan.offsets:
            k = r["k"][pl.ds(start + offset, plan.block_k), :]
            dq = dq + jnp.dot(ds[(dr, dc)].astype(k.dtype), k, preferred_element_type=jnp.float32)
        return dq

    dq = jax.lax.fori_loop(
        0, plan.num_k_blocks, body, jnp.zeros(q.shape, jnp.float32)
    )
    r["dq"][...] = (dq * plan.scale).astype(r["dq"].dtype)


def _dkv_kernel(*refs, plan, num_q_blocks):
    r = _split_refs(refs, plan, ("q", "k", "v", "do", "lse", "delta"), ("dk", "dv"))
    start = pl.program_id(2) * plan.block_k
    key_dim, value_dim = r["k"].shape[-1], r["v"].shape[-1]

    def body(block, carry):
        dks, dvs = carry
        rows = pl.ds(block * plan.block_q, plan.block_q)
        q, do = r["q"][rows, :], r["do"][rows, :]
        lse, delta = r["lse"][rows, :], r["delta"][rows, :]
        mask_rows = rows if plan.mask_rows > 1 else slice(None)
        weights, ds = _backward_tile(
            q, do, lse, delta, r["k"], r["v"], r["mask"], start, plan, mask_rows
        )
        dks = list(dks)
        dvs = list(dvs)
        for index, (dr, dc, _) in enumerate(plan.offsets):
            contract_rows = (((0,), (0,)), ((), ()))
            dks[index] = dks[index] + jax.lax.dot_general(
                ds[(dr, dc)].astype(q.dtype), q, contract_rows,
                preferred_element_type=jnp.float32,
            )
            dvs[index] = dvs[index] + jax.lax.dot_general(
                weights[(dr, dc)].astype(do.dtype), do, contract_rows,
                preferred_element_type=jnp.float32,
            )
        return tuple(dks), tuple(dvs)

    count = len(plan.offsets)
    init = (
        tuple(jnp.zeros((plan.block_k, key_dim), jnp.float32) for _ in range(count)),
        tuple(jnp.zeros((plan.block_k, value_dim), jnp.float32) for _ in range(count)),
    )
    dks, dvs = jax.lax.fori_loop(0, num_q_blocks, body, init)
    for index in range(count):
        r["dk"][index, :, :] = (dks[index] * plan.scale).astype(r["dk"].dtype)
        r["dv"][index, :, :] = dvs[index].astype(r["dv"].dtype)


# ----------------------------------------------------------------------------
# pallas_call wrappers. Arrays are [B, N, length, D] (padded), the mask
# [B or 1, N or 1, padded queries or 1, padded length] int8.


def _compiler_params(plan):
    if plan.interpret:
        return {}
    from jax.experimental.pallas import triton as plgpu

    return {
        "compiler_params": plgpu.CompilerParams(
            num_warps=plan.num_warps, num_stages=plan.num_stages
        )
    }


def _memory_spec(array):
    """The whole (padded) memory axis of one (batch, head)."""
    return pl.BlockSpec((None, None) + array.shape[2:], lambda b, n, i: (b, n, 0, 0))


def _query_block_spec(array, plan):
    return pl.BlockSpec(
        (None, None, plan.block_q, array.shape[-1]), lambda b, n, i: (b, n, i, 0)
    )


def _mask_spec(mask, plan, whole_queries):
    batch_axis, head_axis, query_axis = (mask.shape[a] > 1 for a in range(3))
    if whole_queries or not query_axis:
        rows = mask.shape[2]
    else:
        rows = plan.block_q

    def index(b, n, i):
        return (
            b if batch_axis else 0,
            n if head_axis else 0,
            i if query_axis and not whole_queries else 0,
            0,
        )

    return pl.BlockSpec((None, None, rows, mask.shape[-1]), index)


def _forward(q, k, v, mask, plan):
    batch, heads, queries, _ = q.shape
    grid = (batch, heads, queries // plan.block_q)
    in_specs = [_query_block_spec(q, plan), _memory_spec(k), _memory_spec(v)]
    args = [q, k, v]
    if mask is not None:
        in_specs.append(_mask_spec(mask, plan, whole_queries=False))
        args.append(mask)
    out, lse = pl.pallas_call(
        functools.partial(_forward_kernel, plan=plan),
        grid=grid,
        in_specs=in_specs,
        out_specs=[
            _query_block_spec(v, plan),
            pl.BlockSpec((None, None, plan.block_q, 1), lambda b, n, i: (b, n, i, 0)),
        ],
        out_shape=[
            jax.ShapeDtypeStruct((batch, heads, queries, v.shape[-1]), v.dtype),
            jax.ShapeDtypeStruct((batch, heads, queries, 1), jnp.float32),
        ],
        interpret=plan.interpret,
        name="area_attention_forward",
        **_compiler_params(plan),
    )(*args)
    return out, lse


def _backward(q, k, v, mask, out, lse, d_out, plan):
    batch, heads, queries, _ = q.shape
    num_q_blocks = queries // plan.block_q
    delta = jnp.sum(
        out.astype(jnp.float32) * d_out.astype(jnp.float32), axis=-1, keepdims=True
    )
    d_out = d_out.astype(v.dtype)
    row_spec = pl.BlockSpec((None, None, plan.block_q, 1), lambda b, n, i: (b, n, i, 0))
    in_specs = [_query_block_spec(q, plan), _memory_spec(k), _memory_spec(v)]
    args = [q, k, v]
    if mask is not None:
        in_specs.append(_mask_spec(mask, plan, whole_queries=False))
        args.append(mask)
    in_specs += [_query_block_spec(d_out, plan), row_spec, row_spec]
    args += [d_out, lse, delta]
    dq = pl.pallas_call(
        functools.partial(_dq_kernel, plan=plan),
        grid=(batch, heads, num_q_blocks),
        in_specs=in_specs,
        out_specs=_query_block_spec(q, plan),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        interpret=plan.interpret,
        name="area_attention_dq",
        **_compiler_params(plan),
    )(*args)

    # dK and dV: one program per start tile, over every query block.
    count = len(plan.offsets)
    span = plan.num_k_blocks * plan.block_k
    in_specs = [_memory_spec(q), _memory_spec(k), _memory_spec(v)]
    args = [q, k, v]
    if mask is not None:
        in_specs.append(_mask_spec(mask, plan, whole_queries=True))
        args.append(mask)
    in_specs += [_memory_spec(d_out), _memory_spec(lse), _memory_spec(delta)]
    args += [d_out, lse, delta]

    def parts_spec(dim):
        return pl.BlockSpec(
            (None, None, count, plan.block_k, dim), lambda b, n, j: (b, n, 0, j, 0)
        )

    # Half-precision inputs get half-precision parts (accumulated in float32
    # in the kernel, rounded once, summed in float32 below, then rounded to
    # the inputs' dtype anyway): they are the backward's largest buffers, so
    # this halves its extra memory (docs/fused_area_attention.md).
    parts_dtype = [
        x.dtype if jnp.dtype(x.dtype).itemsize < 4 else jnp.float32 for x in (k, v)
    ]
    dk_parts, dv_parts = pl.pallas_call(
        functools.partial(_dkv_kernel, plan=plan, num_q_blocks=num_q_blocks),
        grid=(batch, heads, plan.num_k_blocks),
        in_specs=in_specs,
        out_specs=[parts_spec(k.shape[-1]), parts_spec(v.shape[-1])],
        out_shape=[
            jax.ShapeDtypeStruct((batch, heads, count, span, k.shape[-1]), parts_dtype[0]),
            jax.ShapeDtypeStruct((batch, heads, count, span, v.shape[-1]), parts_dtype[1]),
        ],
        interpret=plan.interpret,
        name="area_attention_dkv",
        **_compiler_params(plan),
    )(*args)
    # Part `o` holds the gradient of the items `o` places after each start
    # item: shift it into place and add.
    length = k.shape[2]
    dk = jnp.zeros(k.shape, jnp.float32)
    dv = jnp.zeros(v.shape, jnp.float32)
    for index, (_, _, offset) in enumerate(plan.offsets):
        widths = ((0, 0), (0, 0), (offset, length - span - offset), (0, 0))
        dk = dk + jnp.pad(dk_parts[:, :, index].astype(jnp.float32), widths)
        dv = dv + jnp.pad(dv_parts[:, :, index].astype(jnp.float32), widths)
    return dq, dk.astype(k.dtype), dv.astype(v.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _fused(q, k, v, mask, plan):
    return _forward(q, k, v, mask, plan)[0]


def _fused_fwd(q, k, v, mask, plan):
    out, lse = _forward(q, k, v, mask, plan)
    return out, (q, k, v, mask, out, lse)


def _fused_bwd(plan, residuals, d_out):
    q, k, v, mask, out, lse = residuals
    dq, dk, dv = _backward(q, k, v, mask, out, lse, d_out, plan)
    return dq, dk, dv, None


_fused.defvjp(_fused_fwd, _fused_bwd)


# ----------------------------------------------------------------------------


def _power_of_two_at_least(n, floor):
    return max(floor, 1 << max(0, int(n) - 1).bit_length())


def shared_memory_estimate(offsets, block_q, block_k, depth, value_depth, itemsize, stages):
    """Bytes of shared memory one loop step of the forward and dQ kernels
    asks for: the key and value tiles of every offset (each pipelined
    `stages` deep) and the query block."""
    tiles = offsets * block_k * (depth + value_depth) * itemsize
    return stages * tiles + block_q * depth * itemsize


def default_tiles(offsets, queries, length, depth, value_depth, itemsize):
    """`(block_q, block_k, num_stages)` for a GPU: the largest key tile of
    64, 32 or 16 whose double-buffered step stays within `FAST_SHARED_MEMORY`;
    else 16, double-buffered if that fits `SHARED_MEMORY_BUDGET`, else
    single-buffered."""
    block_q = min(DEFAULT_BLOCK_Q, _power_of_two_at_least(queries, 16))
    largest = min(DEFAULT_BLOCK_K, _power_of_two_at_least(length, 16))

    def need(block_k, stages):
        return shared_memory_estimate(
            offsets, block_q, block_k, depth, value_depth, itemsize, stages
        )

    for block_k in (64, 32, 16):
        if block_k <= largest and need(block_k, DEFAULT_NUM_STAGES) <= FAST_SHARED_MEMORY:
            return block_q, block_k, DEFAULT_NUM_STAGES
    block_k = min(16, largest)
    if need(block_k, DEFAULT_NUM_STAGES) <= SHARED_MEMORY_BUDGET:
        return block_q, block_k, DEFAULT_NUM_STAGES
    return block_q, block_k, 1


def _pad_axis(x, axis, size, value=0):
    extra = size - x.shape[axis]
    if extra == 0:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return jnp.pad(x, widths, constant_values=value)


def _kernel_mask(mask, batch, heads, queries, length, padded_queries, padded_length):
    """The user's mask as int8 `[B or 1, N or 1, padded queries or 1,
    padded length]` (broadcast axes kept at 1: a padding mask stays
    `[B, 1, 1, L]`, never `[B, 1, Lq, L]`)."""
    mask = jnp.asarray(mask)
    while mask.ndim < 4:
        mask = mask[None]
    target = (batch, heads, queries, length)
    for axis in range(4):
        if mask.shape[axis] not in (1, target[axis]):
            raise ValueError(
                "`mask` must be broadcastable to [batch, heads, query_length, "
                f"memory_length] = {target}. Received: mask.shape={mask.shape}"
            )
    mask = mask.astype(jnp.int8)
    if mask.shape[-1] == 1:
        mask = jnp.broadcast_to(mask, mask.shape[:3] + (target[-1],))
    if mask.shape[2] > 1:
        mask = _pad_axis(mask, 2, padded_queries, value=1)
    # Items past the memory are excluded by position, whatever the mask says.
    return _pad_axis(mask, 3, padded_length, value=1)


def on_gpu():
    """Whether JAX's default device is a GPU (the kernels compile there)."""
    return jax.devices()[0].platform == "gpu"


def fused_area_attention(
    query,
    key,
    value,
    mask=None,
    *,
    memory_height=1,
    max_area_width=1,
    max_area_height=1,
    value_mode="sum",
    temperature=1.0,
    block_q=None,
    block_k=None,
    num_warps=None,
    num_stages=None,
    interpret=None,
):
    """Area attention with mean keys, through the fused Pallas kernels.

    The same result as `area_attention(..., key_mode="mean",
    implementation="fast")` for `value_mode` `"sum"` or `"mean"` (no top-k,
    no dropout, no returned weights), differentiable (hand-written
    FlashAttention-2 style backward). JAX arrays only.

    Args:
        query: `[B, N, Lq, D]`, already scaled by `depth ** -0.5`.
        key: `[B, N, L, D]`; a 2-D memory is the row-major flattening of an
            `H x W` grid with `H = memory_height`.
        value: `[B, N, L, Dv]`.
        mask: optional boolean, broadcastable to `[B, N, Lq, L]`, True where
            a query may attend an item; an area may be attended iff every
            item in it may. Axes of size 1 stay unbroadcast in memory.
        memory_height, max_area_width, max_area_height: the area layout.
        value_mode: `"sum"` (Eq. 4) or `"mean"`.
        temperature: the logits are divided by it.
        block_q, block_k: tile sizes (powers of two of at least 16 on a GPU,
            as Triton's matmuls need). Default: 64 queries; on a GPU the
            key tile `default_tiles` picks from the loop step's shared
            memory (64, 32 or 16), else 64.
        num_warps, num_stages: Triton's settings on a GPU (default 4, and 2
            or 1 as `default_tiles` finds room).
        interpret: run the kernels in Pallas' interpret mode (default: when
            JAX's device is not a GPU).

    Returns:
        `[B, N, Lq, Dv]`, in `value`'s dtype.
    """
    query, key, value = jnp.asarray(query), jnp.asarray(key), jnp.asarray(value)
    batch, heads, queries, depth = query.shape
    length, value_depth = key.shape[2], value.shape[-1]
    if length % memory_height:
        raise ValueError(
            f"The memory length {length} must be a multiple of "
            f"memory_height={memory_height}."
        )
    if value_mode not in ("sum", "mean"):
        raise ValueError(
            f"`value_mode` must be 'sum' or 'mean' on the fused path. "
            f"Received: value_mode={value_mode!r}"
        )
    interpret = (not on_gpu()) if interpret is None else bool(interpret)
    height = memory_height
    width = length // height
    heights, widths = min(max_area_height, height), min(max_area_width, width)
    floor = 1 if interpret else 16
    stages = DEFAULT_NUM_STAGES
    if not interpret:
        auto_q, auto_k, stages = default_tiles(
            heights * widths, queries, length,
            _power_of_two_at_least(depth, 16), _power_of_two_at_least(value_depth, 16),
            jnp.dtype(key.dtype).itemsize,
        )
        block_q, block_k = block_q or auto_q, block_k or auto_k
    block_q = min(block_q or DEFAULT_BLOCK_Q, _power_of_two_at_least(queries, floor))
    block_k = min(block_k or DEFAULT_BLOCK_K, _power_of_two_at_least(length, floor))
    if not interpret:
        block_q = _power_of_two_at_least(block_q, 16)
        block_k = _power_of_two_at_least(block_k, 16)
    plan_mask_rows = 0
    if mask is not None:
        mask_shape = jnp.shape(mask)
        plan_mask_rows = block_q if len(mask_shape) >= 2 and mask_shape[-2] > 1 else 1
    plan = FusedPlan(
        length=length,
        height=height,
        width=width,
        heights=heights,
        widths=widths,
        value_mode=value_mode,
        scale=1.0 / float(temperature),
        block_q=block_q,
        block_k=block_k,
        num_k_blocks=math.ceil(length / block_k),
        mask_rows=plan_mask_rows,
        interpret=interpret,
        num_warps=num_warps or DEFAULT_NUM_WARPS,
        num_stages=num_stages or stages,
    )
    padded_queries = math.ceil(queries / block_q) * block_q
    padded_length = plan.padded_length
    # Triton's tiles want power-of-two depths; zero columns change no dot product.
    depth_padded = depth if interpret else _power_of_two_at_least(depth, 16)
    value_padded = value_depth if interpret else _power_of_two_at_least(value_depth, 16)
    q = _pad_axis(_pad_axis(query, 2, padded_queries), 3, depth_padded)
    k = _pad_axis(_pad_axis(key, 2, padded_length), 3, depth_padded)
    v = _pad_axis(_pad_axis(value, 2, padded_length), 3, value_padded)
    if mask is not None:
        mask = _kernel_mask(
            mask, batch, heads, queries, length, padded_queries, padded_length
        )
    out = _fused(q, k, v, mask, plan)
    return out[:, :, :queries, :value_depth]
