"""Tests of `GatedMultiHeadAttention` (MUAN gated self-attention, Yu et al., 2019).

The layer is checked against a NumPy reference written here with explicit
loops over batch, token, head, query and key, straight from the paper's
Eqs. 4-6 (arXiv:1908.04107): Q, K, V
projections with the layer's own kernels; per token (and head), pooled =
FC_q^g(q) * FC_k^g(k), gate = sigmoid(FC_g(pooled)) = [M_q, M_k] (Eq. 5),
channel 0 scaling the query and channel 1 the key; logits scaled by key_dim**-0.5; softmax over
the allowed keys, zero weights for rows without any; output projection.
Plus: `qk_gate=False` is Keras MHA, the gate changes the attention, a
constant gate is a temperature, Keras conventions (config and `.keras`
round trips, symbolic shapes, `fit` under XLA, mixed precision, dropout
seeds) and argument validation.
"""

import math

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from keras import ops

from keras_structattn.layers._masking import get_keras_mask
from keras_structattn.layers.gated_attention import GatedMultiHeadAttention
from tests._backend import gradients
from tests.layers.mha_cases import REFUSED_MHA_ARGUMENTS
from tests.layers.weights import randomize
from tests.layers.weights import to_np
from tests.layers.weights import weights_by_last_names as weights_by_name
from tests.reference import softmax_row

DIM = 8


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def reference_gates(layer, q, k):
    """Gates [B, N, T, 2] by loops from projected q, k [B, T, N, d_h]."""
    w = weights_by_name(layer)
    B, T, N, d_h = q.shape
    gates = np.ones((B, N, T, 2))
    if not layer.qk_gate:
        return gates
    wq, wk, wo = (w[f"qk_gate_{n}/kernel"] for n in ("query", "key", "output"))
    bq, bk, bo = (w.get(f"qk_gate_{n}/bias") for n in ("query", "key", "output"))
    for b in range(B):
        for t in range(T):
            for h in range(N):
                if not layer.gate_per_head:
                    # One gate from the full-width (concatenated heads) q, k.
                    q_in, k_in = q[b, t].reshape(-1), k[b, t].reshape(-1)
                    Wq, Wk = wq.reshape(N * d_h, -1), wk.reshape(N * d_h, -1)
                    Bq, Bk, Wo, Bo = bq, bk, wo, bo
                elif layer.share_gate_weights_across_heads:
                    q_in, k_in = q[b, t, h], k[b, t, h]
                    Wq, Wk, Bq, Bk, Wo, Bo = wq, wk, bq, bk, wo, bo
                else:
                    q_in, k_in, Wq, Wk, Wo = q[b, t, h], k[b, t, h], wq[h], wk[h], wo[h]
                    Bq, Bk, Bo = (None if x is None else x[h] for x in (bq, bk, bo))
                d_g = Wq.shape[1]
                pooled = []
                for g in range(d_g):
                    pq = sum(q_in[i] * Wq[i, g] for i in range(len(q_in)))
                    pk = sum(k_in[i] * Wk[i, g] for i in range(len(k_in)))
                    pq += 0 if Bq is None else Bq[g]
                    pk += 0 if Bk is None else Bk[g]
                    pooled.append(pq * pk)
                for c in range(2):
                    logit = sum(pooled[g] * Wo[g, c] for g in range(d_g))
                    logit += 0 if Bo is None else Bo[c]
                    gates[b, h, t, c] = sigmoid(logit)
    return gates


