"""`implementation="stacked"`: area attention as ordinary attention over the
stacked area memory (`keras.ops.dot_product_attention`), against the
brute-force reference, the fast path, finite differences and in half
precision; and which settings it takes (the rest run `"fast"`)."""

import zlib

import numpy as np
import pytest
from keras import backend
from keras import ops

from keras_structattn.ops import area_attention
from keras_structattn.ops import area_keys
from keras_structattn.ops import attend_areas
from keras_structattn.ops import attend_to_areas
from keras_structattn.ops import num_areas
from tests import reference as ref
from tests._backend import jit
from tests._backend import to_numpy
from tests.ops.test_attend_areas import LAYOUTS
from tests.ops.test_attend_areas import MASKS
from tests.ops.test_attend_areas import _kw
from tests.ops.test_attend_areas import check_gradients
from tests.ops.test_attend_areas import empty_rows
from tests.ops.test_attend_areas import make_inputs
from tests.ops.test_attend_areas import make_mask

B, N, LQ, D = 2, 2, 5, 4  # the stacked path needs value depth == key depth


@pytest.fixture
def stacked_calls(monkeypatch):
    """Counts the calls that really take the stacked path."""
    calls = []
    original = attend_areas._stacked_attention

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(attend_areas, "_stacked_attention", counting)
    return calls


# Every mask with mean keys; max keys (another area-key builder) with two.
REFERENCE_CASES = [("mean", mask) for mask in MASKS] + [
    ("max", "causal"),
    ("max", "random"),
]


@pytest.mark.parametrize("key_mode,mask_kind", REFERENCE_CASES)
@pytest.mark.parametrize("layout_name", list(LAYOUTS))
@pytest.mark.parametrize("value_mode", ["sum", "mean"])
def test_matches_reference(key_mode, value_mode, layout_name, mask_kind, stacked_calls):
    layout = LAYOUTS[layout_name]
    length = layout[0]
    rng = np.random.default_rng(zlib.crc32(f"stacked/{layout_name}/{mask_kind}".encode()))
    q_len = length if mask_kind == "causal" else LQ
    q, k, v = make_inputs(rng, B, N, q_len, length, depth_v=D)
    mask = make_mask(mask_kind, rng, B, N, q_len, length)
    kw = dict(_kw(layout), key_mode=key_mode, value_mode=value_mode)

    out = to_numpy(area_attention(q, k, v, mask, implementation="stacked", **kw))
    expected, _ = ref.area_attention_reference(q, k, v, mask, **kw)

    assert stacked_calls
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    empty = empty_rows(mask, q.shape, layout)
    if mask_kind in ("random", "rows"):
        assert empty.any()
    assert (out[empty] == 0).all()


@pytest.mark.parametrize("layout_name", list(LAYOUTS))
def test_masks_reach_dot_product_attention_as_cudnn_takes_them(layout_name, monkeypatch):
    # cuDNN flash attention takes a mask only as a bias of the full
    # [Lq, |R|] extent, with even lengths in training; the 2-D layout has
    # 45 areas and LQ = 5 queries, both odd.
    layout = LAYOUTS[layout_name]
    seen = []
    original = ops.dot_product_attention

    def recording(query, key, value, mask=None, **kwargs):
        seen.append((tuple(query.shape), tuple(key.shape), tuple(mask.shape)))
        return original(query, key, value, mask=mask, **kwargs)

    monkeypatch.setattr(ops, "dot_product_attention", recording)
    rng = np.random.default_rng(6)
    q, k, v = make_inputs(rng, B, N, LQ, layout[0], depth_v=D)
    mask = make_mask("padding", rng, B, N, LQ, layout[0])  # [B, 1, 1, L]
    out = area_attention(q, k, v, mask, implementation="stacked", **_kw(layout))
    assert tuple(out.shape) == (B, N, LQ, D)
    [(query_shape, key_shape, mask_shape)] = seen
    queries, areas = query_shape[1], key_shape[1]
    assert queries % 2 == 0 and areas % 2 == 0
    assert queries in (LQ, LQ + 1) and areas - num_areas(layout[0], **_kw(layout)) in (0, 1)
    assert mask_shape == (B, 1, queries, areas)


def test_everything_masked_gives_zeros(stacked_calls):
    rng = np.random.default_rng(1)
    q, k, v = make_inputs(rng, B, N, LQ, 7, depth_v=D)
    out = area_attention(
        q, k, v, np.zeros((1, 1, 1, 7), bool), max_area_width=3, implementation="stacked"
    )
    assert stacked_calls
    assert (to_numpy(out) == 0).all()


