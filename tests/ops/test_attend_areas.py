"""`area_attention` against the brute-force reference, fast vs direct paths,
properties, gradients, argument checks, mixed precision and jit."""

import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from keras import backend
from keras import ops

from keras_structattn.ops import area_attention
from keras_structattn.ops import area_coordinates
from keras_structattn.ops import area_features
from keras_structattn.ops import area_keys
from keras_structattn.ops import attend_to_areas
from keras_structattn.ops import num_areas
from tests import reference as ref
from tests._backend import compiled_on_jax
from tests._backend import compiles_per_shape
from tests._backend import gradients
from tests._backend import jit
from tests._backend import to_numpy

PROPERTY_SETTINGS = settings(max_examples=25, deadline=None)

KEY_MODES = ["mean", "max", "sample"]
VALUE_MODES = ["sum", "mean", "max"]
IMPLEMENTATIONS = ["fast", "direct"]

# Canonical shapes (kept few so that compiled kernels are reused).
B, N, LQ, D, DV = 2, 2, 5, 4, 3

# name -> (length, memory_height, max_area_width, max_area_height)
LAYOUTS = {
    "1d": (7, 1, 3, 1),
    "2d": (12, 3, 3, 2),  # a 3 x 4 grid; areas up to 2 rows x 3 columns
}
MASKS = ["none", "padding", "causal", "random", "rows"]


def _kw(layout):
    length, memory_height, max_w, max_h = layout
    return dict(
        memory_height=memory_height, max_area_width=max_w, max_area_height=max_h
    )


def make_inputs(rng, batch, heads, q_len, length, depth=D, depth_v=DV, scale=0.7):
    q = (scale * rng.standard_normal((batch, heads, q_len, depth))).astype("float32")
    k = rng.standard_normal((batch, heads, length, depth)).astype("float32")
    v = rng.standard_normal((batch, heads, length, depth_v)).astype("float32")
    return q, k, v


