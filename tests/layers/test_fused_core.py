"""The attention core's fused path under mixed precision (issue 22).

On JAX, a layer computing in bfloat16 (float16: on a GPU) attends through
the fused `keras.ops.dot_product_attention` (cuDNN flash attention on a GPU)
when it needs no weights; on TensorFlow it stays on the explicit path
(float32 logits, `masked_softmax`). See docs/attention_core.md, "Two paths
under mixed precision".

For each structured layer under `mixed_bfloat16`, its structure in use and
one query row left without any allowed key:

(a) which path a call takes: a wrapper counting the calls of
    `keras.ops.dot_product_attention` in the core's namespace;
(b) the output equals the same layer's explicit path (a call with
    `return_attention_scores=True` needs the weights, so takes it) within
    bfloat16 rounding; where the structure is a bias (graph, positional),
    that tolerance is checked to be well below what dropping the bias
    changes, so a fused path that lost it would fail;
(c) the row without an allowed key outputs exactly the output projection's
    bias (in bfloat16), nothing is NaN and the input gradients are finite.

On TensorFlow the same calls must take the explicit path; (b) and (c) then
hold there too. The core itself is checked for which dtypes fuse on which
backend and device, and for the float16 bias clip (`FUSED_BIAS_LIMIT`)
against the explicit path.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.layers import GatedMultiHeadAttention
from keras_structattn.layers import GraphMultiHeadAttention
from keras_structattn.layers import MultiHeadAreaAttention
from keras_structattn.layers import PositionalMultiHeadAttention
from keras_structattn.layers import _attention_core as core
from keras_structattn.layers._attention_core import LogitStructure
from keras_structattn.ops import relation_tables as rt
from tests._backend import gradients
from tests._backend import to_numpy

B, T, DIM, HEADS, KEY_DIM = 2, 4, 8, 2, 4
ON_JAX = keras.backend.backend() == "jax"
# bfloat16 keeps 8 significant bits: outputs within 2% of their scale.
RELATIVE_TOLERANCE = 2e-2


def on_jax_gpu():
    if not ON_JAX:
        return False
    import jax

    return jax.default_backend() == "gpu"


@pytest.fixture
def fused_calls(monkeypatch):
    """A list that grows by one per call of the fused kernel."""
    calls = []
    kernel = core.ops.dot_product_attention

    def counting(*args, **kwargs):
        calls.append(kwargs.get("bias") is not None)
        return kernel(*args, **kwargs)

    monkeypatch.setattr(core.ops, "dot_product_attention", counting)
    return calls


def graph_case(rng):
    layer = GraphMultiHeadAttention(
        HEADS, KEY_DIM, head_relations=[[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11, 12]],
        relation_bias=True, dtype="mixed_bfloat16",
    )
    relations = rng.integers(0, rt.NUM_LABELS, size=(B, T, T)).astype("int32")
    relations[:, :, 0] = rt.IMPLICIT  # every other row keeps a key
    return layer, dict(relations=relations), dict(relations=None)


def positional_case(rng):
    layer = PositionalMultiHeadAttention(
        HEADS, KEY_DIM, position_type="vectors", dtype="mixed_bfloat16"
    )
    positions = rng.normal(size=(B, T, DIM)).astype("float32")
    return layer, dict(query_positions=positions), dict()


def gated_case(rng):
    return GatedMultiHeadAttention(HEADS, KEY_DIM, dtype="mixed_bfloat16"), dict(), None


def area_case(rng):
    layer = MultiHeadAreaAttention(
        HEADS, KEY_DIM, max_area_width=1, area_temperature=0.5, dtype="mixed_bfloat16"
    )
    return layer, dict(use_causal_mask=True), None


CASES = {"graph": graph_case, "positional": positional_case, "gated": gated_case,
         "area_1x1": area_case}


@pytest.mark.parametrize("name", list(CASES))
def test_mixed_bfloat16_layers(name, fused_calls):
    rng = np.random.default_rng(sorted(CASES).index(name))
    layer, structure, without = CASES[name](rng)
    x = rng.normal(size=(B, T, DIM)).astype("float32")
    mask = np.ones((B, T, T), bool)
    mask[1, 2] = False  # query 2 of example 1 may attend nothing
    call = dict(attention_mask=mask, **structure)
    layer(x, x, **call)
    layer.set_weights([rng.normal(scale=0.5, size=w.shape).astype("float32")
                       for w in layer.get_weights()])
    assert layer.compute_dtype == "bfloat16"

    del fused_calls[:]
    out = layer(x, x, **call)
    # (a) the path: fused on JAX only, with the bias where there is one.
    assert fused_calls == ([without is not None] if ON_JAX else [])
    explicit, _ = layer(x, x, return_attention_scores=True, **call)
    assert len(fused_calls) == (1 if ON_JAX else 0)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    out, explicit = to_numpy(out), to_numpy(explicit)
    assert np.isfinite(out).all()

    # (b) the explicit path's output, up to bfloat16 rounding.
    tolerance = RELATIVE_TOLERANCE * np.abs(explicit).max()
    np.testing.assert_allclose(out, explicit, rtol=0, atol=tolerance)
    if without is not None:  # the bias matters far beyond the tolerance
        plain = to_numpy(layer(x, x, attention_mask=mask, **without))
        assert np.abs(plain - explicit).max() > 5 * tolerance

    # (c) the row without a key: exactly the output projection's bias.
    bias = to_numpy(ops.cast(layer.output_dense.bias, "bfloat16"))
    np.testing.assert_array_equal(out[1, 2], bias)
    np.testing.assert_array_equal(explicit[1, 2], bias)
    assert np.abs(out[0] - bias).max() > 0.1  # the other rows attend

    def loss(inputs):
        return ops.sum(ops.square(ops.cast(layer(inputs, inputs, **call), "float32")))

    (grad,) = gradients(loss, x)
    assert np.isfinite(grad).all() and np.abs(grad).max() > 0


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_which_dtypes_fuse(dtype, fused_calls):
    """float32 fuses on both backends (unchanged); bfloat16 on JAX only,
    float16 on JAX with a GPU only (XLA compiles no float16 x float16 ->
    float32 product on a CPU); weights, top-k, shared keys or narrower
    values keep every dtype on the explicit path."""
    rng = np.random.default_rng(3)
    q, k = (ops.cast(rng.normal(size=(1, 2, 1, 4)), dtype) for _ in range(2))
    options = dict(key_dim=4, dropout_layer=None, training=False, compute_dtype=dtype)
    core.scaled_dot_product_attention(q, k, k, LogitStructure(), need_weights=False, **options)
    fuses = {"float32": True, "bfloat16": ON_JAX, "float16": on_jax_gpu()}[dtype]
    assert len(fused_calls) == int(fuses)
    del fused_calls[:]
    for structure, key, value, need in [
        (LogitStructure(), k, k, True),
        (LogitStructure(top_k=1), k, k, False),
        (LogitStructure(), k[0], k[0], False),
        (LogitStructure(), k, k[..., :2], False),
    ]:
        core.scaled_dot_product_attention(q, key, value, structure, need_weights=need, **options)
    assert fused_calls == []


def test_float16_bias_clip_keeps_rows_finite(fused_calls, monkeypatch):
    """A float32 bias beyond float16's range (here -1e5, a shift of a whole
    row, and +-1e5 on masked keys) would be inf after the cast to float16 and
    give NaN; clipped, the fused output is the explicit one. float16 fuses
    on JAX GPUs only; the fused path is forced here (eager calls, which also
    run on a CPU and on TensorFlow, whose kernel casts the bias alike)."""
    monkeypatch.setattr(core, "fused_dtype", lambda dtype: True)
    rng = np.random.default_rng(4)
    q, k, v = (ops.cast(rng.normal(size=(2, 3, 2, 4)), "float16") for _ in range(3))
    allowed = np.ones((2, 2, 3, 3), bool)
    allowed[0, :, 1, 1:] = False
    allowed[1, 0, 2] = False  # no key for query 2 of head 0
    bias = np.full((2, 2, 3, 3), -1e5, "float32")
    bias[0, :, 1, 1:] = 1e5  # masked keys with a huge bias stay masked
    bias[1] = rng.normal(size=(2, 3, 3))
    structure = LogitStructure(allowed=ops.convert_to_tensor(allowed),
                               bias=ops.convert_to_tensor(bias))
    options = dict(key_dim=4, dropout_layer=None, training=False, compute_dtype="float16")
    fused, _ = core.scaled_dot_product_attention(q, k, v, structure, need_weights=False, **options)
    assert len(fused_calls) == 1
    explicit, _ = core.scaled_dot_product_attention(q, k, v, structure, need_weights=True,
                                                    **options)
    fused, explicit = to_numpy(fused), to_numpy(explicit)
    assert np.isfinite(fused).all()
    np.testing.assert_allclose(fused, explicit, rtol=0, atol=1e-2)
    np.testing.assert_array_equal(fused[0, 1], to_numpy(v)[0, 0])  # the one allowed key
    np.testing.assert_array_equal(fused[1, 2, 0], 0.0)
