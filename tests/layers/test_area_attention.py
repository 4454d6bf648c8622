"""Tests of `keras_structattn.layers.MultiHeadAreaAttention`.

The layer is checked against

* `keras.layers.MultiHeadAttention` with the same weights when every area is
  a single item (`max_area_width = max_area_height = 1`), and
* a NumPy reference of the whole layer written here with explicit loops over
  areas (tensor2tensor semantics, see docs/area_attention.md):
  projections with the layer's own kernels, queries scaled by key_dim**-0.5,
  area keys (mean / max / the MLP modes of Eq. 9), area values, boolean area
  masks (an area may be attended iff all its items may), temperature, top-k,
  and the output projection.

Every reference test runs both `area_implementation`s ("fast" and "direct")
with the same weights and also compares them with each other (1e-5); their
gradients are compared too, and checked against finite differences.

Plus the Keras conventions checklist: config and `.keras` round trips,
symbolic shapes, `fit` with `jit_compile=True`, dropout and seeds, mixed
precision, fully masked rows, Keras-mask propagation, attention-mask
broadcasting as in Keras MHA, and argument validation. Everything is small
enough to run on a 2-core CPU on both the TensorFlow and JAX backends.
"""

import json

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.layers import MultiHeadAreaAttention
from keras_structattn.ops import attend_areas
from tests.layers.mha_cases import REFUSED_MHA_ARGUMENTS

PLAIN_KEY_MODES = ("mean", "max", "sample")
MLP_KEY_MODES = ("concat", "max_concat", "sum", "sample_concat", "sample_sum")

NUM_HEADS = 2
KEY_DIM = 4
DIM = 8  # model width of the inputs


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


def to_np(x):
    """A backend tensor (any float width, bfloat16 included) as float64."""
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")), dtype=np.float64)


def dtype_name(x):
    return keras.backend.standardize_dtype(x.dtype)


def weights_by_name(layer):
    """The layer's variables as float64 arrays keyed by their path below the
    layer, e.g. "query/kernel" or "area_height_embedding"."""
    out = {}
    for w in layer.weights:
        out[w.path.split("/", 1)[1]] = to_np(w)
    return out


def randomize(layer, seed, scale=0.5):
    """Random kernels *and biases*, so that every bias is exercised."""
    rng = np.random.default_rng(seed)
    layer.set_weights(
        [rng.normal(size=w.shape).astype("float32") * scale for w in layer.get_weights()]
    )


def copy_weights_by_name(source, target):
    """Copies weights between layers whose variables have the same sub-paths."""
    src = {w.path.split("/", 1)[1]: w for w in source.weights}
    tgt = [w.path.split("/", 1)[1] for w in target.weights]
    assert sorted(src) == sorted(tgt), (sorted(src), sorted(tgt))
    target.set_weights([ops.convert_to_numpy(src[name]) for name in tgt])


def normal(rng, *shape):
    return rng.normal(size=shape).astype("float32")


def padding_mask(rng, batch, length):
    """[B, S] padding mask with at least one valid item per batch item."""
    lengths = rng.integers(1, length + 1, size=batch)
    lengths[0] = length - 1 if length > 1 else 1  # make sure something is padded
    return np.arange(length)[None, :] < lengths[:, None]


def causal(query_length, memory_length):
    """Keras' causal mask: query i may see items j <= i."""
    return np.tril(np.ones((query_length, memory_length), dtype=bool))


def make_layer(**kwargs):
    args = dict(num_heads=NUM_HEADS, key_dim=KEY_DIM)
    args.update(kwargs)
    return MultiHeadAreaAttention(**args)


def bias_only(layer, batch_shape):
    """What a query row with no attendable area must output."""
    bias = weights_by_name(layer)["attention_output/bias"]
    return np.broadcast_to(bias, tuple(batch_shape) + bias.shape)


def paper_count(length, size):
    """|R| = (L - S) S + S (S + 1) / 2 areas of width <= S in a length-L line."""
    size = min(size, length)
    return (length - size) * size + size * (size + 1) // 2


# ---------------------------------------------------------------------------
# NumPy reference of the whole layer
# ---------------------------------------------------------------------------


def ref_areas(length, memory_height=1, max_area_width=1, max_area_height=1):
    """[((row, col, h, w), [items])] in tensor2tensor order: height, width,
    then the top-left corner in row-major order."""
    height = memory_height
    width = length // height
    out = []
    for h in range(1, max_area_height + 1):
        for w in range(1, max_area_width + 1):
            for r in range(height - h + 1):
                for c in range(width - w + 1):
                    items = [(r + i) * width + c + j for i in range(h) for j in range(w)]
                    out.append(((r, c, h, w), items))
    return out


def ref_area_key(items_keys, h, w, key_mode, weights):
    """Area key of one area (inference: no `sample` noise)."""
    mean = items_keys.mean(0)
    std = np.sqrt(np.abs((items_keys**2).mean(0) - mean**2) + 1e-6)
    largest = items_keys.max(0)
    if key_mode in ("mean", "sample"):
        return mean
    if key_mode == "max":
        return largest
    shape_emb = np.concatenate(
        [weights["area_height_embedding"][h - 1], weights["area_width_embedding"][w - 1]]
    )
    features = {
        "concat": lambda: np.concatenate([mean, std, shape_emb]),
        "max_concat": lambda: np.concatenate([largest, shape_emb]),
        "sum": lambda: shape_emb + mean + std,
        "sample_concat": lambda: np.concatenate([mean, shape_emb]),
        "sample_sum": lambda: mean + shape_emb,
    }[key_mode]()
    hidden = np.maximum(
        features @ weights["area_key_hidden/kernel"] + weights["area_key_hidden/bias"], 0.0
    )
    return hidden @ weights["area_key_output/kernel"] + weights["area_key_output/bias"]


def ref_masked_softmax(logits, allowed):
    out = np.zeros_like(logits)
    for t in range(logits.shape[0]):
        if allowed[t].any():
            row = np.where(allowed[t], logits[t], -np.inf)
            e = np.exp(row - row.max())
            out[t] = e / e.sum()
    return out


def ref_top_k(weights, k):
    out = np.zeros_like(weights)
    for t in range(weights.shape[0]):
        kth = np.sort(weights[t])[::-1][min(k, weights.shape[1]) - 1]
        kept = np.where(weights[t] >= kth, weights[t], 0.0)
        if kept.sum() > 0:
            out[t] = kept / kept.sum()
    return out


def reference_layer(
    weights,
    query,
    value,
    key=None,
    mask=None,
    *,
    key_dim=KEY_DIM,
    memory_height=1,
    max_area_width=1,
    max_area_height=1,
    key_mode="mean",
    value_mode="sum",
    temperature=1.0,
    top_k=0,
):
    """Area attention layer in NumPy (float64), explicit loops over areas.

    query [B, T, Dq], value/key [B, S, D] (2-D memories flattened row-major),
    mask [B, T, S] boolean or None. Returns (output [B, T, Dout],
    weights [B, heads, T, num_areas]).
    """
    key = value if key is None else key
    q = np.einsum("btd,dnk->btnk", query, weights["query/kernel"]) + weights["query/bias"]
    k = np.einsum("bsd,dnk->bsnk", key, weights["key/kernel"]) + weights["key/bias"]
    v = np.einsum("bsd,dnk->bsnk", value, weights["value/kernel"]) + weights["value/bias"]
    q = q * key_dim**-0.5
    batch, query_length, heads, _ = q.shape
    memory_length = v.shape[1]
    if mask is None:
        mask = np.ones((batch, query_length, memory_length), dtype=bool)
    areas = ref_areas(memory_length, memory_height, max_area_width, max_area_height)
    attended = np.zeros((batch, query_length, heads, v.shape[-1]))
    area_weights = np.zeros((batch, heads, query_length, len(areas)))
    for b in range(batch):
        for n in range(heads):
            area_keys, area_values = [], []
            allowed = np.zeros((query_length, len(areas)), dtype=bool)
            for a, ((_, _, h, w), items) in enumerate(areas):
                area_keys.append(ref_area_key(k[b, items, n], h, w, key_mode, weights))
                values = v[b, items, n]
                area_values.append(
                    {"sum": values.sum(0), "mean": values.mean(0), "max": values.max(0)}[
                        value_mode
                    ]
                )
                allowed[:, a] = mask[b][:, items].all(axis=1)
            logits = q[b, :, n] @ np.stack(area_keys).T / temperature
            p = ref_masked_softmax(logits, allowed)
            if top_k:
                p = ref_top_k(p, top_k)
            area_weights[b, n] = p
            attended[b, :, n] = p @ np.stack(area_values)
    output = (
        np.einsum("btnv,nvo->bto", attended, weights["attention_output/kernel"])
        + weights["attention_output/bias"]
    )
    return output, area_weights