def make_mask(kind, rng, batch, heads, q_len, length):
    """Boolean masks, True = may attend."""
    if kind == "none":
        return None
    if kind == "padding":  # [B, 1, 1, L]: sequence b has L - 1 - 2b valid items
        valid = np.array([max(length - 1 - 2 * b, 0) for b in range(batch)])
        return (np.arange(length)[None, :] < valid[:, None])[:, None, None, :]
    if kind == "causal":  # [1, 1, L, L]; raster order in 2-D
        assert q_len == length
        return np.tril(np.ones((length, length), bool))[None, None]
    if kind == "random":  # [B, N, Lq, L] with one fully masked row
        mask = rng.random((batch, heads, q_len, length)) < 0.8
        mask[0, heads - 1, q_len // 2, :] = False
        return mask
    if kind == "rows":  # [B, 1, Lq, 1]: query rows switched off entirely
        mask = np.ones((batch, 1, q_len, 1), bool)
        mask[batch - 1, 0, 0, 0] = False
        mask[0, 0, q_len - 1, 0] = False
        return mask
    raise ValueError(kind)


def assert_close_to_reference(out, weights, expected_out, expected_w, atol=1e-5):
    out, weights = to_numpy(out), to_numpy(weights)
    assert np.isfinite(out).all() and np.isfinite(weights).all()
    assert weights.shape == expected_w.shape
    assert out.shape == expected_out.shape
    np.testing.assert_allclose(weights, expected_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out, expected_out, rtol=1e-5, atol=atol)


def empty_rows(mask, shape, layout):
    """Rows `[B, N, Lq]` in which no area is allowed (reference area mask)."""
    if mask is None:
        return np.zeros(shape[:3], bool)
    length = layout[0]
    full = np.broadcast_to(mask, shape[:3] + (length,))
    allowed = ref.area_mask_reference(full, length=length, **_kw(layout))
    return ~allowed.any(axis=-1)


# --------------------------------------------------------------------------
# Against the reference: every key mode x value mode x implementation
# --------------------------------------------------------------------------


@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("layout_name", list(LAYOUTS))
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("value_mode", VALUE_MODES)
@pytest.mark.parametrize("key_mode", KEY_MODES)
def test_matches_reference(key_mode, value_mode, implementation, layout_name, mask_kind):
    layout = LAYOUTS[layout_name]
    length = layout[0]
    rng = np.random.default_rng(zlib.crc32(f"{layout_name}/{mask_kind}".encode()))
    q_len = length if mask_kind == "causal" else LQ
    q, k, v = make_inputs(rng, B, N, q_len, length)
    mask = make_mask(mask_kind, rng, B, N, q_len, length)
    kw = dict(_kw(layout), key_mode=key_mode, value_mode=value_mode)

    out, weights = area_attention(
        q, k, v, mask, implementation=implementation, return_weights=True, **kw
    )
    out_only = area_attention(q, k, v, mask, implementation=implementation, **kw)
    expected_out, expected_w = ref.area_attention_reference(q, k, v, mask, **kw)

    assert tuple(weights.shape) == (B, N, q_len, num_areas(length, **_kw(layout)))
    assert_close_to_reference(out, weights, expected_out, expected_w)
    np.testing.assert_allclose(to_numpy(out_only), expected_out, rtol=1e-5, atol=1e-5)
    # Rows without an attendable area are exactly zero.
    empty = empty_rows(mask, q.shape, layout)
    if mask_kind in ("random", "rows"):
        assert empty.any()
    assert (to_numpy(out)[empty] == 0).all()
    assert (to_numpy(out_only)[empty] == 0).all()
    assert (to_numpy(weights)[empty] == 0).all()


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("key_mode", ["mean", "max"])
def test_causal_2d_attends_only_areas_before_the_query(key_mode, implementation):
    # Raster-order causality, checked structurally with area_coordinates: a
    # query at position t gives weight only to areas whose last item (bottom
    # right corner) is at a raster position <= t.
    length, memory_height, max_w, max_h = layout = LAYOUTS["2d"]
    width = length // memory_height
    rng = np.random.default_rng(11)
    q, k, v = make_inputs(rng, B, N, length, length)
    mask = make_mask("causal", rng, B, N, length, length)
    _, weights = area_attention(
        q, k, v, mask, key_mode=key_mode, implementation=implementation,
        return_weights=True, **_kw(layout),
    )
    weights = to_numpy(weights)
    coords = area_coordinates(length, memory_height, max_w, max_h)
    last_item = (coords[:, 0] + coords[:, 2] - 1) * width + coords[:, 1] + coords[:, 3] - 1
    for t in range(length):
        visible = last_item <= t
        assert (weights[:, :, t, ~visible] == 0).all()
        assert (weights[:, :, t, visible] > 0).all()
        np.testing.assert_allclose(weights[:, :, t].sum(-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("value_mode", VALUE_MODES)
def test_all_masked_gives_zeros_not_nan(value_mode, implementation):
    length, memory_height, max_w, max_h = layout = LAYOUTS["1d"]
    rng = np.random.default_rng(12)
    q, k, v = make_inputs(rng, B, N, LQ, length)
    # Every area of row (1, 0, 2) contains a masked item even though most
    # items are allowed: area-level emptiness, not item-level.
    mask = np.ones((B, N, LQ, length), bool)
    mask[1, 0, 2, :] = False
    mask[0, 1, 1, ::2] = False  # only singletons at odd positions remain
    mask[:, :, 4] = False
    for key_mode in KEY_MODES:
        out, weights = area_attention(
            q, k, v, mask, key_mode=key_mode, value_mode=value_mode,
            implementation=implementation, return_weights=True, **_kw(layout),
        )
        out, weights = to_numpy(out), to_numpy(weights)
        assert np.isfinite(out).all() and np.isfinite(weights).all()
        assert (out[1, 0, 2] == 0).all() and (weights[1, 0, 2] == 0).all()
        assert (out[:, :, 4] == 0).all() and (weights[:, :, 4] == 0).all()
        coords = area_coordinates(length, memory_height, max_w, max_h)
        singles_odd = (coords[:, 3] == 1) & (coords[:, 1] % 2 == 1)
        assert (weights[0, 1, 1, ~singles_odd] == 0).all()
        np.testing.assert_allclose(weights[0, 1, 1, singles_odd].sum(), 1, rtol=1e-6)
    # Everything masked.
    out = area_attention(
        q, k, v, np.zeros((1, 1, 1, length), bool), value_mode=value_mode,
        implementation=implementation, **_kw(layout),
    )
    assert (to_numpy(out) == 0).all()


def test_float_mask_is_like_boolean_mask():
    layout = LAYOUTS["2d"]
    rng = np.random.default_rng(13)
    q, k, v = make_inputs(rng, B, N, LQ, layout[0])
    mask = make_mask("random", rng, B, N, LQ, layout[0])
    expected = area_attention(q, k, v, mask, **_kw(layout))
    got = area_attention(q, k, v, mask.astype("float32"), **_kw(layout))
    np.testing.assert_array_equal(to_numpy(got), to_numpy(expected))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("shape", [(1, 1, 2, 5), (1, 1, 1, 2, 6)], ids=["length", "rank"])
def test_mask_with_wrong_shape_raises(shape, implementation):
    rng = np.random.default_rng(14)
    q, k, v = make_inputs(rng, 1, 1, 2, 6)
    with pytest.raises(ValueError, match="mask"):
        area_attention(
            q, k, v, np.ones(shape, bool), max_area_width=2, implementation=implementation
        )


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("key_mode", ["mean", "max"])
@pytest.mark.parametrize("temperature", [0.3, 2.5])
def test_temperature_matches_reference(temperature, key_mode, implementation):
    layout = LAYOUTS["2d"]
    rng = np.random.default_rng(15)
    q, k, v = make_inputs(rng, B, N, LQ, layout[0])
    mask = make_mask("random", rng, B, N, LQ, layout[0])
    kw = dict(_kw(layout), key_mode=key_mode, temperature=temperature)
    out, weights = area_attention(
        q, k, v, mask, implementation=implementation, return_weights=True, **kw
    )
    assert_close_to_reference(out, weights, *ref.area_attention_reference(q, k, v, mask, **kw))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("value_mode", VALUE_MODES)
@pytest.mark.parametrize("top_k", [1, 3, 1000])
def test_top_k_matches_reference(top_k, value_mode, implementation):
    layout = LAYOUTS["1d"]
    rng = np.random.default_rng(16)
    q, k, v = make_inputs(rng, B, N, LQ, layout[0])
    mask = make_mask("random", rng, B, N, LQ, layout[0])
    kw = dict(_kw(layout), value_mode=value_mode, top_k_areas=top_k)
    out, weights = area_attention(
        q, k, v, mask, implementation=implementation, return_weights=True, **kw
    )
    expected_out, expected_w = ref.area_attention_reference(q, k, v, mask, **kw)
    assert_close_to_reference(out, weights, expected_out, expected_w)
    out_only = area_attention(q, k, v, mask, implementation=implementation, **kw)
    np.testing.assert_allclose(to_numpy(out_only), expected_out, rtol=1e-5, atol=1e-5)
    if top_k == 1:
        # No ties in random data: one area per non-empty row.
        nonzero = (to_numpy(weights) > 0).sum(-1)
        assert set(np.unique(nonzero)) <= {0, 1}


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_top_k_keeps_ties(implementation):
    # Max keys of items [3, 1, 0, 0] with widths 1..2 give the area keys
    # [3, 1, 0, 0 | 3, 1, 0]; with q = 1 the logits are exactly tied in pairs.
    k = np.array([3.0, 1.0, 0.0, 0.0], "float32").reshape(1, 1, 4, 1)
    q = np.ones((1, 1, 1, 1), "float32")
    v = np.arange(8, dtype="float32").reshape(1, 1, 4, 2)
    for top_k, kept in [(1, 2), (2, 2), (3, 4), (4, 4), (5, 7)]:
        kw = dict(max_area_width=2, key_mode="max", top_k_areas=top_k)
        out, weights = area_attention(
            q, k, v, implementation=implementation, return_weights=True, **kw
        )
        expected_out, expected_w = ref.area_attention_reference(q, k, v, **kw)
        assert (expected_w > 0).sum() == kept
        assert (to_numpy(weights) > 0).sum() == kept, top_k
        assert_close_to_reference(out, weights, expected_out, expected_w)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_top_k_with_uniform_weights_keeps_everything(implementation):
    # q = 0: every area logit is exactly 0, all weights tie.
    layout = LAYOUTS["2d"]
    rng = np.random.default_rng(17)
    _, k, v = make_inputs(rng, B, N, LQ, layout[0])
    q = np.zeros((B, N, LQ, D), "float32")
    kw = dict(_kw(layout), top_k_areas=1)
    out, weights = area_attention(
        q, k, v, implementation=implementation, return_weights=True, **kw
    )
    count = num_areas(layout[0], **_kw(layout))
    np.testing.assert_allclose(to_numpy(weights), 1.0 / count, rtol=1e-6)
    assert_close_to_reference(out, weights, *ref.area_attention_reference(q, k, v, **kw))


def test_sample_key_mode_without_training_is_mean():
    layout = LAYOUTS["2d"]
    rng = np.random.default_rng(18)
    q, k, v = make_inputs(rng, B, N, LQ, layout[0])
    for implementation in IMPLEMENTATIONS:
        sample = area_attention(
            q, k, v, key_mode="sample", implementation=implementation, seed=1, **_kw(layout)
        )
        mean = area_attention(
            q, k, v, key_mode="mean", implementation=implementation, **_kw(layout)
        )
        np.testing.assert_allclose(to_numpy(sample), to_numpy(mean), rtol=1e-5, atol=1e-6)


def test_sample_key_mode_training_adds_std_scaled_normal_noise():
    # area_keys(sample, training) = mean + std * N(0, 1): the standardised
    # noise must look standard normal (8 draws of 720 area-key entries).
    layout = LAYOUTS["2d"]
    rng = np.random.default_rng(19)
    _, key, _ = make_inputs(rng, B, N, LQ, layout[0])
    feats = area_features(key, **_kw(layout))
    mean, std = to_numpy(feats["mean"]), to_numpy(feats["std"])
    z = np.stack([
        (to_numpy(area_keys(key, "sample", training=True, seed=s, **_kw(layout))) - mean) / std
        for s in range(8)
    ])
    assert np.isfinite(z).all()
    assert abs(z.mean()) < 0.06
    assert abs(z.std() - 1.0) < 0.05
    # Different seeds give different noise.
    assert np.abs(z[0] - z[1]).max() > 0.5
    # Without training: exactly the mean; max mode: exactly the max.
    np.testing.assert_allclose(
        to_numpy(area_keys(key, "sample", training=False, **_kw(layout))),
        to_numpy(feats["mean"]),
        rtol=1e-6,
    )
    np.testing.assert_array_equal(
        to_numpy(area_keys(key, "max", **_kw(layout)), "float32"),
        ref.area_features_reference(key, **_kw(layout))["max"],
    )
    # And attention with noisy keys differs from mean keys but stays finite.
    q, k, v = make_inputs(rng, B, N, LQ, layout[0])
    noisy_out = to_numpy(
        area_attention(q, k, v, key_mode="sample", training=True, seed=4, **_kw(layout))
    )
    mean_out = to_numpy(area_attention(q, k, v, key_mode="mean", **_kw(layout)))
    assert np.isfinite(noisy_out).all()
    assert np.abs(noisy_out - mean_out).max() > 1e-3


def test_attend_to_areas_with_mean_area_keys_is_mean_mode():
    layout = LAYOUTS["2d"]
    rng = np.random.default_rng(20)
    q, k, v = make_inputs(rng, B, N, LQ, layout[0])
    mask = make_mask("random", rng, B, N, LQ, layout[0])
    keys = area_features(k, features=("mean",), **_kw(layout))["mean"]
    expected_out, expected_w = ref.area_attention_reference(q, k, v, mask, **_kw(layout))
    for implementation in IMPLEMENTATIONS:
        out, weights = attend_to_areas(
            q, keys, v, mask, implementation=implementation, return_weights=True,
            **_kw(layout),
        )
        assert_close_to_reference(out, weights, expected_out, expected_w)


def test_attend_to_areas_rejects_wrong_area_count():
    rng = np.random.default_rng(20)
    q, k, v = make_inputs(rng, 1, 1, 2, 6)
    area_key = np.zeros((1, 1, num_areas(6, 1, 2) + 1, D), "float32")
    with pytest.raises(ValueError, match="area_key"):
        attend_to_areas(q, area_key, v, max_area_width=2)


def test_length_one_memory_and_single_query():
    rng = np.random.default_rng(21)
    q, k, v = make_inputs(rng, 1, 1, 1, 1)
    for implementation in IMPLEMENTATIONS:
        out, weights = area_attention(
            q, k, v, max_area_width=3, max_area_height=2, implementation=implementation,
            return_weights=True,
        )
        np.testing.assert_allclose(to_numpy(weights), [[[[1.0]]]])
        np.testing.assert_allclose(to_numpy(out), v, rtol=1e-6)


# --------------------------------------------------------------------------
# Dropout
# --------------------------------------------------------------------------


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_dropout_only_in_training_and_unbiased(implementation):
    layout = LAYOUTS["1d"]
    rng = np.random.default_rng(22)
    q, k, v = make_inputs(rng, 1, 1, 2, layout[0])
    mask = np.ones((1, 1, 2, layout[0]), bool)
    mask[0, 0, 1] = False  # an empty row stays zero under dropout
    kw = dict(_kw(layout), implementation=implementation)
    plain = to_numpy(area_attention(q, k, v, mask, **kw))
    not_training = area_attention(q, k, v, mask, dropout_rate=0.5, training=False, **kw)
    np.testing.assert_array_equal(to_numpy(not_training), plain)
    # Inverted dropout keeps the expectation: average many independent draws
    # (copies along the batch axis).
    copies = 2000
    tile = lambda x: np.repeat(x, copies, axis=0)  # noqa: E731
    dropped = compiled_on_jax(
        lambda *a: area_attention(*a, dropout_rate=0.3, training=True, seed=5, **kw)
    )(tile(q), tile(k), tile(v), tile(mask))
    dropped = to_numpy(dropped)
    assert np.isfinite(dropped).all()
    assert (dropped[:, 0, 1] == 0).all()
    assert np.abs(dropped[:, 0, 0] - plain[:, 0, 0]).max() > 1e-3  # it did drop
    np.testing.assert_allclose(dropped.mean(axis=0), plain[0], atol=0.1)


# --------------------------------------------------------------------------
# Fast path == direct path
# --------------------------------------------------------------------------


LARGE_CASES = [
    ((256, 1, 5, 1), "sum"),
    ((64, 8, 3, 3), "sum"),  # 8 x 8 grid, areas up to 3 x 3
    ((64, 8, 3, 3), "mean"),
]


@pytest.mark.parametrize(
    "layout,value_mode",
    LARGE_CASES,
    ids=[f"L{layout[0]}_H{layout[1]}_{layout[2]}x{layout[3]}-{m}" for layout, m in LARGE_CASES],
)
def test_fast_equals_direct_large(layout, value_mode):
    length = layout[0]
    rng = np.random.default_rng(length)
    q_len = 16
    q, k, v = make_inputs(rng, 2, 2, q_len, length, depth=8, depth_v=4)
    mask = rng.random((2, 2, q_len, length)) < 0.95  # many areas survive
    mask[1, 1, 3] = False
    mask = mask & (np.arange(length) < length - 5)[None, None, None, :]  # padding
    kw = dict(_kw(layout), value_mode=value_mode, return_weights=True)
    fast_out, fast_w = compiled_on_jax(
        lambda *a: area_attention(*a, implementation="fast", **kw)
    )(q, k, v, mask)
    direct_out, direct_w = compiled_on_jax(
        lambda *a: area_attention(*a, implementation="direct", **kw)
    )(q, k, v, mask)
    np.testing.assert_allclose(to_numpy(fast_w), to_numpy(direct_w), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_numpy(fast_out), to_numpy(direct_out), rtol=1e-5, atol=1e-5)
    assert (to_numpy(fast_out)[1, 1, 3] == 0).all()


# --------------------------------------------------------------------------
# Hypothesis properties
# --------------------------------------------------------------------------

# Where eager ops compile per shape (JAX), property tests take the layouts
# and shapes of the parametrised tests above (whose kernels are compiled
# already) plus a single-item memory and a column with areas taller than it;
# the other backends draw layouts and query lengths from the whole space.
LAYOUT_POOL = [LAYOUTS["1d"], LAYOUTS["2d"], (1, 1, 2, 2), (4, 4, 1, 5)]


@st.composite
def cases(draw, max_rows=3, max_cols=4, mask_kinds=("none", "padding", "random", "rows")):
    """(layout, q, k, v, mask) with random layouts, inputs and masks."""
    if compiles_per_shape():
        layout = draw(st.sampled_from(LAYOUT_POOL))
        q_len = LQ
    else:
        height = draw(st.integers(1, max_rows))
        width = draw(st.integers(1, max_cols))
        layout = (
            height * width,
            height,
            draw(st.integers(1, width + 1)),
            draw(st.integers(1, height + 1)),
        )
        q_len = draw(st.integers(1, 3))
    mask_kind = draw(st.sampled_from(mask_kinds))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    q, k, v = make_inputs(rng, B, N, q_len, layout[0], scale=1.0)
    if mask_kind == "random":
        mask = rng.random((B, N, q_len, layout[0])) < draw(st.sampled_from([0.5, 0.9]))
    else:
        mask = make_mask(mask_kind, rng, B, N, q_len, layout[0])
    return layout, q, k, v, mask


@given(cases(), st.sampled_from(["mean", "max"]), st.sampled_from(VALUE_MODES))
@PROPERTY_SETTINGS
def test_property_fast_equals_direct_and_reference(case, key_mode, value_mode):
    layout, q, k, v, mask = case
    kw = dict(_kw(layout), key_mode=key_mode, value_mode=value_mode)
    expected_out, expected_w = ref.area_attention_reference(q, k, v, mask, **kw)
    results = {}
    for implementation in IMPLEMENTATIONS:
        out, weights = area_attention(
            q, k, v, mask, implementation=implementation, return_weights=True, **kw
        )
        assert_close_to_reference(out, weights, expected_out, expected_w)
        results[implementation] = to_numpy(out)
    np.testing.assert_allclose(results["fast"], results["direct"], rtol=1e-5, atol=1e-5)


@given(cases(), st.sampled_from(IMPLEMENTATIONS), st.integers(0, 4))
@PROPERTY_SETTINGS
def test_property_weights_sum_to_one_or_zero(case, implementation, top_k):
    layout, q, k, v, mask = case
    _, weights = area_attention(
        q, k, v, mask, implementation=implementation, top_k_areas=top_k,
        return_weights=True, **_kw(layout),
    )
    weights = to_numpy(weights)
    assert (weights >= 0).all()
    empty = empty_rows(mask, q.shape, layout)
    np.testing.assert_allclose(weights.sum(-1)[~empty], 1.0, rtol=1e-5)
    assert (weights[empty] == 0).all()


@given(cases(), st.sampled_from(["mean", "max"]), st.sampled_from(VALUE_MODES))
@PROPERTY_SETTINGS
def test_property_single_item_areas_are_plain_attention(case, key_mode, value_mode):
    # With 1 x 1 areas only, area attention is ordinary softmax attention over
    # items (areas in item order), whatever the key and value modes.
    layout, q, k, v, mask = case
    kw = dict(memory_height=layout[1], key_mode=key_mode, value_mode=value_mode)
    expected_out, expected_w = ref.plain_attention_reference(q, k, v, mask)
    for implementation in IMPLEMENTATIONS:
        out, weights = area_attention(
            q, k, v, mask, implementation=implementation, return_weights=True, **kw
        )
        assert_close_to_reference(out, weights, expected_out, expected_w)


@given(cases(), st.sampled_from(["mean", "max"]), st.sampled_from(IMPLEMENTATIONS),
       st.integers(0, 2**31 - 1))
@PROPERTY_SETTINGS
def test_property_shifting_all_logits_of_a_row_changes_nothing(
    case, key_mode, implementation, seed
):
    # Adding a vector c to every key item adds c to every mean and max area
    # key, hence q.c to every logit of a query row: the softmax is unchanged.
    layout, q, k, v, mask = case
    rng = np.random.default_rng(seed)
    shift = (3.0 * rng.standard_normal((B, N, 1, D))).astype("float32")
    kw = dict(_kw(layout), key_mode=key_mode, implementation=implementation,
              return_weights=True)
    out, weights = area_attention(q, k, v, mask, **kw)
    out2, weights2 = area_attention(q, k + shift, v, mask, **kw)
    np.testing.assert_allclose(to_numpy(weights2), to_numpy(weights), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(to_numpy(out2), to_numpy(out), rtol=1e-4, atol=1e-4)


@given(cases(mask_kinds=("none", "random")), st.sampled_from(["mean", "max"]),
       st.sampled_from(VALUE_MODES), st.sampled_from(IMPLEMENTATIONS))
@PROPERTY_SETTINGS
def test_property_grid_transpose_and_reversal_symmetry(case, key_mode, value_mode, implementation):
    # Areas of an H x W grid with shapes up to (mh, mw) are, item set for
    # item set, the areas of the transposed W x H grid with shapes up to
    # (mw, mh); reversing the rows and columns maps areas onto areas too. So
    # transposing (or reversing) the memory and the mask leaves the output
    # unchanged and permutes the weights accordingly.
    layout, q, k, v, mask = case
    length, height, max_w, max_h = layout
    width = length // height
    kw = dict(key_mode=key_mode, value_mode=value_mode, implementation=implementation,
              return_weights=True)
    out, weights = area_attention(q, k, v, mask, **_kw(layout), **kw)
    out, weights = to_numpy(out), to_numpy(weights)
    coords = area_coordinates(*layout)
    index = {tuple(c): i for i, c in enumerate(coords)}

    def permuted(perm, new_layout, area_map):
        mask_p = None if mask is None else mask[..., perm]
        out_p, w_p = area_attention(
            q, k[:, :, perm], v[:, :, perm], mask_p, **_kw(new_layout), **kw
        )
        np.testing.assert_allclose(to_numpy(out_p), out, rtol=1e-5, atol=1e-5)
        new_coords = area_coordinates(*new_layout)
        order = [index[area_map(*c)] for c in new_coords]
        np.testing.assert_allclose(to_numpy(w_p), weights[..., order], rtol=1e-5, atol=1e-6)

    grid = np.arange(length).reshape(height, width)
    # Transpose: new item (c, r) is old item (r, c).
    permuted(
        grid.T.ravel(),
        (length, width, max_h, max_w),
        lambda r, c, h, w: (c, r, w, h),
    )
    # Reverse rows and columns: new area (r, c, h, w) is old area
    # (H - r - h, W - c - w, h, w).
    permuted(
        grid[::-1, ::-1].ravel(),
        layout,
        lambda r, c, h, w: (height - r - h, width - c - w, h, w),
    )


@given(
    cases(),
    st.sampled_from(["mean", "max"]),
    st.one_of(st.sampled_from([0.25, 0.5, 3.0]), st.floats(0.2, 5.0)),
)
@PROPERTY_SETTINGS
def test_property_temperature_is_query_scaling(case, key_mode, temperature):
    # Logits are linear in q for mean and max keys: dividing them by T is
    # dividing q by T.
    layout, q, k, v, mask = case
    kw = dict(_kw(layout), key_mode=key_mode, return_weights=True)
    out, weights = area_attention(q, k, v, mask, temperature=temperature, **kw)
    out2, weights2 = area_attention(q / np.float32(temperature), k, v, mask, **kw)
    np.testing.assert_allclose(to_numpy(weights), to_numpy(weights2), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(to_numpy(out), to_numpy(out2), rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------
# Gradients vs central finite differences of the float64 reference
# --------------------------------------------------------------------------


def _numeric_gradient(fn, arrays, eps=1e-6):
    grads = []
    for i, x in enumerate(arrays):
        g = np.zeros_like(x)
        for idx in np.ndindex(*x.shape):
            plus = [a.copy() for a in arrays]
            minus = [a.copy() for a in arrays]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            g[idx] = (fn(*plus) - fn(*minus)) / (2 * eps)
        grads.append(g)
    return grads


GRAD_CASES = [
    # key_mode, value_mode, implementation, layout, extra kwargs
    ("mean", "sum", "fast", (6, 1, 3, 1), {}),
    ("mean", "max", "direct", (6, 1, 3, 1), {}),
    ("max", "max", "fast", (6, 1, 3, 1), {}),
    ("sample", "mean", "fast", (6, 1, 3, 1), {}),
    ("max", "mean", "direct", (6, 2, 2, 2), {}),
    ("mean", "sum", "fast", (6, 1, 3, 1), {"temperature": 0.5, "top_k_areas": 4}),
    ("mean", "mean", "direct", (6, 2, 2, 2), {"temperature": 2.0, "top_k_areas": 3}),
]


@pytest.mark.parametrize(
    "key_mode,value_mode,implementation,layout,extra",
    GRAD_CASES,
    ids=[f"{c[0]}-{c[1]}-{c[2]}-H{c[3][1]}{'-topk' if c[4] else ''}" for c in GRAD_CASES],
)
def test_gradients_match_finite_differences(key_mode, value_mode, implementation, layout, extra):
    kw = dict(_kw(layout), key_mode=key_mode, value_mode=value_mode, **extra)
    check_gradients(implementation, layout[0], kw, depth_v=2)


def check_gradients(implementation, length, kw, depth_v):
    """Gradients of a cotangent-weighted output sum against central finite
    differences of the float64 reference, with a fully masked row."""
    rng = np.random.default_rng(23)
    q, k, v = make_inputs(rng, 1, 2, 3, length, depth=3, depth_v=depth_v, scale=1.0)
    mask = rng.random((1, 2, 3, length)) < 0.85
    mask[0, 1, 0] = False  # a fully masked row
    mask[0, 0, 2, 1] = False
    cotangent = rng.standard_normal((1, 2, 3, depth_v))

    def loss(q_, k_, v_):
        out = area_attention(q_, k_, v_, ops.convert_to_tensor(mask),
                             implementation=implementation, **kw)
        return ops.sum(out * ops.convert_to_tensor(cotangent.astype("float32")))

    def ref_loss(q_, k_, v_):
        return np.sum(ref.area_attention_reference(q_, k_, v_, mask, **kw)[0] * cotangent)

    grads = gradients(loss, q, k, v)
    numeric = _numeric_gradient(ref_loss, [x.astype("float64") for x in (q, k, v)])
    for name, g, n in zip("qkv", grads, numeric):
        assert np.isfinite(g).all(), name
        scale = max(1.0, np.abs(n).max())
        np.testing.assert_allclose(g, n, rtol=2e-3, atol=2e-4 * scale, err_msg=name)
    # The fully masked row has a constant zero output: zero query gradient.
    assert (grads[0][0, 1, 0] == 0).all()


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_gradients_finite_when_everything_is_masked(implementation):
    rng = np.random.default_rng(24)
    q, k, v = make_inputs(rng, 1, 2, 3, 6, depth=3, depth_v=2)
    mask = np.zeros((1, 1, 1, 6), bool)

    def loss(q_, k_, v_):
        out = area_attention(q_, k_, v_, ops.convert_to_tensor(mask), max_area_width=3,
                             implementation=implementation)
        return ops.sum(out)

    for g in gradients(loss, q, k, v):
        assert np.isfinite(g).all()
        assert (g == 0).all()


# --------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------

BAD_ARGUMENTS = [
    ("max_area_width", dict(max_area_width=0)),
    ("max_area_width", dict(max_area_width=2.0)),
    ("max_area_height", dict(max_area_height=-1)),
    ("memory_height", dict(memory_height=0)),
    ("memory_height", dict(memory_height=4)),  # does not divide L = 6
    ("key_mode", dict(key_mode="median")),
    ("value_mode", dict(value_mode="min")),
    ("implementation", dict(implementation="slow")),
    ("temperature", dict(temperature=0.0)),
    ("temperature", dict(temperature=-1.0)),
    ("top_k_areas", dict(top_k_areas=-1)),
    ("dropout_rate", dict(dropout_rate=1.0)),
]


@pytest.mark.parametrize(
    "name,kwargs", BAD_ARGUMENTS, ids=[f"{n}={list(k.values())[0]}" for n, k in BAD_ARGUMENTS]
)
def test_bad_arguments_raise(name, kwargs):
    rng = np.random.default_rng(25)
    q, k, v = make_inputs(rng, 1, 1, 2, 6)
    with pytest.raises(ValueError, match=name):
        area_attention(q, k, v, **kwargs)


@pytest.mark.parametrize("which", ["query", "key", "value"])
@pytest.mark.parametrize("rank", [3, 5])
def test_wrong_ranks_raise(which, rank):
    rng = np.random.default_rng(26)
    tensors = dict(zip(["query", "key", "value"], make_inputs(rng, 1, 1, 2, 6)))
    x = tensors[which]
    tensors[which] = x[0] if rank == 3 else x[None]
    with pytest.raises(ValueError, match=which):
        area_attention(tensors["query"], tensors["key"], tensors["value"])


def test_depth_mismatch_raises():
    rng = np.random.default_rng(27)
    q, k, v = make_inputs(rng, 1, 1, 2, 6)
    with pytest.raises(ValueError, match="depth"):
        area_attention(q[..., :3], k, v)


def test_area_keys_rejects_unknown_mode():
    with pytest.raises(ValueError, match="key_mode"):
        area_keys(np.zeros((1, 1, 4, 2), "float32"), "concat")


# --------------------------------------------------------------------------
# Mixed precision
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,tol", [("float16", 5e-3), ("bfloat16", 4e-2)])
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("key_mode,value_mode", [("mean", "sum"), ("max", "mean"), ("mean", "max")])
def test_half_precision_inputs(dtype, tol, implementation, key_mode, value_mode):
    layout = LAYOUTS["2d"]
    rng = np.random.default_rng(28)
    q, k, v = make_inputs(rng, B, N, LQ, layout[0])
    mask = make_mask("random", rng, B, N, LQ, layout[0])
    q, k, v = (ops.cast(x, dtype) for x in (q, k, v))
    kw = dict(_kw(layout), key_mode=key_mode, value_mode=value_mode)
    out, weights = area_attention(
        q, k, v, mask, implementation=implementation, return_weights=True, **kw
    )
    assert backend.standardize_dtype(out.dtype) == dtype
    out, weights = to_numpy(out), to_numpy(weights)
    assert np.isfinite(out).all() and np.isfinite(weights).all()
    # Against the float64 reference on the same (rounded) inputs.
    expected_out, expected_w = ref.area_attention_reference(
        to_numpy(q), to_numpy(k), to_numpy(v), mask, **kw
    )
    np.testing.assert_allclose(weights, expected_w, rtol=tol, atol=tol)
    scale = max(1.0, np.abs(expected_out).max())
    np.testing.assert_allclose(out, expected_out, rtol=tol, atol=tol * scale)
    empty = empty_rows(mask, (B, N, LQ), layout)
    assert empty.any()
    assert (out[empty] == 0).all() and (weights[empty] == 0).all()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_large_logits_stay_finite(dtype):
    # Logits of several hundred overflow exp in half precision (and in
    # float32) unless the softmax is stabilised in float32; the mask constant
    # must not overflow either.
    layout = LAYOUTS["2d"]
    rng = np.random.default_rng(29)
    q, k, v = make_inputs(rng, B, N, LQ, layout[0], scale=1.0)
    q = np.sign(q) * 2.0
    k = 50.0 * np.sign(k)  # |logit| up to 400
    mask = make_mask("random", rng, B, N, LQ, layout[0])
    mask[0, 0, 1] = False
    for implementation in IMPLEMENTATIONS:
        out, weights = area_attention(
            ops.cast(q, dtype), ops.cast(k, dtype), ops.cast(v, dtype), mask,
            implementation=implementation, return_weights=True, **_kw(layout),
        )
        out, weights = to_numpy(out), to_numpy(weights)
        assert np.isfinite(out).all() and np.isfinite(weights).all()
        assert (out[0, 0, 1] == 0).all() and (weights[0, 0, 1] == 0).all()
        empty = empty_rows(mask, q.shape, layout)
        np.testing.assert_allclose(weights.sum(-1)[~empty], 1.0, atol=1e-2)


# --------------------------------------------------------------------------
# jit
# --------------------------------------------------------------------------

JIT_CASES = [
    ("mean", "sum", "fast", "1d", "padding", {"top_k_areas": 3}),
    ("mean", "mean", "fast", "2d", "causal", {"temperature": 0.7}),
    ("max", "max", "direct", "2d", "random", {}),
    ("sample", "sum", "direct", "1d", "rows", {}),
]


@pytest.mark.parametrize(
    "key_mode,value_mode,implementation,layout_name,mask_kind,extra",
    JIT_CASES,
    ids=["-".join(c[:5]) for c in JIT_CASES],
)
def test_jit_matches_eager(key_mode, value_mode, implementation, layout_name, mask_kind, extra):
    layout = LAYOUTS[layout_name]
    length = layout[0]
    rng = np.random.default_rng(30)
    q_len = length if mask_kind == "causal" else LQ
    q, k, v = make_inputs(rng, B, N, q_len, length)
    mask = make_mask(mask_kind, rng, B, N, q_len, length)
    kw = dict(_kw(layout), key_mode=key_mode, value_mode=value_mode,
              implementation=implementation, return_weights=True, **extra)

    def fn(q_, k_, v_, mask_):
        return area_attention(q_, k_, v_, mask_, **kw)

    eager_out, eager_w = fn(q, k, v, mask)
    jit_out, jit_w = jit(fn)(q, k, v, mask)
    np.testing.assert_allclose(to_numpy(jit_out), to_numpy(eager_out), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_numpy(jit_w), to_numpy(eager_w), rtol=1e-5, atol=1e-6)
    assert_close_to_reference(
        jit_out, jit_w,
        *ref.area_attention_reference(
            q, k, v, mask, **_kw(layout), key_mode=key_mode, value_mode=value_mode, **extra
        ),
    )


# --------------------------------------------------------------------------
# Memories of dynamic (unknown at trace time) length
# --------------------------------------------------------------------------


def _trace_with_unknown_length(fn, *arrays):
    """Runs `fn` traced with the memory axis (-2 of every input) unknown.

    Only TensorFlow traces with unknown dimensions (`model.fit` relaxes
    shapes this way when batches of several lengths arrive); JAX always
    traces concrete shapes, so there is nothing to test there.
    """
    if backend.backend() != "tensorflow":
        pytest.skip("only TensorFlow traces with unknown dimensions")
    import tensorflow as tf

    specs = []
    for a in arrays:
        shape = list(a.shape)
        shape[-2] = None
        specs.append(tf.TensorSpec(shape, tf.as_dtype(a.dtype)))
    return tf.function(fn, input_signature=specs)


@pytest.mark.parametrize("value_mode", ["sum", "mean"])
@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal"])
@pytest.mark.parametrize("length", [1, 2, 5, 9])
def test_dynamic_length_1d_matches_reference(length, mask_kind, value_mode):
    """Shorter memories than the widest area included (length 1, 2 < 4)."""
    rng = np.random.default_rng(40 + length)
    q_len = length if mask_kind == "causal" else 3
    q, k, v = make_inputs(rng, 2, 2, q_len, length)
    mask = make_mask(mask_kind, rng, 2, 2, q_len, length)
    kw = dict(max_area_width=4, value_mode=value_mode)
    if mask is None:
        fn = lambda q, k, v: area_attention(q, k, v, **kw)  # noqa: E731
        args = (q, k, v)
    else:
        mask = np.broadcast_to(mask, (2, 1, q_len, length))
        # The mask's memory axis is its last one: move it to -2 for tracing.
        fn = lambda q, k, v, m: area_attention(  # noqa: E731
            q, k, v, ops.swapaxes(m, -1, -2), **kw
        )
        args = (q, k, v, np.swapaxes(mask, -1, -2).copy())
    traced = _trace_with_unknown_length(fn, *args)
    out = to_numpy(traced(*args))
    expected, _ = ref.area_attention_reference(
        q, k, v, mask, max_area_width=4, value_mode=value_mode
    )
    np.testing.assert_allclose(out, expected, atol=1e-5)


def test_dynamic_length_gradients_match_static():
    import tensorflow as tf  # noqa: F401  (skipped below on other backends)

    rng = np.random.default_rng(50)
    q, k, v = make_inputs(rng, 1, 2, 3, 6)
    kw = dict(max_area_width=3, value_mode="sum")

    def grads(q, k, v):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out = area_attention(q, k, v, **kw)
            loss = tf.reduce_sum(out * tf.sin(out))
        return tape.gradient(loss, [q, k, v])

    traced = _trace_with_unknown_length(grads, q, k, v)
    static = tf.function(grads)
    for got, want in zip(traced(q, k, v), static(q, k, v)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(memory_height=2, max_area_height=2),
        dict(implementation="direct"),
        dict(key_mode="max"),
        dict(value_mode="max"),
        dict(top_k_areas=2),
        dict(return_weights=True),
    ],
    ids=["2d", "direct", "max_keys", "max_values", "top_k", "weights"],
)
def test_dynamic_length_outside_the_fast_path_raises(kwargs):
    rng = np.random.default_rng(51)
    q, k, v = make_inputs(rng, 1, 1, 2, 4)
    traced = _trace_with_unknown_length(
        lambda q, k, v: area_attention(q, k, v, max_area_width=2, **kwargs),
        q,
        k,
        v,
    )
    with pytest.raises(ValueError, match="not static"):
        traced(q, k, v)