def reference(layer, query, value=None, mask=None):
    """The layer by loops. `mask`: boolean [B, T, S] (True = may attend).

    Returns (output [B, T, dim_out], weights [B, N, T, S], gates [B, N, T, 2])."""
    value = query if value is None else value
    w = weights_by_name(layer)
    N, key_dim = layer.num_heads, layer.key_dim

    def project(x, name):
        return np.einsum("btd,dnk->btnk", x, w[f"{name}/kernel"]) + w.get(f"{name}/bias", 0.0)

    q, k, v = project(query, "query"), project(value, "key"), project(value, "value")
    gates = reference_gates(layer, q, k)
    B, T, S = q.shape[0], q.shape[1], k.shape[1]
    weights = np.zeros((B, N, T, S))
    context = np.zeros((B, T, N, v.shape[-1]))
    for b in range(B):
        for h in range(N):
            for i in range(T):
                q_gated = q[b, i, h] * gates[b, h, i, 0]  # channel 0: the query (Eq. 5)
                logits, allowed = [], []
                for j in range(S):
                    k_gated = k[b, j, h] * gates[b, h, j, 1]  # channel 1: the key
                    logits.append(float(np.dot(q_gated, k_gated)) / math.sqrt(key_dim))
                    allowed.append(mask is None or bool(mask[b, i, j]))
                if not any(allowed):
                    continue  # zero weights, zero context
                weights[b, h, i] = softmax_row(logits, allowed)
                for j in range(S):
                    context[b, i, h] += weights[b, h, i, j] * v[b, j, h]
    out = np.einsum("btnk,nkd->btd", context, w["attention_output/kernel"])
    return out + w.get("attention_output/bias", 0.0), weights, gates


def random_inputs(seed, B=2, T=5, dim=DIM):
    return np.random.default_rng(seed).normal(size=(B, T, dim)).astype("float32")