# ---------------------------------------------------------------------------
# Equivalence with keras.layers.MultiHeadAttention for 1x1 areas
# ---------------------------------------------------------------------------


def mha_pair(query, value, key=None, seed=0, **kwargs):
    """A Keras MHA with random weights and our layer (1x1 areas) sharing them."""
    mha = keras.layers.MultiHeadAttention(num_heads=NUM_HEADS, key_dim=KEY_DIM, **kwargs)
    ours = make_layer(**kwargs)
    mha(query, value, key, return_attention_scores=True)
    ours(query, value, key)
    assert len(ours.weights) == len(mha.weights)
    randomize(mha, seed)
    copy_weights_by_name(mha, ours)
    return mha, ours


MHA_CASES = {
    "self": dict(T=6),
    "cross_separate_key_key_mask": dict(T=4, separate_key=True, key_mask=True),
    "cross_value_mask": dict(T=4, value_mask=True),
    "cross_causal": dict(T=4, causal=True),
    "self_causal_and_padding": dict(T=6, causal=True, value_mask=True),
    "cross_attention_mask": dict(T=4, attention_mask=True),
    "self_all_masks": dict(T=6, causal=True, value_mask=True, attention_mask=True),
    "gate": dict(T=4, layer=dict(use_gate=True), value_mask=True),
    "sliding_window": dict(T=6, layer=dict(sliding_window=2)),
    # Keras' fused path (jax) rejects value_dim != key_dim: this one is only
    # compared on Keras' explicit-softmax path.
    "value_dim_output_shape": dict(
        T=4, layer=dict(value_dim=3, output_shape=5), causal=True, fused=False
    ),
    "dropout_inference": dict(T=4, layer=dict(dropout=0.3), causal=True),
}
MHA_MEMORY = 6


def _mha_inputs(case, rng):
    batch, length = 2, MHA_MEMORY
    query = normal(rng, batch, case["T"], DIM)
    if case.get("separate_key"):
        value, key = normal(rng, batch, length, 6), normal(rng, batch, length, 5)
    else:
        value, key = normal(rng, batch, length, DIM), None
    call = {}
    mask = np.ones((batch, case["T"], length), dtype=bool)
    if case.get("value_mask"):
        call["value_mask"] = padding_mask(rng, batch, length)
        mask &= call["value_mask"][:, None, :]
    if case.get("key_mask"):
        call["key_mask"] = padding_mask(rng, batch, length)
        mask &= call["key_mask"][:, None, :]
    if case.get("attention_mask"):
        att = rng.random((batch, case["T"], length)) < 0.6
        att[:, :, 0] = True
        att[1, 2] = False  # one fully masked row
        call["attention_mask"] = att
        mask &= att
    if case.get("causal"):
        call["use_causal_mask"] = True
        mask &= causal(case["T"], length)[None]
    return query, value, key, call, mask


@pytest.mark.parametrize("name", list(MHA_CASES))
def test_matches_keras_mha_with_unit_areas(name):
    case = MHA_CASES[name]
    rng = np.random.default_rng(1)
    query, value, key, call, mask = _mha_inputs(case, rng)
    mha, ours = mha_pair(query, value, key, **case.get("layer", {}))
    got = to_np(ours(query, value, key, **call))
    got_with_scores, scores = ours(query, value, key, return_attention_scores=True, **call)
    # Same outputs whether or not the scores are asked for.
    np.testing.assert_allclose(to_np(got_with_scores), got, atol=1e-6, rtol=1e-6)

    # Keras' explicit-softmax path (return_attention_scores=True) zeroes fully
    # masked rows as ours does: every row compares, and so do the scores.
    expected, expected_scores = mha(query, value, key, return_attention_scores=True, **call)
    assert got.shape == tuple(expected.shape)
    np.testing.assert_allclose(got, to_np(expected), atol=1e-5, rtol=1e-5)
    assert tuple(scores.shape) == tuple(expected_scores.shape)
    np.testing.assert_allclose(to_np(scores), to_np(expected_scores), atol=1e-6)

    if case.get("fused", True):
        # Keras' fused path averages fully masked rows: compare the others.
        fused = to_np(mha(query, value, key, **call))
        rows = mask.any(-1)
        assert rows.any()
        np.testing.assert_allclose(got[rows], fused[rows], atol=1e-5, rtol=1e-5)


ATTENTION_MASK_FORMS = {
    # [T, S]: no batch axis (Keras MHA broadcasts it over batch and heads).
    "unbatched_T_S": dict(heads=NUM_HEADS, T=6),
    # Same with num_heads == T, where a wrong broadcast is silent.
    "unbatched_T_S_heads_equal_T": dict(heads=4, T=4),
    # [B, N, T, S]: one mask per head (the "(B, [N], T, S)" of the
    # conventions).
    "per_head_B_N_T_S": dict(heads=NUM_HEADS, T=6, per_head=True),
}