@pytest.mark.parametrize("temperature", [0.3, 2.5])
def test_temperature_and_caller_area_keys(temperature, stacked_calls):
    # attend_to_areas with keys the caller made (as the learned Eq. 9 keys
    # are): the stacked path takes them as they are.
    layout = LAYOUTS["2d"]
    rng = np.random.default_rng(2)
    q, k, v = make_inputs(rng, B, N, LQ, layout[0], depth_v=D)
    mask = make_mask("random", rng, B, N, LQ, layout[0])
    keys = ops.convert_to_numpy(area_keys(k, "max", **_kw(layout)))
    keys = keys + rng.standard_normal(keys.shape).astype("float32")
    kw = dict(_kw(layout), temperature=temperature, value_mode="mean")
    got = attend_to_areas(q, keys, v, mask, implementation="stacked", **kw)
    expected = attend_to_areas(q, keys, v, mask, implementation="direct", **kw)
    assert stacked_calls
    np.testing.assert_allclose(to_numpy(got), to_numpy(expected), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(top_k_areas=2),
        dict(return_weights=True),
        dict(value_mode="max"),
        dict(depth_v=3),
        dict(training=True, dropout_rate=0.5, seed=3),
    ],
    ids=["top_k", "weights", "max_values", "value_depth", "dropout"],
)
def test_other_settings_run_fast(kwargs, stacked_calls):
    kwargs = dict(kwargs)
    depth_v = kwargs.pop("depth_v", D)
    rng = np.random.default_rng(4)
    q, k, v = make_inputs(rng, B, N, LQ, 7, depth_v=depth_v)
    kw = dict(max_area_width=3, **kwargs)
    got = area_attention(q, k, v, implementation="stacked", **kw)
    expected = area_attention(q, k, v, implementation="fast", **kw)
    assert not stacked_calls
    if kw.get("return_weights"):
        (got, got_weights), (expected, expected_weights) = got, expected
        np.testing.assert_array_equal(to_numpy(got_weights), to_numpy(expected_weights))
    np.testing.assert_array_equal(to_numpy(got), to_numpy(expected))


@pytest.mark.parametrize("layout", [(6, 1, 3, 1), (6, 2, 2, 2)], ids=["1d", "2d"])
@pytest.mark.parametrize("value_mode", ["sum", "mean"])
def test_gradients_match_finite_differences(layout, value_mode, stacked_calls):
    kw = dict(_kw(layout), value_mode=value_mode, temperature=0.7)
    check_gradients("stacked", layout[0], kw, depth_v=3)
    assert stacked_calls


@pytest.mark.parametrize("dtype,tol", [("float16", 5e-3), ("bfloat16", 4e-2)])
def test_half_precision_inputs(dtype, tol):
    layout = LAYOUTS["2d"]
    rng = np.random.default_rng(28)
    q, k, v = make_inputs(rng, B, N, LQ, layout[0], depth_v=D)
    mask = make_mask("random", rng, B, N, LQ, layout[0])
    q, k, v = (ops.cast(x, dtype) for x in (q, k, v))
    kw = dict(_kw(layout), value_mode="mean")
    out = area_attention(q, k, v, mask, implementation="stacked", **kw)
    assert backend.standardize_dtype(out.dtype) == dtype
    out = to_numpy(out)
    expected, _ = ref.area_attention_reference(
        to_numpy(q), to_numpy(k), to_numpy(v), mask, **kw
    )
    assert np.isfinite(out).all()
    scale = max(1.0, np.abs(expected).max())
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * scale)
    empty = empty_rows(mask, (B, N, LQ), layout)
    assert empty.any() and (out[empty] == 0).all()


def test_jit_matches_eager():
    layout = LAYOUTS["1d"]
    rng = np.random.default_rng(5)
    q, k, v = make_inputs(rng, B, N, layout[0], layout[0], depth_v=D)
    mask = make_mask("causal", rng, B, N, layout[0], layout[0])
    kw = dict(_kw(layout), implementation="stacked")

    def run(q_, k_, v_, m_):
        return area_attention(q_, k_, v_, m_, **kw)

    eager = to_numpy(run(q, k, v, mask))
    compiled = to_numpy(jit(run)(q, k, v, mask))
    np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-6)