CASES = {
    "per_head_shared": dict(num_heads=2, key_dim=3),
    "per_head_own": dict(num_heads=3, key_dim=2, share_gate_weights_across_heads=False),
    "full_width": dict(num_heads=2, key_dim=3, gate_per_head=False),
    "gate_dim_5": dict(num_heads=2, key_dim=3, gate_dim=5),
    "no_bias_value_dim": dict(num_heads=2, key_dim=3, value_dim=4, use_bias=False),
    "no_gate": dict(num_heads=2, key_dim=3, qk_gate=False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_loop_reference(case):
    layer = GatedMultiHeadAttention(**CASES[case])
    x = random_inputs(1)
    layer(x, x)
    randomize(layer, 2)
    out, weights, gates = layer(x, x, return_attention_scores=True, return_gates=True)
    expected_out, expected_weights, expected_gates = reference(layer, x)
    np.testing.assert_allclose(to_np(gates), expected_gates, atol=2e-6)
    np.testing.assert_allclose(to_np(weights), expected_weights, atol=2e-6)
    np.testing.assert_allclose(to_np(out), expected_out, rtol=1e-5, atol=1e-5)
    if layer.qk_gate:
        # Not vacuous: the gates spread over (0, 1), the two channels and the
        # tokens differ, and heads differ unless one gate serves them all.
        assert expected_gates.std() > 0.05
        assert not np.allclose(expected_gates[..., 0], expected_gates[..., 1], atol=1e-3)
        if layer.gate_per_head:
            assert not np.allclose(expected_gates[:, 0], expected_gates[:, 1], atol=1e-3)
        else:
            np.testing.assert_allclose(expected_gates[:, 0], expected_gates[:, 1])


def test_masks_and_zero_rows_match_reference():
    layer = GatedMultiHeadAttention(num_heads=2, key_dim=3)
    x = random_inputs(3, T=6)
    rng = np.random.default_rng(4)
    attention_mask = rng.random((2, 6, 6)) < 0.7
    attention_mask[0, 2] = False  # a row without any key
    value_mask = np.ones((2, 6), bool)
    value_mask[1, 4:] = False
    layer(x, x)
    randomize(layer, 5)
    out, weights = layer(x, x, attention_mask=attention_mask, value_mask=value_mask,
                         use_causal_mask=True, return_attention_scores=True)
    mask = attention_mask & value_mask[:, None, :] & np.tril(np.ones((6, 6), bool))[None]
    expected_out, expected_weights, _ = reference(layer, x, mask=mask)
    np.testing.assert_allclose(to_np(weights), expected_weights, atol=2e-6)
    np.testing.assert_allclose(to_np(out), expected_out, rtol=1e-5, atol=1e-5)
    # The masked row is the output projection's bias alone.
    np.testing.assert_allclose(to_np(out)[0, 2], weights_by_name(layer)["attention_output/bias"],
                               atol=1e-6)
    # The same result whether or not the scores are asked for (one code path).
    np.testing.assert_allclose(
        to_np(layer(x, x, attention_mask=attention_mask, value_mask=value_mask,
                    use_causal_mask=True)), to_np(out), atol=1e-6)


def test_keras_masks_are_read_and_propagated():
    """An Embedding(mask_zero=True) mask masks the keys and the query rows
    (Keras MHA semantics), and the output keeps the query's mask."""
    tokens = np.array([[3, 1, 4, 0, 0], [2, 7, 1, 8, 2]])
    embed = keras.layers.Embedding(10, DIM, mask_zero=True)
    layer = GatedMultiHeadAttention(num_heads=2, key_dim=3)
    x = embed(tokens)
    out, weights = layer(x, x, return_attention_scores=True)
    padding = tokens != 0
    assert (to_np(weights)[0, :, :, 3:] == 0).all()
    assert (to_np(weights)[0, :, 3:] == 0).all()  # padded query rows zeroed
    np.testing.assert_array_equal(to_np(get_keras_mask(out)) > 0, padding)


@settings(deadline=None, max_examples=10)
@given(seed=st.integers(0, 10_000), per_head=st.booleans(), padded=st.integers(0, 3))
def test_permutation_equivariance_and_gate_locality(seed, per_head, padded):
    """Properties: permuting the tokens (and the key mask) permutes the
    outputs, weights and gates; the gate of a token depends on that token
    only; weights are a distribution over the allowed keys."""
    rng = np.random.default_rng(seed)
    layer = GatedMultiHeadAttention(num_heads=2, key_dim=3, gate_per_head=per_head)
    x = random_inputs(seed)
    key_mask = np.ones((2, 5), bool)
    key_mask[1, 5 - padded:] = False
    layer(x, x)
    randomize(layer, seed + 1)

    def run(inputs, mask):
        out, w, g = layer(inputs, inputs, attention_mask=mask[:, None, :],
                          return_attention_scores=True, return_gates=True)
        return to_np(out), to_np(w), to_np(g)

    out, weights, gates = run(x, key_mask)
    perm = rng.permutation(5)
    out_p, weights_p, gates_p = run(x[:, perm], key_mask[:, perm])
    np.testing.assert_allclose(out_p, out[:, perm], atol=1e-5)
    np.testing.assert_allclose(weights_p, weights[:, :, perm][..., perm], atol=1e-6)
    np.testing.assert_allclose(gates_p, gates[:, :, perm], atol=1e-6)
    # Gate locality: changing token 0 changes only token 0's gates.
    changed = x.copy()
    changed[:, 0] = rng.normal(size=(2, DIM))
    gates_c = run(changed, key_mask)[2]
    np.testing.assert_allclose(gates_c[:, :, 1:], gates[:, :, 1:], atol=1e-6)
    assert np.abs(gates_c[:, :, 0] - gates[:, :, 0]).max() > 1e-4
    assert ((gates >= 0) & (gates <= 1)).all()
    assert (weights[1, :, :, ~key_mask[1]] == 0).all()
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


# ------------------------------------------------- MHA and the gate's effect


def test_without_gate_equals_keras_mha():
    """`qk_gate=False` is Keras MHA with the same weights (the paper's
    ablation), masks and scores included; Keras's own `use_gate` (an output
    gate) still works and is not the MUAN gate."""
    x = random_inputs(6)
    mask = np.random.default_rng(7).random((2, 5, 5)) < 0.6
    mask[..., 0] = True
    for use_gate in (False, True):
        layer = GatedMultiHeadAttention(num_heads=2, key_dim=4, qk_gate=False, use_gate=use_gate)
        mha = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, use_gate=use_gate)
        layer(x, x)
        mha(x, x)
        assert len(layer.weights) == len(mha.weights)
        randomize(layer, 8)
        mha.set_weights(layer.get_weights())
        np.testing.assert_allclose(to_np(layer(x, x)), to_np(mha(x, x)), rtol=1e-5, atol=1e-5)
        out, scores = layer(x, x, attention_mask=mask, return_attention_scores=True)
        mha_out, mha_scores = mha(x, x, attention_mask=mask, return_attention_scores=True)
        np.testing.assert_allclose(to_np(out), to_np(mha_out), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(to_np(scores), to_np(mha_scores), atol=1e-6)


def test_keras_output_gate_together_with_qk_gate():
    x = random_inputs(9)
    both = GatedMultiHeadAttention(num_heads=2, key_dim=3, use_gate=True)
    only_qk = GatedMultiHeadAttention(num_heads=2, key_dim=3)
    both(x, x)
    only_qk(x, x)
    names = set(weights_by_name(both))
    assert {"gate/kernel", "qk_gate_query/kernel", "qk_gate_output/kernel"} <= names
    randomize(both, 10)
    by_name = weights_by_name(both)
    for w in only_qk.weights:
        w.assign(by_name["/".join(w.path.split("/")[-2:])])
    # The output gate multiplies the per-head context before the output
    # projection: undo the projection's bias, compare per head.
    gate = 1 / (1 + np.exp(-(np.einsum("btd,dnk->btnk", x, by_name["gate/kernel"])
                             + by_name["gate/bias"])))
    _, weights, gates = reference(only_qk, x)
    np.testing.assert_allclose(to_np(only_qk(x, x, return_gates=True)[1]), gates, atol=2e-6)
    v = np.einsum("btd,dnk->btnk", x, by_name["value/kernel"]) + by_name["value/bias"]
    context = np.einsum("bnts,bsnk->btnk", weights, v) * gate
    expected = np.einsum("btnk,nkd->btd", context, by_name["attention_output/kernel"])
    np.testing.assert_allclose(to_np(both(x, x)), expected + by_name["attention_output/bias"],
                               rtol=1e-5, atol=1e-5)


def test_gate_changes_the_attention():
    """The gated layer and the ungated one with the same Q/K/V/O weights
    attend differently, and each head's gates depend on the token."""
    x = random_inputs(11)
    gated = GatedMultiHeadAttention(num_heads=2, key_dim=4)
    plain = GatedMultiHeadAttention(num_heads=2, key_dim=4, qk_gate=False)
    gated(x, x)
    plain(x, x)
    randomize(gated, 12)
    by_name = weights_by_name(gated)
    for w in plain.weights:
        w.assign(by_name["/".join(w.path.split("/")[-2:])])
    _, w_gated, gates = gated(x, x, return_attention_scores=True, return_gates=True)
    _, w_plain = plain(x, x, return_attention_scores=True)
    assert np.abs(to_np(w_gated) - to_np(w_plain)).max() > 0.05
    assert to_np(gates).std(axis=2).min() > 1e-3


@pytest.mark.parametrize("per_head", [True, False])
def test_constant_gates_are_a_temperature(per_head):
    """With FC_g's kernel zero, the gates are constants a (query, channel
    0) and b (key, channel 1) from its bias, so the logits are scaled by a * b: the same as
    Keras MHA with the query projection scaled by a * b."""
    x = random_inputs(13)
    layer = GatedMultiHeadAttention(num_heads=2, key_dim=4, gate_per_head=per_head)
    mha = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    layer(x, x)
    mha(x, x)
    randomize(layer, 14)
    a, b = 0.3, 0.8
    layer._qk_gate_output.kernel.assign(np.zeros(layer._qk_gate_output.kernel.shape))
    layer._qk_gate_output.bias.assign(np.log(np.array([a, b]) / (1 - np.array([a, b]))))
    mha_weights = layer.get_weights()[:8]  # query, key, value, output
    mha_weights[0] = mha_weights[0] * a * b  # query kernel
    mha_weights[1] = mha_weights[1] * a * b  # query bias
    mha.set_weights(mha_weights)
    out, gates = layer(x, x, return_gates=True)
    np.testing.assert_allclose(to_np(gates)[..., 0], a, atol=1e-6)
    np.testing.assert_allclose(to_np(gates)[..., 1], b, atol=1e-6)
    np.testing.assert_allclose(to_np(out), to_np(mha(x, x)), rtol=1e-5, atol=1e-5)


def test_zero_rows_have_finite_gradients():
    x = random_inputs(15)
    mask = np.ones((2, 5, 5), bool)
    mask[0, 1] = False
    layer = GatedMultiHeadAttention(num_heads=2, key_dim=3)
    layer(x, x)
    randomize(layer, 16)
    out = to_np(layer(x, x, attention_mask=mask))
    bias = weights_by_name(layer)["attention_output/bias"]
    np.testing.assert_allclose(out[0, 1], bias, atol=1e-6)

    def loss(inputs):
        return ops.sum(layer(inputs, inputs, attention_mask=mask) ** 2)

    (grad,) = gradients(loss, x)
    assert np.isfinite(grad).all() and np.abs(grad).max() > 0


def test_gradient_matches_finite_differences():
    x = random_inputs(17, B=1, T=4)
    layer = GatedMultiHeadAttention(num_heads=2, key_dim=3)
    layer(x, x)
    randomize(layer, 18)
    direction = np.random.default_rng(19).normal(size=x.shape)

    def loss(inputs):
        return ops.sum(layer(inputs, inputs) ** 2)

    (grad,) = gradients(loss, x)
    eps = 1e-2
    f = lambda z: float(to_np(loss(z.astype("float32"))))  # noqa: E731
    numeric = (f(x + eps * direction) - f(x - eps * direction)) / (2 * eps)
    np.testing.assert_allclose((grad * direction).sum(), numeric, rtol=2e-2, atol=2e-3)


# ------------------------------------------------------- Keras conventions


def test_config_and_keras_file_round_trip(tmp_path):
    inputs = keras.Input((5, DIM))
    layer = GatedMultiHeadAttention(num_heads=2, key_dim=3, gate_dim=4,
                                    share_gate_weights_across_heads=False, dropout=0.1, seed=3)
    outputs, gates = layer(inputs, inputs, return_gates=True)
    assert outputs.shape == (None, 5, DIM) and gates.shape == (None, 2, 5, 2)
    model = keras.Model(inputs, [outputs, gates])
    randomize(layer, 20)
    x = random_inputs(21)
    expected = [to_np(t) for t in model(x)]
    path = tmp_path / "gated.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    for got, want in zip(loaded(x), expected):
        np.testing.assert_allclose(to_np(got), want, atol=1e-6)
    config = layer.get_config()
    clone = GatedMultiHeadAttention.from_config(config)
    assert clone.get_config() == config
    assert config["gate_dim"] == 4 and config["share_gate_weights_across_heads"] is False
    assert GatedMultiHeadAttention(2, 6).get_config()["gate_dim"] == 6  # default d_g = d_h


def test_symbolic_shapes():
    inputs = keras.Input((5, DIM))
    layer = GatedMultiHeadAttention(num_heads=3, key_dim=2, output_shape=6)
    out, scores, gates = layer(inputs, inputs, return_attention_scores=True, return_gates=True)
    assert out.shape == (None, 5, 6) and scores.shape == (None, 3, 5, 5)
    assert gates.shape == (None, 3, 5, 2)
    assert scores.dtype == "float32" and gates.dtype == "float32"
    assert layer.compute_output_shape((2, 5, DIM), (2, 5, DIM)) == (2, 5, 6)
    x = random_inputs(22)
    eager = layer(x, x, return_attention_scores=True, return_gates=True)
    assert [tuple(t.shape) for t in eager] == [(2, 5, 6), (2, 3, 5, 5), (2, 3, 5, 2)]
    # Unknown lengths: built and called symbolically, then on any length.
    ragged = keras.Input((None, DIM))
    out, gates = GatedMultiHeadAttention(num_heads=3, key_dim=2)(ragged, ragged, return_gates=True)
    assert out.shape == (None, None, DIM) and gates.shape == (None, 3, None, 2)
    model = keras.Model(ragged, [out, gates])
    assert [tuple(t.shape) for t in model(random_inputs(23, T=7))] == [(2, 7, DIM), (2, 3, 7, 2)]


def test_fit_with_xla():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((5, DIM))
    layer = GatedMultiHeadAttention(num_heads=2, key_dim=3, dropout=0.1, seed=1)
    model = keras.Model(inputs, keras.layers.Dense(1)(layer(inputs, inputs)))
    model.compile(keras.optimizers.Adam(1e-2), "mse", jit_compile=True)
    rng = np.random.default_rng(23)
    x = rng.normal(size=(16, 5, DIM)).astype("float32")
    before = to_np(layer._qk_gate_key.kernel)
    history = model.fit(x, rng.normal(size=(16, 5, 1)), epochs=3, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert np.abs(to_np(layer._qk_gate_key.kernel) - before).max() > 0  # the gate trains


def test_mixed_precision():
    x = random_inputs(24)
    mask = np.ones((2, 5, 5), bool)
    mask[1, 0] = False
    layer32 = GatedMultiHeadAttention(num_heads=2, key_dim=4)
    layer16 = GatedMultiHeadAttention(num_heads=2, key_dim=4, dtype="mixed_float16")
    layer32(x, x)
    layer16(x, x)
    randomize(layer32, 25)
    layer16.set_weights(layer32.get_weights())
    out16, weights16, gates16 = layer16(x, x, attention_mask=mask, return_attention_scores=True,
                                        return_gates=True)
    assert keras.backend.standardize_dtype(out16.dtype) == "float16"
    assert keras.backend.standardize_dtype(weights16.dtype) == "float32"
    assert keras.backend.standardize_dtype(gates16.dtype) == "float32"
    assert keras.backend.standardize_dtype(layer16._qk_gate_output.kernel.dtype) == "float32"
    assert np.isfinite(to_np(out16)).all()
    out32, _, gates32 = layer32(x, x, attention_mask=mask, return_attention_scores=True,
                                return_gates=True)
    np.testing.assert_allclose(to_np(out16), to_np(out32), atol=3e-2, rtol=3e-2)
    np.testing.assert_allclose(to_np(gates16), to_np(gates32), atol=3e-3)


def test_dropout_is_seeded_and_only_in_training():
    x = random_inputs(26)
    def make():
        return GatedMultiHeadAttention(num_heads=2, key_dim=3, dropout=0.5, seed=4)

    a, b = make(), make()
    a(x, x)
    b(x, x)
    b.set_weights(a.get_weights())
    train_a = to_np(a(x, x, training=True))
    np.testing.assert_allclose(train_a, to_np(b(x, x, training=True)))
    infer = to_np(a(x, x))
    assert np.abs(train_a - infer).max() > 1e-4
    np.testing.assert_allclose(infer, to_np(a(x, x)))


# ------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(gate_dim=0), "gate_dim"),
        (dict(gate_dim=2.5), "gate_dim"),
        (dict(gate_per_head="yes"), "gate_per_head"),
        (dict(qk_gate=1), "qk_gate"),
        (dict(share_gate_weights_across_heads=None), "share_gate_weights_across_heads"),
        (dict(gate_per_head=False, share_gate_weights_across_heads=False),
         "share_gate_weights_across_heads"),
        *REFUSED_MHA_ARGUMENTS,
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GatedMultiHeadAttention(num_heads=2, key_dim=3, **kwargs)


def test_query_and_key_of_different_lengths_are_rejected():
    x, memory = random_inputs(27), random_inputs(28, T=7)
    with pytest.raises(ValueError, match="same length"):
        GatedMultiHeadAttention(num_heads=2, key_dim=3)(x, memory)  # at build
    layer = GatedMultiHeadAttention(num_heads=2, key_dim=3)
    layer(x, x)
    with pytest.raises(ValueError, match="same length"):
        layer(x, memory)  # built
    with pytest.raises(ValueError, match="same length"):
        layer(x, x, key=memory)
    with pytest.raises(ValueError, match="same length"):
        GatedMultiHeadAttention(num_heads=2, key_dim=3)(
            keras.Input((5, DIM)), keras.Input((7, DIM)))


@pytest.mark.parametrize("gate_per_head", [True, False])
def test_fused_path_equals_the_explicit_one(gate_per_head):
    """Without returned weights or dropout the layer takes the fused
    `dot_product_attention` kernel; it must give what the explicit softmax
    gives (computed when the weights are asked for), zero rows included."""
    x = random_inputs(31, T=6)
    mask = np.random.default_rng(32).random((2, 6, 6)) < 0.6
    mask[0, 2] = False  # a row with no allowed key
    value_mask = np.ones((2, 6), bool)
    value_mask[1, 4:] = False
    layer = GatedMultiHeadAttention(num_heads=2, key_dim=4, gate_per_head=gate_per_head)
    layer(x, x)
    randomize(layer, 33)
    for kwargs in (dict(), dict(attention_mask=mask), dict(value_mask=value_mask),
                   dict(attention_mask=mask, use_causal_mask=True)):
        fused = to_np(layer(x, x, **kwargs))
        explicit, _ = layer(x, x, return_attention_scores=True, **kwargs)
        np.testing.assert_allclose(fused, to_np(explicit), rtol=1e-5, atol=1e-5)
    bias = next(to_np(w) for w in layer.weights if w.path.endswith("attention_output/bias"))
    np.testing.assert_allclose(to_np(layer(x, x, attention_mask=mask))[0, 2], bias, atol=1e-6)


# ------------------------------------------------- where the gates start


def test_a_large_gate_bias_starts_the_gates_at_one_and_the_logits_unscaled():
    """With FC_g's bias initialised large, M = sigmoid(...) is ~1 at
    initialisation (Eq. 5), so the gated layer's attention equals the
    plain one's (`qk_gate=False`, the same Q, K, V and output weights): the
    gate's function apart from its initial scaling. At the default zero bias
    the gates start near 0.5 and the attention is flatter (higher entropy)."""
    x = random_inputs(30)
    plain = GatedMultiHeadAttention(num_heads=2, key_dim=4, qk_gate=False)
    high = GatedMultiHeadAttention(num_heads=2, key_dim=4,
                                   gate_bias_initializer=keras.initializers.Constant(30.0))
    zero = GatedMultiHeadAttention(num_heads=2, key_dim=4)
    plain(x, x)
    out, scores, gates = high(x, x, return_attention_scores=True, return_gates=True)
    np.testing.assert_allclose(to_np(gates), 1.0, atol=1e-6)
    # The gate's bias is the constant; the rest of the layer is initialised as usual.
    assert np.all(weights_by_name(high)["qk_gate_output/bias"] == 30.0)
    qkvo = {n: w for n, w in weights_by_name(high).items() if not n.startswith("qk_gate")}
    for variable in plain.weights:
        name = "/".join(variable.path.split("/")[-2:])
        variable.assign(qkvo[name])
    plain_out, plain_scores = plain(x, x, return_attention_scores=True)
    np.testing.assert_allclose(to_np(scores), to_np(plain_scores), atol=1e-6)
    np.testing.assert_allclose(to_np(out), to_np(plain_out), rtol=1e-5, atol=1e-5)
    zero(x, x)
    for variable in zero.weights:
        name = "/".join(variable.path.split("/")[-2:])
        if not name.startswith("qk_gate"):
            variable.assign(qkvo[name])
    _, zero_scores, zero_gates = zero(x, x, return_attention_scores=True, return_gates=True)
    assert 0.3 < float(np.mean(to_np(zero_gates))) < 0.7
    def entropy(weights):
        weights = to_np(weights)
        return float(np.mean(-np.sum(weights * np.log(weights + 1e-12), axis=-1)))

    assert entropy(zero_scores) > entropy(plain_scores)


def test_gate_bias_initializer_round_trips_and_needs_biases():
    layer = GatedMultiHeadAttention(num_heads=2, key_dim=4,
                                    gate_bias_initializer=keras.initializers.Constant(4.0))
    config = layer.get_config()
    clone = GatedMultiHeadAttention.from_config(config)
    assert clone.get_config() == config
    x = random_inputs(31)
    clone(x, x)
    assert np.all(weights_by_name(clone)["qk_gate_output/bias"] == 4.0)
    # The other biases keep the layer's initializer.
    assert np.all(weights_by_name(clone)["qk_gate_query/bias"] == 0.0)
    assert GatedMultiHeadAttention(2, 4).get_config()["gate_bias_initializer"] is None
    with pytest.raises(ValueError, match="gate_bias_initializer"):
        GatedMultiHeadAttention(num_heads=2, key_dim=4, use_bias=False,
                                gate_bias_initializer="ones")