@pytest.mark.parametrize("name", list(ATTENTION_MASK_FORMS))
def test_attention_mask_broadcast_forms_match_keras_mha(name):
    form = ATTENTION_MASK_FORMS[name]
    rng = np.random.default_rng(21)
    heads, length = form["heads"], form["T"]
    x = normal(rng, 2, length, DIM)
    mha = keras.layers.MultiHeadAttention(num_heads=heads, key_dim=KEY_DIM)
    ours = make_layer(num_heads=heads, max_area_width=1)
    mha(x, x, return_attention_scores=True)
    ours(x, x)
    randomize(mha, 21)
    copy_weights_by_name(mha, ours)
    if form.get("per_head"):
        mask = rng.random((2, heads, length, length)) < 0.6
        mask[..., 0] = True
    else:
        mask = rng.random((length, length)) < 0.6
        mask[:, 0] = True
    expected, expected_scores = mha(x, x, attention_mask=mask, return_attention_scores=True)
    got, scores = ours(x, x, attention_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(to_np(got), to_np(expected), atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(to_np(scores), to_np(expected_scores), atol=1e-6)


# ---------------------------------------------------------------------------
# Whole-layer NumPy reference: parameter-free key modes
# ---------------------------------------------------------------------------

# layout: "1d"; "grid" = [B, H, W, D] memory; "flat" = [B, H*W, D] with
# memory_height. query: "self" (the memory itself) or an int T (cross).
REFERENCE_CASES = {
    "1d_self": dict(S=6, max_w=3, query="self"),
    "1d_self_causal": dict(S=6, max_w=3, query="self", causal=True),
    "1d_cross_padding": dict(S=6, max_w=3, query=4, value_mask=True),
    "1d_cross_attention_mask_mean_values": dict(
        S=6, max_w=2, query=4, attention_mask=True, value_mode="mean"
    ),
    "1d_max_keys_max_values": dict(
        S=6, max_w=3, query="self", key_mode="max", value_mode="max", value_mask=True
    ),
    "1d_sample_inference_causal": dict(S=6, max_w=2, query=4, key_mode="sample", causal=True),
    "1d_temperature_top_k": dict(
        S=6, max_w=3, query="self", temperature=0.7, top_k=3, value_mask=True
    ),
    "1d_hot_temperature_max_keys": dict(S=6, max_w=4, query=4, temperature=3.0, key_mode="max"),
    "1d_width_exceeds_memory": dict(S=3, max_w=5, query=4, value_mask=True),
    "2d_grid_2x3_self_causal": dict(
        S=6, H=2, max_w=2, max_h=2, layout="grid", query="self", causal=True
    ),
    "2d_flat_2x3_self_causal": dict(
        S=6, H=2, max_w=2, max_h=2, layout="flat", query="self", causal=True
    ),
    "2d_grid_3x4_cross_padding": dict(
        S=12, H=3, max_w=2, max_h=2, layout="grid", query=4, value_mask=True
    ),
    "2d_flat_3x4_cross_padding": dict(
        S=12, H=3, max_w=2, max_h=2, layout="flat", query=4, value_mask=True
    ),
    "2d_flat_3x2_tall_areas_attention_mask": dict(
        S=6, H=3, max_w=3, max_h=4, layout="flat", query=4, attention_mask=True,
        value_mode="mean",
    ),
    "2d_grid_3x2_max": dict(
        S=6, H=3, max_w=2, max_h=2, layout="grid", query="self", key_mode="max",
        value_mode="max", value_mask=True,
    ),
}


def _reference_inputs(case, rng, batch=2):
    """Builds layer kwargs, call args and the reference's flattened inputs."""
    layout = case.get("layout", "1d")
    memory_length = case["S"]
    height = case.get("H", 1)
    width = memory_length // height
    memory = normal(rng, batch, memory_length, DIM)
    layer_kwargs = dict(
        max_area_width=case["max_w"],
        max_area_height=case.get("max_h", 1),
        area_key_mode=case.get("key_mode", "mean"),
        area_value_mode=case.get("value_mode", "sum"),
        area_temperature=case.get("temperature", 1.0),
        top_k_areas=case.get("top_k", 0),
    )
    if layout == "flat":
        layer_kwargs["memory_height"] = height
    memory_in = memory.reshape(batch, height, width, DIM) if layout == "grid" else memory
    if case["query"] == "self":
        query, query_in = memory, memory_in
    else:
        query = normal(rng, batch, case["query"], DIM)
        query_in = query
    query_length = query.shape[1]
    mask = np.ones((batch, query_length, memory_length), dtype=bool)
    call = {}
    if case.get("value_mask"):
        value_mask = padding_mask(rng, batch, memory_length)
        mask &= value_mask[:, None, :]
        call["value_mask"] = (
            value_mask.reshape(batch, height, width) if layout == "grid" else value_mask
        )
    if case.get("attention_mask"):
        att = rng.random((batch, query_length, memory_length)) < 0.7
        att[0, 1] = False  # one fully masked query row
        call["attention_mask"] = att
        mask &= att
    if case.get("causal"):
        call["use_causal_mask"] = True
        mask &= causal(query_length, memory_length)[None]
    ref_kwargs = dict(
        memory_height=height,
        max_area_width=case["max_w"],
        max_area_height=case.get("max_h", 1),
        key_mode=layer_kwargs["area_key_mode"],
        value_mode=layer_kwargs["area_value_mode"],
        temperature=layer_kwargs["area_temperature"],
        top_k=layer_kwargs["top_k_areas"],
    )
    return layer_kwargs, query_in, memory_in, call, query, memory, mask, ref_kwargs


def _check_against_reference(case, seed):
    """Both implementations against the NumPy reference and each other."""
    rng = np.random.default_rng(seed)
    layer_kwargs, query_in, memory_in, call, query, memory, mask, ref_kwargs = (
        _reference_inputs(case, rng)
    )
    fast = make_layer(area_implementation="fast", **layer_kwargs)
    fast(query_in, memory_in, **call)
    randomize(fast, seed)
    direct = make_layer(area_implementation="direct", **layer_kwargs)
    direct(query_in, memory_in, **call)
    direct.set_weights(fast.get_weights())
    expected, expected_weights = reference_layer(
        weights_by_name(fast), query, memory, mask=mask, **ref_kwargs
    )
    results = {}
    for name, layer in (("fast", fast), ("direct", direct)):
        output, scores = layer(query_in, memory_in, return_attention_scores=True, **call)
        plain_output = layer(query_in, memory_in, **call)
        # A [B, H, W, D] query gives a [B, H, W, out] output.
        assert tuple(output.shape) == tuple(query_in.shape[:-1]) + (expected.shape[-1],)
        assert tuple(plain_output.shape) == tuple(output.shape)
        output = to_np(output).reshape(expected.shape)
        plain_output = to_np(plain_output).reshape(expected.shape)
        for got in (output, plain_output):
            np.testing.assert_allclose(got, expected, atol=2e-4, rtol=2e-4, err_msg=name)
        assert tuple(scores.shape) == expected_weights.shape
        scores = to_np(scores)
        np.testing.assert_allclose(scores, expected_weights, atol=2e-5, err_msg=name)
        results[name] = (output, plain_output, scores)
    # fast and direct agree to float32 round-off.
    for a, b in zip(results["fast"], results["direct"]):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)
    # Rows with no attendable area output exactly the output bias.
    empty = ~(mask.any(-1))
    if case.get("attention_mask"):
        assert empty.any()
    if empty.any():
        for output, _, _ in results.values():
            np.testing.assert_allclose(
                output[empty], bias_only(fast, (int(empty.sum()),)), atol=1e-6
            )


@pytest.mark.parametrize("name", list(REFERENCE_CASES))
def test_plain_modes_match_numpy_reference(name):
    _check_against_reference(REFERENCE_CASES[name], seed=3)


# ---------------------------------------------------------------------------
# Whole-layer NumPy reference: MLP key modes (Eq. 9)
# ---------------------------------------------------------------------------

MLP_CASES = {
    "1d_cross_padding": dict(S=6, max_w=3, query=4, value_mask=True),
    "2d_grid_2x3_self_causal": dict(
        S=6, H=2, max_w=2, max_h=2, layout="grid", query="self", causal=True
    ),
    "2d_flat_3x2_cross_mean_values": dict(
        S=6, H=3, max_w=2, max_h=3, layout="flat", query=4, value_mode="mean",
        attention_mask=True,
    ),
}


@pytest.mark.parametrize("layout", list(MLP_CASES))
@pytest.mark.parametrize("key_mode", MLP_KEY_MODES)
def test_mlp_modes_match_numpy_reference(key_mode, layout):
    case = dict(MLP_CASES[layout], key_mode=key_mode)
    _check_against_reference(case, seed=4)


def test_mlp_reference_depends_on_shape_embeddings():
    # Guards the reference test above against vacuous MLP weights: changing
    # one width-embedding row changes the output of concat mode.
    rng = np.random.default_rng(5)
    x = normal(rng, 2, 6, DIM)
    layer = make_layer(max_area_width=2, area_key_mode="concat")
    layer(x, x)
    randomize(layer, 5)
    before = to_np(layer(x, x))
    layer.area_width_embedding.assign(
        ops.convert_to_numpy(layer.area_width_embedding) + 1.0
    )
    after = to_np(layer(x, x))
    assert np.abs(after - before).max() > 1e-3


# ---------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------


def _mlp_feature_width(mode, key_dim):
    half = key_dim // 2
    return {
        "concat": key_dim + key_dim + 2 * half,  # [mean, std, e]
        "max_concat": key_dim + 2 * half,  # [max, e]
        "sum": key_dim,  # e + mean + std
        "sample_concat": key_dim + 2 * half,  # [mean, e]
        "sample_sum": key_dim,  # mean + e
    }[mode]


@pytest.mark.parametrize("key_mode", MLP_KEY_MODES)
def test_mlp_mode_weight_names_and_shapes(key_mode, key_dim=KEY_DIM):
    layer = make_layer(
        key_dim=key_dim, max_area_width=3, max_area_height=2, memory_height=2,
        area_key_mode=key_mode,
    )
    layer.build((2, 6, DIM), (2, 6, DIM))
    shapes = {w.path.split("/", 1)[1]: tuple(w.shape) for w in layer.weights}
    width = _mlp_feature_width(key_mode, key_dim)
    expected_extra = {
        "area_height_embedding": (2, key_dim // 2),
        "area_width_embedding": (3, key_dim // 2),
        "area_key_hidden/kernel": (width, key_dim),
        "area_key_hidden/bias": (key_dim,),
        "area_key_output/kernel": (key_dim, key_dim),
        "area_key_output/bias": (key_dim,),
    }
    for name, shape in expected_extra.items():
        assert shapes.get(name) == shape, (name, shapes)
    mha = keras.layers.MultiHeadAttention(num_heads=NUM_HEADS, key_dim=key_dim)
    mha.build((2, 6, DIM), (2, 6, DIM))
    mha_shapes = {w.path.split("/", 1)[1]: tuple(w.shape) for w in mha.weights}
    assert shapes == {**mha_shapes, **expected_extra}
    assert all(w.trainable for w in layer.weights)


def test_mlp_concat_with_odd_key_dim_builds():
    # concat modes accept an odd key_dim: the embedding then has 2 * (D // 2).
    x = np.random.default_rng(0).normal(size=(2, 6, DIM)).astype("float32")
    layer = make_layer(key_dim=5, max_area_width=2, area_key_mode="concat")
    out = to_np(layer(x, x))
    assert out.shape == (2, 6, DIM) and np.isfinite(out).all()
    shapes = {w.path.split("/", 1)[1]: tuple(w.shape) for w in layer.weights}
    assert shapes["area_key_hidden/kernel"] == (5 + 5 + 4, 5)


@pytest.mark.parametrize("key_mode", PLAIN_KEY_MODES)
def test_parameter_free_modes_add_no_weights(key_mode, max_area=(3, 2)):
    layer = make_layer(
        max_area_width=max_area[0], max_area_height=max_area[1], memory_height=2,
        area_key_mode=key_mode,
    )
    layer.build((2, 6, DIM), (2, 6, DIM))
    mha = keras.layers.MultiHeadAttention(num_heads=NUM_HEADS, key_dim=KEY_DIM)
    mha.build((2, 6, DIM), (2, 6, DIM))
    assert len(layer.weights) == len(mha.weights) == 8
    assert [tuple(w.shape) for w in layer.weights] == [tuple(w.shape) for w in mha.weights]


# ---------------------------------------------------------------------------
# Fully masked rows: zeros before the output projection, never NaN
# ---------------------------------------------------------------------------

FULLY_MASKED_CASES = [
    ("mean", "fast", 1.0),
    ("mean", "direct", 1.0),
    ("max", "fast", 1.0),
    ("concat", "fast", 1.0),
    ("sample_sum", "direct", 1.0),
    ("mean", "direct", 0.5),
    ("concat", "fast", 0.5),
    # Sharper than 1: the masked-logit constant meets the temperature.
    ("mean", "fast", 0.5),
]


@pytest.mark.parametrize("key_mode,implementation,temperature", FULLY_MASKED_CASES)
def test_fully_masked_value_mask_gives_bias_only(key_mode, implementation, temperature):
    rng = np.random.default_rng(6)
    x = normal(rng, 2, 6, DIM)
    value_mask = np.ones((2, 6), bool)
    value_mask[1] = False  # nothing to attend for batch item 1
    layer = make_layer(
        max_area_width=2, area_key_mode=key_mode, area_implementation=implementation,
        area_temperature=temperature,
    )
    layer(x, x)
    randomize(layer, 6)
    out, scores = layer(x, x, value_mask=value_mask, return_attention_scores=True)
    plain = layer(x, x, value_mask=value_mask)
    for got in (to_np(out), to_np(plain)):
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got[1], bias_only(layer, (6,)), atol=1e-6)
        # Batch item 0 really attends (the bias alone would be wrong there).
        assert np.abs(got[0] - bias_only(layer, (6,))).max() > 1e-3
    scores = to_np(scores)
    assert np.isfinite(scores).all()
    assert (scores[1] == 0).all()
    np.testing.assert_allclose(scores[0].sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("implementation", ["fast", "direct"])
def test_fully_masked_attention_mask_row_gives_bias_only(implementation):
    rng = np.random.default_rng(7)
    query = normal(rng, 2, 4, DIM)
    memory = normal(rng, 2, 6, DIM)
    attention_mask = rng.random((2, 4, 6)) < 0.8
    attention_mask[:, :, 0] = True
    attention_mask[0, 2] = False
    attention_mask[1, 0] = False
    layer = make_layer(max_area_width=3, area_implementation=implementation)
    layer(query, memory)
    randomize(layer, 7)
    out = to_np(layer(query, memory, attention_mask=attention_mask))
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out[0, 2], bias_only(layer, ()), atol=1e-6)
    np.testing.assert_allclose(out[1, 0], bias_only(layer, ()), atol=1e-6)
    others = np.ones((2, 4), bool)
    others[0, 2] = others[1, 0] = False
    assert (np.abs(out[others] - bias_only(layer, ())).max(-1) > 1e-3).all()


def _loss_and_gradients(layer, x, call):
    """sum(layer(x, x)**2) and its gradients w.r.t. x and every trainable
    variable, with the backend's own autodiff."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        xt = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            out = layer(xt, xt, **call)
            loss = tf.reduce_sum(tf.square(tf.cast(out, "float32")))
        grads = tape.gradient(loss, [xt] + list(layer.trainable_variables))
        assert all(g is not None for g in grads)
        # Gathered embeddings get IndexedSlices: densify them.
        return float(loss), [
            np.asarray(tf.convert_to_tensor(g), dtype=np.float64) for g in grads
        ]
    if backend == "jax":
        import jax
        import jax.numpy as jnp

        trainable = [v.value for v in layer.trainable_variables]
        non_trainable = [v.value for v in layer.non_trainable_variables]

        def loss_fn(trainable, xj):
            out, _ = layer.stateless_call(trainable, non_trainable, xj, xj, **call)
            return jnp.sum(jnp.square(out.astype("float32")))

        loss, (g_vars, g_x) = jax.value_and_grad(loss_fn, argnums=(0, 1))(
            trainable, jnp.asarray(x)
        )
        return float(loss), [np.asarray(g_x, dtype=np.float64)] + [
            np.asarray(g, dtype=np.float64) for g in g_vars
        ]
    pytest.skip(f"no gradient helper for backend {backend!r}")


@pytest.mark.parametrize(
    "key_mode,implementation,dtype",
    [
        ("mean", "fast", "mixed_float16"),
        ("concat", "direct", "mixed_bfloat16"),
        ("concat", "stacked", "mixed_bfloat16"),
    ],
)
def test_fully_masked_rows_mixed_precision_and_gradients(key_mode, implementation, dtype):
    rng = np.random.default_rng(8)
    x = normal(rng, 2, 6, DIM)
    value_mask = np.ones((2, 6), bool)
    value_mask[1] = False
    value_mask[0, 4:] = False
    call = dict(value_mask=value_mask, use_causal_mask=True)
    layer = make_layer(
        max_area_width=2, area_key_mode=key_mode, area_implementation=implementation,
        dtype=dtype,
    )
    layer(x, x)
    randomize(layer, 8, scale=0.3)
    out = layer(x, x, **call)
    assert dtype_name(out) == layer.compute_dtype
    out = to_np(out)
    assert np.isfinite(out).all()
    bias = bias_only(layer, (6,))
    np.testing.assert_allclose(out[1], bias, atol=1e-2)  # bias in low precision
    loss, grads = _loss_and_gradients(layer, x, call)
    assert np.isfinite(loss)
    for g in grads:
        assert np.isfinite(g).all()
    # Batch item 1 contributes only through the bias: no gradient reaches its
    # inputs. Batch item 0 does get gradients.
    assert np.abs(grads[0][1]).max() == 0.0
    assert np.abs(grads[0][0]).max() > 0.0


GRADIENT_CASES = {
    # (attention_mask=True leaves one query row with nothing to attend)
    "1d_mean_sum_causal_attention_mask_temperature": dict(
        S=6, max_w=3, query="self", causal=True, attention_mask=True, temperature=0.7
    ),
    "2d_grid_mean_keys_mean_values_padding": dict(
        S=6, H=2, max_w=2, max_h=2, layout="grid", query="self", value_mode="mean",
        value_mask=True,
    ),
    "1d_concat_sum_causal_padding": dict(
        S=6, max_w=2, query="self", key_mode="concat", causal=True, value_mask=True
    ),
}


@pytest.mark.parametrize("name", list(GRADIENT_CASES))
def test_gradients_fast_direct_and_finite_differences(name):
    """Both implementations have the same gradients (inputs and every
    weight), and the input gradient matches central finite differences."""
    case = GRADIENT_CASES[name]
    rng = np.random.default_rng(23)
    layer_kwargs, x, _, call, _, _, _, _ = _reference_inputs(case, rng)
    fast = make_layer(area_implementation="fast", **layer_kwargs)
    fast(x, x, **call)
    randomize(fast, 23, scale=0.3)
    direct = make_layer(area_implementation="direct", **layer_kwargs)
    direct(x, x, **call)
    direct.set_weights(fast.get_weights())
    loss_fast, grads_fast = _loss_and_gradients(fast, x, call)
    loss_direct, grads_direct = _loss_and_gradients(direct, x, call)
    np.testing.assert_allclose(loss_fast, loss_direct, rtol=1e-5)
    names = ["inputs"] + [v.path for v in fast.trainable_variables]
    for label, a, b in zip(names, grads_fast, grads_direct):
        assert np.isfinite(a).all(), label
        scale = max(1.0, np.abs(b).max())
        np.testing.assert_allclose(a, b, atol=1e-4 * scale, rtol=1e-4, err_msg=label)
    assert np.abs(grads_fast[0]).max() > 0

    def loss_at(point):
        point = point.astype("float32")
        return float(np.sum(to_np(fast(point, point, **call)) ** 2))

    for trial in range(2):
        direction = rng.normal(size=x.shape)
        eps = 1e-2
        numeric = (loss_at(x + eps * direction) - loss_at(x - eps * direction)) / (2 * eps)
        analytic = float(np.sum(grads_fast[0] * direction))
        assert abs(numeric - analytic) <= 1e-2 * max(1.0, abs(analytic)), (
            trial, numeric, analytic,
        )


# ---------------------------------------------------------------------------
# Config and serialisation
# ---------------------------------------------------------------------------

CONFIG_KWARGS = dict(
    value_dim=3,
    dropout=0.1,
    output_shape=5,
    use_gate=True,
    seed=11,
    kernel_initializer="he_normal",
    max_area_width=3,
    max_area_height=2,
    memory_height=2,
    area_key_mode="max_concat",
    area_value_mode="mean",
    area_temperature=0.5,
    top_k_areas=4,
    area_implementation="direct",
    name="area_attention",
)


def test_get_config_round_trip_before_and_after_build():
    layer = make_layer(**CONFIG_KWARGS)
    config = layer.get_config()
    for name in (
        "max_area_width", "max_area_height", "memory_height", "area_key_mode",
        "area_value_mode", "top_k_areas", "area_implementation", "seed",
    ):
        assert config[name] == CONFIG_KWARGS[name]
    assert config["area_temperature"] == 0.5
    clone = MultiHeadAreaAttention.from_config(config)
    assert clone.get_config() == config

    x = np.random.default_rng(9).normal(size=(2, 6, DIM)).astype("float32")
    layer.build((2, 6, DIM), (2, 6, DIM))
    built_config = layer.get_config()
    # Through JSON, as in a .keras file (tuples become lists); Keras MHA
    # stores attention_axes=(1,) once built.
    restored_config = json.loads(json.dumps(built_config))
    clone = MultiHeadAreaAttention.from_config(restored_config)
    clone.build((2, 6, DIM), (2, 6, DIM))
    assert json.loads(json.dumps(clone.get_config())) == restored_config
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(to_np(clone(x, x)), to_np(layer(x, x)), atol=1e-6)

    # And through Keras' own serialisation helpers.
    revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert isinstance(revived, MultiHeadAreaAttention)
    assert revived.area_key_mode == "max_concat"
    assert revived.max_area_width == 3 and revived.max_area_height == 2
    assert revived.memory_height == 2 and revived.area_value_mode == "mean"


SAVE_CASES = {
    "1d_mean": dict(
        shape=(6, DIM), layer=dict(max_area_width=3), call=dict(use_causal_mask=True)
    ),
    "1d_concat": dict(
        shape=(6, DIM), layer=dict(max_area_width=2, area_key_mode="concat", dropout=0.2),
        call={},
    ),
    "2d_grid_max_concat": dict(
        shape=(2, 3, DIM),
        layer=dict(max_area_width=2, max_area_height=2, area_key_mode="max_concat",
                   area_value_mode="mean"),
        call=dict(use_causal_mask=True),
    ),
}


@pytest.mark.parametrize("name", list(SAVE_CASES))
def test_keras_file_round_trip(name, tmp_path):
    case = SAVE_CASES[name]
    inputs = keras.Input(case["shape"])
    layer = make_layer(**case["layer"])
    hidden = layer(inputs, inputs, **case["call"])
    outputs = keras.layers.Dense(3)(hidden)
    model = keras.Model(inputs, outputs)
    randomize(layer, 10)
    x = np.random.default_rng(10).normal(size=(2,) + case["shape"]).astype("float32")
    expected = to_np(model(x, training=False))
    path = tmp_path / f"{name}.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    revived = [sub for sub in loaded.layers if isinstance(sub, MultiHeadAreaAttention)]
    assert len(revived) == 1
    assert revived[0].get_config() == layer.get_config()
    np.testing.assert_allclose(to_np(loaded(x, training=False)), expected, atol=1e-6)
    # The weights were restored (not re-initialised).
    for a, b in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------
# Shapes: compute_output_shape and symbolic calls
# ---------------------------------------------------------------------------


def test_compute_output_shape():
    layer = make_layer(max_area_width=2)
    assert tuple(layer.compute_output_shape((2, 5, DIM), (2, 7, 6))) == (2, 5, DIM)
    assert tuple(layer.compute_output_shape((None, 5, DIM), (None, 7, 6), (None, 7, 3))) == (
        None, 5, DIM,
    )
    layer = make_layer(max_area_width=2, output_shape=3)
    assert tuple(layer.compute_output_shape((2, 5, DIM), (2, 7, 6))) == (2, 5, 3)
    layer = make_layer(max_area_width=2, max_area_height=2)
    assert tuple(layer.compute_output_shape((2, 3, 4, DIM), (2, 3, 4, DIM))) == (2, 3, 4, DIM)
    # The eager output agrees.
    x = np.zeros((2, 3, 4, DIM), "float32")
    assert tuple(layer(x, x).shape) == (2, 3, 4, DIM)


def test_symbolic_dynamic_query_length():
    # Only the memory length must be static; the query length may be None.
    layer = make_layer(max_area_width=3)
    output, scores = layer(
        keras.Input((None, DIM)), keras.Input((6, DIM)), return_attention_scores=True
    )
    assert tuple(output.shape) == (None, None, DIM)
    assert tuple(scores.shape) == (None, NUM_HEADS, None, paper_count(6, 3))


def test_area_coordinates_before_build_needs_a_length():
    layer = make_layer(max_area_width=2)
    with pytest.raises(ValueError, match="memory_length"):
        layer.area_coordinates()
    assert layer.area_coordinates(memory_length=5).shape == (paper_count(5, 2), 4)


@pytest.mark.parametrize(
    "query_shape,memory_shape,layer_kwargs",
    [
        ((4, DIM), (6, DIM), dict(max_area_width=3)),
        ((4, DIM), (6, DIM), dict(max_area_width=2, max_area_height=2, memory_height=2)),
        ((2, 3, DIM), (2, 3, DIM), dict(max_area_width=2, max_area_height=2)),
        ((4, DIM), (3, 2, DIM), dict(max_area_width=3, max_area_height=2, output_shape=2)),
    ],
)
def test_symbolic_outputs_and_scores(query_shape, memory_shape, layer_kwargs):
    layer = make_layer(**layer_kwargs)
    query = keras.Input(query_shape)
    memory = keras.Input(memory_shape)
    output, scores = layer(query, memory, return_attention_scores=True)
    memory_length = int(np.prod(memory_shape[:-1]))
    query_length = int(np.prod(query_shape[:-1]))
    areas = len(
        ref_areas(
            memory_length,
            memory_shape[0] if len(memory_shape) == 3 else layer_kwargs.get("memory_height", 1),
            layer_kwargs["max_area_width"],
            layer_kwargs.get("max_area_height", 1),
        )
    )
    out_dim = layer_kwargs.get("output_shape", DIM)
    assert tuple(output.shape) == (None,) + tuple(query_shape[:-1]) + (out_dim,)
    assert tuple(scores.shape) == (None, NUM_HEADS, query_length, areas)
    assert output.dtype == scores.dtype == "float32"
    # The eager call gives the same shapes with a concrete batch.
    rng = np.random.default_rng(11)
    out, sc = layer(
        normal(rng, 2, *query_shape), normal(rng, 2, *memory_shape),
        return_attention_scores=True,
    )
    assert tuple(out.shape) == (2,) + tuple(output.shape[1:])
    assert tuple(sc.shape) == (2,) + tuple(scores.shape[1:])
    assert layer.area_coordinates().shape == (areas, 4)


# ---------------------------------------------------------------------------
# Training: fit with jit_compile, dropout, sample noise, seeds
# ---------------------------------------------------------------------------

FIT_CASES = {
    "1d_sample_dropout_causal": dict(
        shape=(6, DIM), layer=dict(max_area_width=3, area_key_mode="sample", dropout=0.2),
        call=dict(use_causal_mask=True),
    ),
    "2d_grid_sample_concat_dropout": dict(
        shape=(2, 3, DIM),
        layer=dict(max_area_width=2, max_area_height=2, area_key_mode="sample_concat",
                   dropout=0.1),
        call={},
    ),
}


@pytest.mark.parametrize("name", list(FIT_CASES))
def test_fit_with_jit_compile(name):
    case = FIT_CASES[name]
    inputs = keras.Input(case["shape"])
    layer = make_layer(seed=3, **case["layer"])
    hidden = layer(inputs, inputs, **case["call"])
    outputs = keras.layers.Dense(2)(hidden)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse", jit_compile=True)
    rng = np.random.default_rng(12)
    x = rng.normal(size=(16,) + case["shape"]).astype("float32")
    y = rng.normal(size=(16,) + case["shape"][:-1] + (2,)).astype("float32")
    before = [np.array(w) for w in layer.get_weights()]
    history = model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    losses = history.history["loss"]
    assert len(losses) == 2 and np.isfinite(losses).all()
    after = layer.get_weights()
    assert all(np.isfinite(w).all() for w in after)
    # Every trainable weight of the layer (MLP ones included) was updated,
    # except maybe the key bias: with parameter-free keys it shifts all logits
    # of a query equally, so its gradient is zero up to round-off.
    unchanged = [
        w.path
        for w, a, b in zip(layer.weights, before, after)
        if np.array_equal(a, b) and not w.path.endswith("key/bias")
    ]
    assert not unchanged, unchanged


def _fit_once(implementation, x, y, mask, **layer_kwargs):
    keras.utils.set_random_seed(4)
    inputs = keras.Input(x.shape[1:])
    padding = keras.Input(mask.shape[1:], dtype="bool")
    layer = make_layer(
        seed=3,
        max_area_width=2,
        max_area_height=2,
        memory_height=3,
        area_implementation=implementation,
        **layer_kwargs,
    )
    hidden = layer(inputs, inputs, value_mask=padding, use_causal_mask=True)
    model = keras.Model([inputs, padding], keras.layers.Dense(2)(hidden))
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse", jit_compile=True)
    before = [np.array(w) for w in model.get_weights()]
    model.fit([x, mask], y, batch_size=4, epochs=1, verbose=0)
    return before, [np.array(w) for w in model.get_weights()]


@pytest.mark.skipif(
    keras.backend.backend() != "jax", reason="the Pallas kernel is JAX code"
)
def test_fused_kernel_trains_like_the_fast_path():
    """One compiled training step through the fused kernel (interpret mode
    on CPU) lands on the fast path's weights: forward and backward agree."""
    rng = np.random.default_rng(8)
    x = rng.normal(size=(4, 12, DIM)).astype("float32")
    y = rng.normal(size=(4, 12, 2)).astype("float32")
    mask = np.ones((4, 12), bool)
    mask[1, 7:] = False
    initial, fast = _fit_once("fast", x, y, mask)
    _, fused = _fit_once("fused", x, y, mask)
    moved = False
    for a, b, start in zip(fast, fused, initial):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
        moved = moved or not np.allclose(a, start)
    assert moved


@pytest.mark.parametrize("key_mode", ["mean", "concat"])
def test_stacked_core_trains_like_the_fast_path(key_mode, monkeypatch):
    """One compiled training step with the area memory stacked through
    `ops.dot_product_attention` (2-D areas, causal and padding masks, with
    fully masked rows) lands on the fast path's weights; the learned
    (concat) keys take the stacked path too."""
    rng = np.random.default_rng(9)
    x = rng.normal(size=(4, 12, DIM)).astype("float32")
    y = rng.normal(size=(4, 12, 2)).astype("float32")
    mask = np.ones((4, 12), bool)
    mask[1, 7:] = False
    mask[2, :] = False  # nothing to attend in the whole sequence
    initial, fast = _fit_once("fast", x, y, mask, area_key_mode=key_mode)
    calls = []
    original = attend_areas._stacked_attention
    monkeypatch.setattr(
        attend_areas,
        "_stacked_attention",
        lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs),
    )
    _, stacked = _fit_once("stacked", x, y, mask, area_key_mode=key_mode)
    assert calls
    moved = False
    for a, b, start in zip(fast, stacked, initial):
        assert np.isfinite(b).all()
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
        moved = moved or not np.allclose(a, start)
    assert moved


@pytest.mark.skipif(keras.backend.backend() == "jax", reason="checks the non-JAX error")
def test_fused_implementation_needs_jax():
    layer = make_layer(max_area_width=2, area_implementation="fused")
    x = np.zeros((1, 4, DIM), "float32")
    with pytest.raises(ValueError, match="needs the JAX backend"):
        layer(x, x)
    auto = make_layer(max_area_width=2, area_implementation="auto")
    assert auto(x, x).shape == (1, 4, DIM)


@pytest.mark.parametrize(
    "layer_kwargs",
    [
        dict(max_area_width=3, dropout=0.5),
        dict(max_area_width=2, dropout=0.5, area_key_mode="concat"),
        dict(max_area_width=2, dropout=0.5, area_implementation="direct", area_value_mode="max"),
    ],
)
def test_dropout_draws_and_seed(layer_kwargs):
    rng = np.random.default_rng(13)
    x = normal(rng, 2, 6, DIM)
    layer = make_layer(seed=21, **layer_kwargs)
    layer(x, x)
    randomize(layer, 13)
    twin = make_layer(seed=21, **layer_kwargs)
    twin(x, x)
    twin.set_weights(layer.get_weights())
    other_seed = make_layer(seed=22, **layer_kwargs)
    other_seed(x, x)
    other_seed.set_weights(layer.get_weights())
    no_dropout = make_layer(**dict(layer_kwargs, dropout=0.0))
    no_dropout(x, x)
    no_dropout.set_weights(layer.get_weights())

    reference = to_np(no_dropout(x, x))
    # Inference: no dropout, deterministic.
    np.testing.assert_allclose(to_np(layer(x, x, training=False)), reference, atol=1e-6)
    np.testing.assert_allclose(to_np(layer(x, x)), reference, atol=1e-6)
    # Training: draws differ from inference and from call to call.
    first = to_np(layer(x, x, training=True))
    second = to_np(layer(x, x, training=True))
    assert np.isfinite(first).all() and np.isfinite(second).all()
    assert np.abs(first - reference).max() > 1e-4
    assert np.abs(first - second).max() > 1e-4
    # The seed makes the draws reproducible; another seed draws differently.
    np.testing.assert_allclose(to_np(twin(x, x, training=True)), first, atol=1e-6)
    assert np.abs(to_np(other_seed(x, x, training=True)) - first).max() > 1e-4


@pytest.mark.parametrize("key_mode", ["sample", "sample_concat", "sample_sum"])
def test_sample_modes_draw_noise_only_when_training(key_mode):
    rng = np.random.default_rng(14)
    x = normal(rng, 2, 6, DIM)
    layer = make_layer(max_area_width=3, area_key_mode=key_mode, seed=5)
    layer(x, x)
    randomize(layer, 14, scale=0.3)
    inference = to_np(layer(x, x))
    np.testing.assert_allclose(to_np(layer(x, x, training=False)), inference, atol=1e-6)
    first = to_np(layer(x, x, training=True))
    second = to_np(layer(x, x, training=True))
    assert np.abs(first - inference).max() > 1e-4
    assert np.abs(first - second).max() > 1e-4
    if key_mode == "sample":
        # At inference `sample` keys are the mean keys.
        mean = make_layer(max_area_width=3)
        mean(x, x)
        mean.set_weights(layer.get_weights())
        np.testing.assert_allclose(to_np(mean(x, x)), inference, atol=1e-6)


def test_global_seed_makes_initialisation_deterministic():
    def build():
        layer = make_layer(max_area_width=2, area_key_mode="concat", seed=4)
        layer.build((2, 6, DIM), (2, 6, DIM))
        return layer.get_weights()

    keras.utils.set_random_seed(123)
    first = build()
    keras.utils.set_random_seed(123)
    second = build()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    # Kernels are not all alike (each sublayer clones its initialiser).
    kernels = [w for w in first if w.ndim >= 2 and w.shape[0] == DIM]
    assert not np.array_equal(kernels[0], kernels[1])


# ---------------------------------------------------------------------------
# Mixed precision
# ---------------------------------------------------------------------------

MIXED_CASES = {
    "1d_mean_fast_causal_padding": dict(
        S=6, max_w=3, query="self", causal=True, value_mask=True
    ),
    "1d_max_keys_max_values_direct": dict(
        S=6, max_w=2, query=4, key_mode="max", value_mode="max", value_mask=True,
        implementation="direct",
    ),
    "1d_concat_cross": dict(S=6, max_w=2, query=4, key_mode="concat", value_mask=True),
    "2d_grid_sum_mlp_causal": dict(
        S=6, H=2, max_w=2, max_h=2, layout="grid", query="self", key_mode="sum",
        causal=True,
    ),
    "2d_flat_mean_values_attention_mask": dict(
        S=6, H=2, max_w=2, max_h=2, layout="flat", query=4, value_mode="mean",
        attention_mask=True,
    ),
}


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("name", list(MIXED_CASES))
def test_mixed_precision_close_to_float32(name, policy):
    case = MIXED_CASES[name]
    rng = np.random.default_rng(15)
    layer_kwargs, query_in, memory_in, call, _, _, _, _ = _reference_inputs(case, rng)
    layer_kwargs["area_implementation"] = case.get("implementation", "fast")
    full = make_layer(**layer_kwargs)
    full(query_in, memory_in, **call)
    randomize(full, 15, scale=0.3)
    mixed = make_layer(dtype=policy, **layer_kwargs)
    mixed(query_in, memory_in, **call)
    mixed.set_weights(full.get_weights())
    assert mixed.compute_dtype == policy.split("_")[1]
    assert all(dtype_name(w) == "float32" for w in mixed.weights)

    expected, expected_scores = full(query_in, memory_in, return_attention_scores=True, **call)
    got, scores = mixed(query_in, memory_in, return_attention_scores=True, **call)
    assert dtype_name(got) == mixed.compute_dtype
    assert dtype_name(scores) == "float32"  # scores are float32 in every layer
    got, scores = to_np(got), to_np(scores)
    expected, expected_scores = to_np(expected), to_np(expected_scores)
    assert np.isfinite(got).all() and np.isfinite(scores).all()
    tolerance = 0.03 if policy == "mixed_float16" else 0.1
    scale = max(1.0, np.abs(expected).max())
    np.testing.assert_allclose(got, expected, atol=tolerance * scale, rtol=0)
    np.testing.assert_allclose(scores, expected_scores, atol=tolerance)
    # The tolerance is tight enough to tell attention from no attention.
    bias = bias_only(full, expected.shape[:-1])
    assert np.abs(expected - bias).max() > 3 * tolerance * scale


# ---------------------------------------------------------------------------
# Attention scores, area coordinates, top-k, query_mask
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("implementation", ["fast", "direct"])
def test_scores_are_distributions_over_areas(implementation):
    rng = np.random.default_rng(17)
    query = normal(rng, 2, 4, DIM)
    memory = normal(rng, 2, 12, DIM)
    attention_mask = rng.random((2, 4, 12)) < 0.8
    attention_mask[1, 3] = False
    layer = make_layer(
        max_area_width=2, max_area_height=2, memory_height=3,
        area_implementation=implementation,
    )
    _, scores = layer(query, memory, attention_mask=attention_mask, return_attention_scores=True)
    scores = to_np(scores)
    assert scores.shape == (2, NUM_HEADS, 4, 35)
    assert (scores >= 0).all()
    sums = scores.sum(-1)
    allowed = attention_mask.any(-1)  # an allowed item is an allowed 1x1 area
    rows = np.broadcast_to(allowed[:, None, :], sums.shape)
    np.testing.assert_allclose(sums[rows], 1.0, atol=1e-5)
    assert (sums[1, :, 3] == 0).all()
    # A masked item masks every area containing it.
    coords = layer.area_coordinates()
    for b in range(2):
        for t in range(4):
            for a, (r, c, h, w) in enumerate(coords):
                items = [(r + i) * 4 + c + j for i in range(h) for j in range(w)]
                if not attention_mask[b, t, items].all():
                    assert (scores[b, :, t, a] == 0).all()


def test_area_coordinates_and_counts():
    layer = make_layer(max_area_width=2, max_area_height=2)
    layer.build((2, 3, 4, DIM), (2, 3, 4, DIM))
    coords = layer.area_coordinates()
    rows, cols = paper_count(3, 2), paper_count(4, 2)
    assert coords.shape == (rows * cols, 4) == (35, 4)
    expected = np.array([area for area, _ in ref_areas(12, 3, 2, 2)])
    np.testing.assert_array_equal(coords, expected)
    # The flattened form gives the same areas.
    flat = make_layer(max_area_width=2, max_area_height=2, memory_height=3)
    flat.build((2, 12, DIM), (2, 12, DIM))
    np.testing.assert_array_equal(flat.area_coordinates(), coords)
    # 1-D: the paper's count, and areas wider than the memory add none.
    for length, width in [(7, 3), (5, 5), (4, 6)]:
        line = make_layer(max_area_width=width)
        assert line.area_coordinates(memory_length=length).shape == (
            paper_count(length, width), 4,
        )
    # Another length than the built one can be asked for.
    assert layer.area_coordinates(memory_length=6).shape == (
        paper_count(3, 2) * paper_count(2, 2), 4,
    )


def test_scores_follow_area_coordinates_under_causal_mask():
    # With a causal mask, query t may attend area (0, c, 1, w) iff c + w - 1 <= t:
    # checks that the score axis is in area_coordinates order.
    rng = np.random.default_rng(18)
    x = normal(rng, 2, 6, DIM)
    layer = make_layer(max_area_width=3)
    _, scores = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    scores = to_np(scores)
    coords = layer.area_coordinates()
    allowed = coords[:, 1][None, :] + coords[:, 3][None, :] - 1 <= np.arange(6)[:, None]
    assert ((scores > 0) == allowed[None, None]).all()


@pytest.mark.parametrize(
    "key_mode,implementation,k",
    # (max keys are left out: two areas around one dominant item can share
    # the same max key, a genuine tie that keeps both)
    [
        ("mean", "fast", 1),
        ("mean", "direct", 3),
        ("concat", "fast", 3),
        ("concat", "direct", 1),
        ("mean", "fast", 100),  # more than there are areas: keeps them all
    ],
)
def test_top_k_areas(key_mode, implementation, k):
    rng = np.random.default_rng(19)
    query = normal(rng, 2, 4, DIM)
    memory = normal(rng, 2, 6, DIM)
    value_mask = np.ones((2, 6), bool)
    value_mask[1, 5] = False
    kwargs = dict(max_area_width=3, area_key_mode=key_mode, area_implementation=implementation)
    full = make_layer(**kwargs)
    full(query, memory)
    randomize(full, 19, scale=0.4)
    top = make_layer(top_k_areas=k, **kwargs)
    top(query, memory)
    top.set_weights(full.get_weights())
    _, weights = full(query, memory, value_mask=value_mask, return_attention_scores=True)
    out, kept = top(query, memory, value_mask=value_mask, return_attention_scores=True)
    weights, kept = to_np(weights), to_np(kept)
    assert ((kept > 0).sum(-1) <= k).all()
    # Random data has no ties: exactly k areas (or all allowed ones) remain.
    allowed = (weights > 0).sum(-1)
    assert ((kept > 0).sum(-1) == np.minimum(k, allowed)).all()
    np.testing.assert_allclose(kept.sum(-1), 1.0, atol=1e-5)
    expected = np.apply_along_axis(lambda row: ref_top_k(row[None], k)[0], -1, weights)
    np.testing.assert_allclose(kept, expected, atol=1e-5)
    # The output uses the kept weights: it is not the full softmax's output
    # unless every area is kept.
    full_out = to_np(full(query, memory, value_mask=value_mask))
    if k >= weights.shape[-1]:
        np.testing.assert_allclose(to_np(out), full_out, atol=1e-5, rtol=1e-5)
    else:
        assert np.abs(to_np(out) - full_out).max() > 1e-4


@pytest.mark.parametrize("layout", ["1d", "grid"])
def test_explicit_query_mask_is_honoured(layout):
    rng = np.random.default_rng(20)
    if layout == "1d":
        x = normal(rng, 2, 6, DIM)
        query_mask = np.ones((2, 6), bool)
        query_mask[0, 1] = query_mask[1, 4:] = False
        layer = make_layer(max_area_width=2)
    else:
        x = normal(rng, 2, 2, 3, DIM)
        query_mask = np.ones((2, 2, 3), bool)
        query_mask[0, 0, 1] = query_mask[1, 1] = False
        layer = make_layer(max_area_width=2, max_area_height=2)
    layer(x, x)
    randomize(layer, 20)
    unmasked = to_np(layer(x, x))
    out = to_np(layer(x, x, query_mask=query_mask))
    assert np.isfinite(out).all()
    np.testing.assert_allclose(
        out[~query_mask], bias_only(layer, (int((~query_mask).sum()),)), atol=1e-6
    )
    np.testing.assert_allclose(out[query_mask], unmasked[query_mask], atol=1e-6)
    assert np.abs(unmasked[~query_mask] - out[~query_mask]).max() > 1e-3


def test_keras_masks_are_read_and_propagated():
    # An Embedding(mask_zero=True) mask reaches the layer as query and value
    # masks (Layer.__call__ fills `query_mask`/`value_mask`), and the query
    # mask is set on the output.
    ids = keras.Input((6,), dtype="int32")
    embedding = keras.layers.Embedding(10, DIM, mask_zero=True)
    layer = make_layer(max_area_width=2)
    embedded = embedding(ids)
    output = layer(embedded, embedded)
    assert getattr(output, "_keras_mask", None) is not None
    assert tuple(output._keras_mask.shape) == (None, 6)
    model = keras.Model(ids, output)
    data = np.array([[1, 2, 3, 0, 0, 0], [4, 5, 6, 7, 8, 9]], "int32")
    randomize(layer, 22)
    got = to_np(model(data))
    embedded = ops.convert_to_numpy(embedding(data))
    mask = data != 0
    expected = to_np(layer(embedded, embedded, query_mask=mask, value_mask=mask))
    np.testing.assert_allclose(got, expected, atol=1e-6)
    unmasked = to_np(layer(embedded, embedded))
    assert np.abs(got[0, :3] - unmasked[0, :3]).max() > 1e-4


# ---------------------------------------------------------------------------
# Argument validation
# ---------------------------------------------------------------------------

BAD_CONSTRUCTOR_ARGS = [
    (dict(max_area_width=0), "max_area_width"),
    (dict(max_area_width=1.5), "max_area_width"),
    (dict(max_area_height=0), "max_area_height"),
    (dict(max_area_height=-2), "max_area_height"),
    (dict(memory_height=0), "memory_height"),
    (dict(area_key_mode="median"), "area_key_mode"),
    (dict(area_value_mode="min"), "area_value_mode"),
    (dict(area_implementation="slow"), "area_implementation"),
    (dict(area_key_mode="sum", key_dim=5), "key_dim"),
    (dict(area_key_mode="sample_sum", key_dim=3), "key_dim"),
    (dict(area_temperature=0.0), "area_temperature"),
    (dict(area_temperature=-1.0), "area_temperature"),
    (dict(top_k_areas=-1), "top_k_areas"),
    (dict(attention_axes=(2,)), "attention_axes"),
    # Flash attention (Keras MHA's) needs 1x1 areas with a plain key.
    (dict(flash_attention=True, max_area_width=2), "flash_attention"),
    (dict(flash_attention=True, max_area_height=2, memory_height=2), "flash_attention"),
    (dict(flash_attention=True, area_key_mode="concat"), "flash_attention"),
    *REFUSED_MHA_ARGUMENTS,
]


@pytest.mark.parametrize(
    "kwargs,name",
    BAD_CONSTRUCTOR_ARGS,
    ids=[f"{n}-{i}" for i, (_, n) in enumerate(BAD_CONSTRUCTOR_ARGS)],
)
def test_bad_constructor_arguments_raise(kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_layer(**kwargs)


def test_good_edge_arguments_are_accepted():
    # The values next to the invalid ones work.
    for kwargs in (
        dict(area_key_mode="sum", key_dim=6),
        dict(area_temperature=1e-3),
        dict(top_k_areas=0),
        dict(attention_axes=(1,)),
        dict(attention_axes=[1]),
        dict(flash_attention=False),
        dict(flash_attention=True),  # 1x1 areas: Keras MHA's flash attention
    ):
        make_layer(**kwargs)


def test_memory_length_not_divisible_by_memory_height_raises():
    x = np.zeros((1, 7, DIM), "float32")
    layer = make_layer(memory_height=2, max_area_width=2)
    with pytest.raises(ValueError, match="memory_height"):
        layer(x, x)
    symbolic = make_layer(memory_height=3)
    with pytest.raises(ValueError, match="memory_height"):
        symbolic(keras.Input((4, DIM)), keras.Input((8, DIM)))


def test_grid_memory_conflicting_memory_height_raises():
    x = np.zeros((1, 2, 3, DIM), "float32")
    with pytest.raises(ValueError, match="memory_height"):
        make_layer(memory_height=3)(x, x)


@pytest.mark.parametrize("which", ["query", "value"])
def test_wrong_rank_inputs_raise(which):
    good = np.zeros((1, 4, DIM), "float32")
    bad = np.zeros((1, 2, 2, 1, DIM), "float32")
    args = (bad, good) if which == "query" else (good, bad)
    with pytest.raises(ValueError, match=which):
        make_layer()(*args)


def test_fit_on_batches_of_different_lengths():
    """`model.fit` relaxes the traced shapes to unknown lengths once batches
    of several lengths arrive (TensorFlow's `reduce_retracing`): the 1-D fast
    path must work with a memory length that is unknown at trace time."""
    inputs = keras.Input((None, DIM))
    layer = make_layer(seed=4, max_area_width=3, dropout=0.1)
    hidden = layer(inputs, inputs, use_causal_mask=True)
    model = keras.Model(inputs, keras.layers.Dense(2)(hidden))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse", jit_compile=True)
    rng = np.random.default_rng(13)

    def batches():
        for length in (4, 7, 2, 9, 5, 7):
            x = rng.normal(size=(3, length, DIM)).astype("float32")
            yield x, rng.normal(size=(3, length, 2)).astype("float32")

    losses = [model.train_on_batch(x, y) for x, y in batches()]
    assert np.isfinite(losses).all()
    assert all(np.isfinite(w).all() for w in layer.get_weights())
