"""The fused Pallas area attention kernel (interpret mode on this CPU):
against the brute-force reference, the fast path of this backend, finite
differences, bfloat16; that it lowers to Triton for a GPU without any
`[Lq, L]` buffer outside the kernels; and the dispatch of `implementation`.

The kernel is JAX code: under the TensorFlow backend the comparison with
TensorFlow's own fast path still runs (the kernel takes NumPy inputs), the
rest runs in the JAX part of the suite.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from keras import backend

from keras_structattn.ops import area_attention
from tests import reference as ref
from tests._backend import to_numpy
from tests.ops.test_attend_areas import make_mask

jax = pytest.importorskip("jax")
jnp = jax.numpy

from keras_structattn.ops.fused_area_attention import fused_area_attention  # noqa: E402


@pytest.fixture(autouse=True)
def _ieee_float32_matmuls_on_a_gpu():
    """On a GPU, float32 dots default to TF32 (XLA's and Triton's default,
    ~3e-4 relative error); the comparisons with the float64 reference ask
    for IEEE float32 (`jax.default_matmul_precision`, which the kernels'
    dots honour). A no-op on a CPU."""
    with jax.default_matmul_precision("highest"):
        yield


on_jax = pytest.mark.skipif(
    backend.backend() != "jax", reason="JAX-side checks run in the JAX part of the suite"
)

# name -> (length, memory_height, max_area_width, max_area_height)
LAYOUTS = {
    "1d": (11, 1, 3, 1),
    "2d": (12, 3, 3, 2),  # a 3 x 4 grid; areas up to 2 rows x 3 columns
}
# Small tiles, so that every case spans several start tiles and query blocks
# (with a ragged last one) and areas cross tile borders.
BLOCKS = dict(block_q=4, block_k=4)


def _kw(layout):
    _, memory_height, max_w, max_h = layout
    return dict(memory_height=memory_height, max_area_width=max_w, max_area_height=max_h)


def _inputs(seed, length, q_len, batch=2, heads=2, depth=5, depth_v=3):
    rng = np.random.default_rng(seed)
    q = (0.7 * rng.standard_normal((batch, heads, q_len, depth))).astype("float32")
    k = rng.standard_normal((batch, heads, length, depth)).astype("float32")
    v = rng.standard_normal((batch, heads, length, depth_v)).astype("float32")
    return q, k, v


def _mask(kind, seed, batch, heads, q_len, length):
    return make_mask(kind, np.random.default_rng(seed + 1), batch, heads, q_len, length)


CASES = [
    ("1d", "padding", "mean", 2.0),
    ("1d", "random", "sum", 1.0),
    ("2d", "causal", "sum", 1.0),
    ("2d", "random", "mean", 0.5),
    ("2d", "rows", "sum", 1.0),
]


@on_jax
@pytest.mark.parametrize("layout_name, mask_kind, value_mode, temperature", CASES)
def test_matches_brute_force_reference(layout_name, mask_kind, value_mode, temperature):
    layout = LAYOUTS[layout_name]
    length = layout[0]
    q_len = length if mask_kind == "causal" else 7
    q, k, v = _inputs(0, length, q_len)
    mask = _mask(mask_kind, 0, 2, 2, q_len, length)
    options = dict(value_mode=value_mode, temperature=temperature, **_kw(layout))
    out = fused_area_attention(q, k, v, mask, **BLOCKS, **options)
    expected, weights = ref.area_attention_reference(q, k, v, mask, **options)
    assert out.shape == expected.shape
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=2e-6)
    # The rows without an attendable area are really in the cases, and zero.
    empty = weights.sum(-1) == 0
    if mask_kind in ("random", "rows"):
        assert empty.any()
    assert np.all(np.asarray(out)[empty] == 0.0)


@pytest.mark.parametrize("layout_name, mask_kind", [("2d", "random")])
def test_matches_this_backends_fast_path(layout_name, mask_kind):
    """The kernel (JAX) against `area_attention(implementation="fast")`
    computed by the backend under test (TensorFlow in the TF part)."""
    layout = LAYOUTS[layout_name]
    q, k, v = _inputs(3, layout[0], 6)
    mask = _mask(mask_kind, 3, 2, 2, 6, layout[0])
    fast = to_numpy(area_attention(q, k, v, mask, implementation="fast", **_kw(layout)))
    out = fused_area_attention(q, k, v, mask, **BLOCKS, **_kw(layout))
    np.testing.assert_allclose(np.asarray(out), fast, rtol=1e-5, atol=2e-6)


def _loss(fn, weights):
    return lambda q, k, v: jnp.sum(fn(q, k, v) * weights)


@on_jax
@pytest.mark.parametrize(
    "layout_name, mask_kind, value_mode",
    [("1d", "padding", "sum"), ("2d", "random", "mean")],
)
def test_gradients_match_the_fast_path(layout_name, mask_kind, value_mode):
    """Against the fast path's hand-written gradient (itself checked against
    finite differences in test_attend_areas); the random mask has a row
    without any attendable area."""
    layout = LAYOUTS[layout_name]
    length = layout[0]
    q_len = length if mask_kind == "causal" else 7
    q, k, v = _inputs(1, length, q_len)
    mask = _mask(mask_kind, 1, 2, 2, q_len, length)
    weights = np.random.default_rng(9).standard_normal((2, 2, q_len, 3)).astype("float32")
    options = dict(value_mode=value_mode, **_kw(layout))
    fused = _loss(lambda q, k, v: fused_area_attention(q, k, v, mask, **BLOCKS, **options), weights)
    fast = _loss(lambda q, k, v: area_attention(q, k, v, mask, **options), weights)
    # Compiled: eager JAX would dispatch every step of the interpreted
    # kernels one by one (several times slower on CI's 2 cores).
    got = jax.jit(jax.grad(fused, argnums=(0, 1, 2)))(q, k, v)
    want = jax.jit(jax.grad(fast, argnums=(0, 1, 2)))(q, k, v)
    for name, a, b in zip("qkv", got, want):
        assert np.isfinite(np.asarray(a)).all(), name
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5, err_msg=name)


@on_jax
def test_every_row_masked_gives_zeros():
    layout = LAYOUTS["2d"]
    q, k, v = _inputs(4, layout[0], 5)
    mask = np.zeros((2, 1, 1, layout[0]), bool)
    out = fused_area_attention(q, k, v, mask, **BLOCKS, **_kw(layout))
    assert np.all(np.asarray(out) == 0.0)


@on_jax
def test_bfloat16_inputs_stay_close_and_return_bfloat16():
    layout = LAYOUTS["2d"]
    q, k, v = _inputs(6, layout[0], 6)
    mask = _mask("random", 6, 2, 2, 6, layout[0])
    expected, _ = ref.area_attention_reference(q, k, v, mask, **_kw(layout))
    half = [jnp.asarray(x, jnp.bfloat16) for x in (q, k, v)]
    out = fused_area_attention(*half, mask, **BLOCKS, **_kw(layout))
    assert out.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(out, "float32"), expected, atol=0.05, rtol=0.02)


@on_jax
def test_bfloat16_gradients_stay_close_to_float32():
    # Half-precision inputs get half-precision dK/dV parts (one rounding per
    # part before the float32 sum): the gradients stay within bf16 error.
    layout = LAYOUTS["2d"]
    q, k, v = _inputs(7, layout[0], 6)
    mask = _mask("random", 7, 2, 2, 6, layout[0])
    cotangent = np.random.default_rng(7).standard_normal((2, 2, 6, v.shape[-1]))

    def loss(q_, k_, v_):
        out = fused_area_attention(q_, k_, v_, mask, **BLOCKS, **_kw(layout))
        return jnp.sum(out.astype(jnp.float32) * cotangent)

    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    full = grad(*(jnp.asarray(x) for x in (q, k, v)))
    half = grad(*(jnp.asarray(x, jnp.bfloat16) for x in (q, k, v)))
    for name, f, h in zip("qkv", full, half):
        assert h.dtype == jnp.bfloat16, name
        f, h = np.asarray(f), np.asarray(h, "float32")
        scale = np.abs(f).max()
        np.testing.assert_allclose(h, f, atol=0.03 * scale, rtol=0.03, err_msg=name)


@on_jax
@settings(max_examples=6, deadline=None)
@given(
    height=st.integers(1, 3),
    width=st.integers(1, 5),
    max_w=st.integers(1, 4),
    max_h=st.integers(1, 3),
    q_len=st.integers(1, 6),
    block_k=st.sampled_from([2, 4, 8]),
    seed=st.integers(0, 2**16),
)
def test_property_any_layout_and_tiling_matches_the_reference(
    height, width, max_w, max_h, q_len, block_k, seed
):
    length = height * width
    q, k, v = _inputs(seed, length, q_len, batch=1, heads=2)
    mask = np.random.default_rng(seed).random((1, 2, q_len, length)) < 0.85
    options = dict(memory_height=height, max_area_width=max_w, max_area_height=max_h)
    out = fused_area_attention(q, k, v, mask, block_q=4, block_k=block_k, **options)
    expected, _ = ref.area_attention_reference(q, k, v, mask, **options)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=2e-6)


@on_jax
def test_lowers_to_three_triton_kernels_without_quadratic_buffers():
    """Forward+backward lowered for a GPU (Pallas -> Triton, on this CPU):
    three Triton kernels, also with a mask per query, and without a mask no
    `[.., L, L]` tensor anywhere outside them, unlike the fast path at the
    same shape."""
    from jax import export

    length, side = 256, 16

    def loss(fn):
        def grad(q, k, v):
            return jax.grad(lambda *a: jnp.sum(fn(*a).astype("float32")), argnums=(0, 1, 2))(
                q, k, v
            )

        return grad

    # A mask per query (causal): the dK/dV kernel reads its rows block by
    # block, which must lower as one index per load (an H100 run found
    # `ref.at[rows]` then an index unsupported by Pallas' Triton lowering).
    causal = jnp.tril(jnp.ones((length, length), bool))

    def fused(q, k, v, mask=None):
        return fused_area_attention(
            q, k, v, mask, memory_height=side, max_area_width=3, max_area_height=3,
            interpret=False,
        )

    def fused_causal(q, k, v):
        return fused(q, k, v, causal)

    def fast(q, k, v):
        return area_attention(
            q, k, v, memory_height=side, max_area_width=3, max_area_height=3
        )

    spec = jax.ShapeDtypeStruct((1, 2, length, 64), jnp.bfloat16)
    triton = export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")
    texts = {}
    for name, fn in (("fused", fused), ("fused_causal", fused_causal), ("fast", fast)):
        exported = export.export(jax.jit(loss(fn)), platforms=["cuda"], disabled_checks=[triton])
        texts[name] = exported(spec, spec, spec).mlir_module()
    assert texts["fused"].count("xla.gpu.triton") == 3
    assert texts["fused_causal"].count("xla.gpu.triton") == 3
    quadratic = f"x{length}x{length}x"
    assert quadratic in texts["fast"]
    assert quadratic not in texts["fused"]


@on_jax
def test_implementation_dispatch_on_jax(monkeypatch):
    from keras_structattn.ops import fused_area_attention as module

    calls = []
    monkeypatch.setattr(
        module, "fused_area_attention", lambda q, *a, **k: calls.append(1) or q[..., :1]
    )
    q, k, v = _inputs(7, 4, 2, batch=1, heads=1, depth=2, depth_v=1)
    options = dict(max_area_width=2)
    area_attention(q, k, v, implementation="fused", **options)
    assert len(calls) == 1
    # Settings the kernel does not cover run the fast path.
    area_attention(q, k, v, implementation="fused", value_mode="max", **options)
    area_attention(q, k, v, implementation="fused", return_weights=True, **options)
    area_attention(
        q, k, v, implementation="fused", training=True, dropout_rate=0.1, seed=1, **options
    )
    # No GPU here: "auto" is the fast path.
    area_attention(q, k, v, implementation="auto", **options)
    assert len(calls) == 1


@pytest.mark.skipif(backend.backend() == "jax", reason="checks the non-JAX error")
def test_fused_needs_the_jax_backend():
    layout = LAYOUTS["1d"]
    q, k, v = _inputs(8, layout[0], 4)
    with pytest.raises(ValueError, match="needs the JAX backend"):
        area_attention(q, k, v, implementation="fused", **_kw(layout))
    auto = area_attention(q, k, v, implementation="auto", **_kw(layout))
    fast = area_attention(q, k, v, implementation="fast", **_kw(layout))
    np.testing.assert_array_equal(to_numpy(auto), to_numpy(fast))


def test_default_tiles_follow_the_h100_measurements():
    """The GPU tile choice against issue 22's H100 runs: block_k=64
    overflowed the shared memory for float32 w=5 and a bf16 3x3 stack (and
    fitted bf16 w=5); the fastest tiles were 32 for bf16 w=3 and 16 for
    float32 w=5, bf16 3x3 and float32 3x3 (benchmarks/fused_tiles.py)."""
    from keras_structattn.ops.fused_area_attention import default_tiles
    from keras_structattn.ops.fused_area_attention import shared_memory_estimate

    budget = 232448  # an H100's shared memory per block, in bytes
    assert shared_memory_estimate(5, 64, 64, 64, 64, 4, 2) > budget  # f32 w=5 failed
    assert shared_memory_estimate(9, 64, 64, 64, 64, 2, 2) > budget  # bf16 3x3 failed
    assert shared_memory_estimate(5, 64, 64, 64, 64, 2, 2) < budget  # bf16 w=5 ran
    assert default_tiles(3, 1024, 1024, 64, 64, 2) == (64, 32, 2)
    assert default_tiles(5, 1024, 1024, 64, 64, 4) == (64, 16, 2)
    assert default_tiles(9, 1024, 1024, 64, 64, 2) == (64, 16, 2)
    assert default_tiles(9, 1024, 1024, 64, 64, 4) == (64, 16, 2)
    for offsets in (1, 2, 3, 5, 9, 25):
        for itemsize in (2, 4):
            block_q, block_k, stages = default_tiles(offsets, 1024, 4096, 64, 64, itemsize)
            assert block_q == 64 and block_k in (16, 32, 64) and stages in (1, 2)
            if offsets <= 9:
                assert shared_memory_estimate(
                    offsets, block_q, block_k, 64, 64, itemsize, stages
                ) < budget
    assert default_tiles(1, 8, 10, 16, 16, 4)[:2] == (16, 16)  # short inputs: the floor
