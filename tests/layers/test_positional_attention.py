"""Tests of `PositionalMultiHeadAttention` (MCAN+PA).

The reference below computes the layer with explicit loops over batch,
head, query and key, from the paper's Eqs. 5-8 and 13-14
(docs/positional_attention.md): semantic logits `q.k / sqrt(d_h)`;
positional logits from the projected position vectors
(`p_q.p_k / sqrt(d_h)`) or from the box geometry (the loop references of
tests/ops/test_box_geometry.py, projected by `W_G`); the fusion; a softmax
over the allowed keys with zero rows; the output projection.
"""

import math
import os

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from keras import ops

from keras_structattn.layers import PositionalMultiHeadAttention
from keras_structattn.layers import positional_multimodal_attention
from keras_structattn.layers import positional_object_attention
from keras_structattn.layers import positional_word_attention
from keras_structattn.layers._masking import get_keras_mask
from keras_structattn.layers.positional_attention import POA_VARIANTS
from tests._backend import gradients
from tests._backend import jit
from tests.layers.mha_cases import REFUSED_MHA_ARGUMENTS
from tests.layers.weights import randomize
from tests.layers.weights import to_np
from tests.layers.weights import weights_by_last_names as weights_by_name
from tests.ops.test_box_geometry import random_boxes
from tests.ops.test_box_geometry import reference_embedding
from tests.ops.test_box_geometry import reference_geometry
from tests.reference import softmax_row

DIM = 8


def reference(layer, query, value, query_pos, key_pos, mask=None):
    """(output, weights, semantic, positional) of the layer by loops."""
    config = layer.get_config()
    w = weights_by_name(layer)
    heads, key_dim = layer.num_heads, layer.key_dim

    def project(x, name):
        return np.einsum("btd,dnk->btnk", x, w[f"{name}/kernel"]) + w.get(f"{name}/bias", 0.0)

    q, k, v = project(query, "query"), project(value, "key"), project(value, "value")
    B, T, S = q.shape[0], q.shape[1], k.shape[1]
    if layer.position_type == "vectors":
        pq, pk = project(query_pos, "position_query"), project(key_pos, "position_key")
    else:
        kernel = w[_geometry_name(w, "kernel")]
        bias = w.get(_geometry_name(w, "bias"), np.zeros(kernel.shape[1]))
    semantic, positional = np.zeros((B, heads, T, S)), np.zeros((B, heads, T, S))
    for b in range(B):
        if layer.position_type == "boxes":
            embedded = reference_embedding(
                reference_geometry(query_pos[b], key_pos[b], config["size_ratio"],
                                   config["box_size_offset"], config["geometry_clip"]),
                config["geometry_dim"], config["geometry_wavelength"], config["geometry_scale"],
                config["geometry_ordering"])
        for h in range(heads):
            for i in range(T):
                for j in range(S):
                    semantic[b, h, i, j] = np.dot(q[b, i, h], k[b, j, h]) / math.sqrt(key_dim)
                    if layer.position_type == "vectors":
                        positional[b, h, i, j] = np.dot(pq[b, i, h], pk[b, j, h]) / math.sqrt(
                            key_dim)
                    else:
                        col = 0 if kernel.shape[1] == 1 else h
                        positional[b, h, i, j] = np.dot(embedded[i, j], kernel[:, col]) + bias[col]
    weights = np.zeros((B, heads, T, S))
    context = np.zeros((B, T, heads, v.shape[-1]))
    for b in range(B):
        for h in range(heads):
            for i in range(T):
                logits, allowed = [], []
                for j in range(S):
                    sem, pos = semantic[b, h, i, j], positional[b, h, i, j]
                    if layer.fusion == "scaled_sum":
                        logits.append((sem + pos) / math.sqrt(2))
                    elif layer.fusion == "relation_network":
                        logits.append(sem + math.log(max(pos, 1e-6)))
                    else:
                        logits.append(sem + max(pos, 0.0))
                    allowed.append(mask is None or bool(mask[b, i, j]))
                if not any(allowed):
                    continue
                weights[b, h, i] = softmax_row(logits, allowed)
                for j in range(S):
                    context[b, i, h] += weights[b, h, i, j] * v[b, j, h]
    out = np.einsum("btnk,nkd->btd", context, w["attention_output/kernel"])
    return out + w.get("attention_output/bias", 0.0), weights, semantic, positional


def _geometry_name(weights, what):
    names = [name for name in weights if name.endswith(f"geometry_{what}")]
    return names[0] if names else f"missing geometry_{what}"


def inputs(seed, B=2, T=5, S=None, dim=DIM, position_dim=DIM):
    rng = np.random.default_rng(seed)
    S = T if S is None else S
    query = rng.normal(size=(B, T, dim)).astype("float32")
    value = rng.normal(size=(B, S, dim)).astype("float32")
    return dict(
        query=query,
        value=value,
        query_positions=rng.normal(size=(B, T, position_dim)).astype("float32"),
        key_positions=rng.normal(size=(B, S, position_dim)).astype("float32"),
        query_boxes=random_boxes(rng, (B, T)),
        key_boxes=random_boxes(rng, (B, S)),
    )


def position_kwargs(layer, data, self_attention=True):
    if layer.position_type == "vectors":
        kwargs = dict(query_positions=data["query_positions"])
        if not self_attention:
            kwargs["key_positions"] = data["key_positions"]
    else:
        kwargs = dict(query_boxes=data["query_boxes"])
        if not self_attention:
            kwargs["key_boxes"] = data["key_boxes"]
    return kwargs


def run_reference(layer, data, self_attention=True, mask=None):
    value = data["query"] if self_attention else data["value"]
    if layer.position_type == "vectors":
        qp = data["query_positions"]
        kp = qp if self_attention else data["key_positions"]
    else:
        qp = data["query_boxes"]
        kp = qp if self_attention else data["key_boxes"]
    return reference(layer, data["query"], value, qp, kp, mask)


CASES = {
    "pwa": (lambda: positional_word_attention(2, 3), True),
    "pma_cross": (lambda: positional_multimodal_attention(2, 3, position_dim=6), False),
    "vectors_relation_network": (
        lambda: PositionalMultiHeadAttention(2, 3, fusion="relation_network"), True),
    "vectors_no_bias_value_dim": (
        lambda: positional_word_attention(3, 2, use_bias=False, value_dim=4), True),
    "poa_paper": (lambda: positional_object_attention(2, 3, geometry_dim=16), True),
    "poa_released": (lambda: positional_object_attention(2, 3, variant="released"), True),
    "poa_relation_network": (
        lambda: positional_object_attention(2, 3, variant="relation_network", geometry_dim=24),
        True),
    "boxes_cross": (lambda: positional_object_attention(2, 3, geometry_dim=8), False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_loop_reference(case):
    make, self_attention = CASES[case]
    layer = make()
    width = 6 if case == "pma_cross" else DIM
    data = inputs(1, S=None if self_attention else 7, position_dim=width)
    value = data["query"] if self_attention else data["value"]
    kwargs = position_kwargs(layer, data, self_attention)
    layer(data["query"], value, **kwargs)
    randomize(layer, 2)
    out, weights, semantic, positional = layer(
        data["query"], value, return_attention_scores=True, return_raw_scores=True, **kwargs)
    expected = run_reference(layer, data, self_attention)
    np.testing.assert_allclose(to_np(semantic), expected[2], rtol=1e-5, atol=1e-5)
    # Geometry: float32 angles of hundreds of radians (see the ops tests).
    atol = 1e-5 if layer.position_type == "vectors" else 5e-4
    np.testing.assert_allclose(to_np(positional), expected[3], atol=atol, rtol=1e-4)
    np.testing.assert_allclose(to_np(weights), expected[1], atol=atol)
    np.testing.assert_allclose(to_np(out), expected[0], rtol=1e-4, atol=2 * atol)
    # Not vacuous: positions move the attention by more than the tolerance.
    assert np.abs(expected[3]).max() > 0.1
    assert to_np(positional).std(axis=(-1, -2)).min() > 1e-3


@pytest.mark.parametrize("case", ["pwa", "poa_paper", "poa_relation_network"])
def test_masks_and_zero_rows_match_reference(case):
    make, _ = CASES[case]
    layer = make()
    data = inputs(3, T=6)
    rng = np.random.default_rng(4)
    attention_mask = rng.random((2, 6, 6)) < 0.7
    attention_mask[0, 2] = False  # a row without any key
    value_mask = np.ones((2, 6), bool)
    value_mask[1, 4:] = False
    kwargs = position_kwargs(layer, data)
    x = data["query"]
    layer(x, x, **kwargs)
    randomize(layer, 5)
    out, weights = layer(x, x, attention_mask=attention_mask, value_mask=value_mask,
                         use_causal_mask=True, return_attention_scores=True, **kwargs)
    mask = attention_mask & value_mask[:, None, :] & np.tril(np.ones((6, 6), bool))[None]
    expected_out, expected_weights, _, _ = run_reference(layer, data, mask=mask)
    np.testing.assert_allclose(to_np(weights), expected_weights, atol=5e-4)
    np.testing.assert_allclose(to_np(out), expected_out, rtol=1e-4, atol=1e-3)
    bias = weights_by_name(layer)["attention_output/bias"]
    np.testing.assert_allclose(to_np(out)[0, 2], bias, atol=1e-6)
    # The fused kernel (no weights asked for) gives the same, zero rows included.
    fused = layer(x, x, attention_mask=attention_mask, value_mask=value_mask,
                  use_causal_mask=True, **kwargs)
    np.testing.assert_allclose(to_np(fused), to_np(out), rtol=1e-5, atol=1e-5)


def test_keras_masks_are_read_and_propagated():
    tokens = np.array([[3, 1, 4, 0, 0], [2, 7, 1, 8, 2]])
    embed = keras.layers.Embedding(10, DIM, mask_zero=True)
    positions = keras.layers.Embedding(5, DIM)(np.tile(np.arange(5), (2, 1)))
    layer = positional_word_attention(2, 3)
    x = embed(tokens)
    out, weights = layer(x, x, query_positions=positions, return_attention_scores=True)
    assert (to_np(weights)[0, :, :, 3:] == 0).all()
    assert (to_np(weights)[0, :, 3:] == 0).all()
    np.testing.assert_array_equal(to_np(get_keras_mask(out)) > 0, tokens != 0)


# ------------------------------------- the fusions and Keras MHA equivalence


def _copy_mha_weights(layer, mha, query_scale=1.0):
    by_name = weights_by_name(layer)
    for w in mha.weights:
        name = "/".join(w.path.split("/")[-2:])
        value = by_name[name]
        if name.startswith("query/"):
            value = value * query_scale
        w.assign(value.astype("float32"))


@pytest.mark.parametrize("fusion", ["scaled_sum", "relation_network", "add"])
@pytest.mark.parametrize("position_type", ["vectors", "boxes"])
def test_zero_positional_map_is_keras_mha(fusion, position_type):
    """With A_pos = 0 the layer is Keras MHA: exactly for "add" and
    "relation_network" (a constant log 1e-6 on every logit), and with the
    query kernel and bias scaled by 1/sqrt(2) for "scaled_sum"."""
    data = inputs(6)
    x = data["query"]
    mask = np.random.default_rng(7).random((2, 5, 5)) < 0.6
    mask[..., 0] = True
    layer = PositionalMultiHeadAttention(2, 4, position_type=position_type, fusion=fusion)
    kwargs = position_kwargs(layer, data)
    layer(x, x, **kwargs)
    randomize(layer, 8)
    for w in layer.weights:
        if "position_" in w.path or "geometry_" in w.path:
            w.assign(np.zeros(w.shape, "float32"))
    mha = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    mha(x, x)
    _copy_mha_weights(layer, mha, 1 / math.sqrt(2) if fusion == "scaled_sum" else 1.0)
    out, scores = layer(x, x, attention_mask=mask, return_attention_scores=True, **kwargs)
    mha_out, mha_scores = mha(x, x, attention_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(to_np(scores), to_np(mha_scores), atol=1e-6)
    np.testing.assert_allclose(to_np(out), to_np(mha_out), rtol=1e-5, atol=1e-5)
    if fusion == "scaled_sum":  # and without the scaling it is not MHA
        _copy_mha_weights(layer, mha)
        assert np.abs(to_np(mha(x, x)) - to_np(layer(x, x, **kwargs))).max() > 1e-3


def test_fusions_follow_their_formulas_on_the_raw_maps():
    """Eq. 8: softmax((A_sem + A_pos) / sqrt 2); Relation Networks (PA*):
    max(A_pos, 1e-6) exp(A_sem) normalised; "add": softmax(A_sem +
    relu(A_pos)), all from the layer's own raw maps."""
    data = inputs(9)
    x = data["query"]
    formulas = {
        "scaled_sum": lambda s, p: np.exp((s + p) / math.sqrt(2)),
        "relation_network": lambda s, p: np.maximum(p, 1e-6) * np.exp(s),
        "add": lambda s, p: np.exp(s + np.maximum(p, 0)),
    }
    for fusion, formula in formulas.items():
        layer = positional_object_attention(2, 4, fusion=fusion)
        layer(x, x, query_boxes=data["query_boxes"])
        randomize(layer, 10)
        _, weights, semantic, positional = layer(
            x, x, query_boxes=data["query_boxes"], return_attention_scores=True,
            return_raw_scores=True)
        unnormalised = formula(to_np(semantic), to_np(positional))
        np.testing.assert_allclose(
            to_np(weights), unnormalised / unnormalised.sum(-1, keepdims=True), atol=1e-5)
        if fusion == "relation_network":  # some pairs are switched off
            assert (to_np(positional) < 0).any()


def test_released_variant_shares_one_geometry_map_across_heads():
    data = inputs(11)
    x = data["query"]
    layer = positional_object_attention(4, 2, variant="released")
    layer(x, x, query_boxes=data["query_boxes"])
    randomize(layer, 12)
    assert tuple(layer.geometry_kernel.shape) == (64, 1)
    positional = to_np(layer(x, x, query_boxes=data["query_boxes"], return_raw_scores=True)[2])
    for h in range(1, 4):
        np.testing.assert_array_equal(positional[:, h], positional[:, 0])
    paper = positional_object_attention(4, 2)
    paper(x, x, query_boxes=data["query_boxes"])
    assert tuple(paper.geometry_kernel.shape) == (64, 4)


@settings(deadline=None, max_examples=8)
@given(seed=st.integers(0, 10_000), factor_log2=st.integers(-3, 3),
       shift=st.integers(-128, 128))
def test_box_attention_is_translation_and_scale_invariant(seed, factor_log2, shift):
    """Geometry features are relative, so moving and scaling all boxes of an
    image leaves the layer's output unchanged (size offset 0). Boxes on a
    1/64 grid, moved by multiples of 1/64 and scaled by powers of two, stay
    exact in float32, so the invariance is checked without float32's
    conditioning of log|dx| (the ops tests cover arbitrary transforms)."""
    data = inputs(seed)
    x = data["query"]
    boxes = np.round(data["query_boxes"] * 64) / 64
    boxes[..., 2:] = np.maximum(boxes[..., 2:], boxes[..., :2] + 1 / 64)
    layer = positional_object_attention(2, 3, geometry_dim=16)
    layer(x, x, query_boxes=boxes)
    randomize(layer, seed + 1, scale=0.3)
    moved = (boxes * 2.0 ** factor_log2 + shift / 64).astype("float32")
    np.testing.assert_allclose(to_np(layer(x, x, query_boxes=moved)),
                               to_np(layer(x, x, query_boxes=boxes.astype("float32"))),
                               atol=1e-4)


def test_positions_change_the_output():
    data = inputs(13)
    x = data["query"]
    for layer, key in ((positional_word_attention(2, 3), "query_positions"),
                       (positional_object_attention(2, 3), "query_boxes")):
        layer(x, x, **{key: data[key]})
        randomize(layer, 14)
        rolled = np.roll(data[key], 1, axis=1)
        assert np.abs(to_np(layer(x, x, **{key: data[key]}))
                      - to_np(layer(x, x, **{key: rolled}))).max() > 1e-2



# Op by op matters on TensorFlow only (its own geometry layout); on JAX every
# op is XLA, and the op-by-op run costs ~15 s of compiling single ops.
@pytest.mark.parametrize(
    "compiled", [True] if keras.backend.backend() == "jax" else [False, True])
def test_positions_given_once_equal_positions_per_example(compiled):
    """`[1, T, P]` positions (word positions, the same in every sentence) and
    `[1, T, 4]` boxes give what the same rows repeated for the batch give,
    also with cross-attention and a mask."""
    data = inputs(15, B=3, T=4, S=6)
    x, v = data["query"], data["value"]
    mask = np.ones((3, 4, 6), bool)
    mask[1, :, 3:] = False
    cases = (
        (positional_multimodal_attention(2, 3), ("query_positions", "key_positions")),
        (positional_object_attention(2, 3), ("query_boxes", "key_boxes")),
    )
    for layer, names in cases:
        repeated = {n: np.repeat(data[n][:1], 3, axis=0) for n in names}
        layer(x, v, **repeated)
        randomize(layer, 16, scale=0.3)

        def call(x, v, positions, layer=layer):
            return layer(x, v, attention_mask=mask, return_attention_scores=True, **positions)

        run = jit(call) if compiled else call
        want = run(x, v, repeated)
        for once in names, names[:1], names[1:]:  # both given once, or one of them
            given = dict(repeated, **{n: data[n][:1] for n in once})
            for got, expected in zip(run(x, v, given), want):
                np.testing.assert_allclose(to_np(got), to_np(expected), atol=1e-5)

# ---------------------------------------------------------- gradients, NaN


def test_zero_rows_have_finite_gradients_and_padding_boxes_are_safe():
    data = inputs(15)
    x = data["query"]
    boxes = data["query_boxes"].copy()
    boxes[1, 3:] = 0.0  # padding boxes
    mask = np.ones((2, 5, 5), bool)
    mask[0, 1] = False
    mask[1, :, 3:] = False
    layer = positional_object_attention(2, 3, variant="relation_network")
    layer(x, x, query_boxes=boxes)
    randomize(layer, 16)

    def loss(inputs, kernel_free_boxes):
        return ops.sum(layer(inputs, inputs, query_boxes=kernel_free_boxes,
                             attention_mask=mask) ** 2)

    out = to_np(layer(x, x, query_boxes=boxes, attention_mask=mask))
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out[0, 1], weights_by_name(layer)["attention_output/bias"],
                               atol=1e-6)
    grad_x, grad_boxes = gradients(loss, x, boxes)
    assert np.isfinite(grad_x).all() and np.abs(grad_x).max() > 0
    assert np.isfinite(grad_boxes).all()


def test_remat_geometry_gives_the_same_values_and_gradients():
    data = inputs(31)
    x, boxes = data["query"], data["query_boxes"]
    plain = positional_object_attention(2, 3)
    remat = positional_object_attention(2, 3, remat_geometry=True)
    plain(x, x, query_boxes=boxes)
    remat(x, x, query_boxes=boxes)
    randomize(plain, 32)
    remat.set_weights(plain.get_weights())

    def loss_of(layer):
        return lambda inputs: ops.sum(layer(inputs, inputs, query_boxes=boxes) ** 2)

    np.testing.assert_allclose(to_np(remat(x, x, query_boxes=boxes)),
                               to_np(plain(x, x, query_boxes=boxes)), atol=1e-6)
    (grad_plain,), (grad_remat,) = gradients(loss_of(plain), x), gradients(loss_of(remat), x)
    np.testing.assert_allclose(grad_remat, grad_plain, rtol=1e-4, atol=1e-5)
    assert remat.get_config()["remat_geometry"] is True


def test_gradient_matches_finite_differences():
    data = inputs(17, B=1, T=4)
    x = data["query"]
    layer = positional_word_attention(2, 3)
    layer(x, x, query_positions=data["query_positions"])
    randomize(layer, 18)
    direction = np.random.default_rng(19).normal(size=x.shape)

    def loss(inputs, positions):
        return ops.sum(layer(inputs, inputs, query_positions=positions) ** 2)

    grad, grad_positions = gradients(loss, x, data["query_positions"])
    assert np.abs(grad_positions).max() > 0
    eps = 1e-2
    f = lambda z: float(to_np(loss(z.astype("float32"), data["query_positions"])))  # noqa: E731
    numeric = (f(x + eps * direction) - f(x - eps * direction)) / (2 * eps)
    np.testing.assert_allclose((grad * direction).sum(), numeric, rtol=2e-2, atol=2e-3)


# ------------------------------------------------------- Keras conventions


def test_config_and_keras_file_round_trip(tmp_path):
    words = keras.Input((5, DIM))
    objects = keras.Input((4, DIM))
    boxes = keras.Input((4, 4))
    word_positions = keras.Input((5, DIM))
    box_positions = keras.Input((4, DIM))
    poa = positional_object_attention(2, 3, variant="relation_network", dropout=0.1, seed=3)
    pma = positional_multimodal_attention(2, 3)
    attended = poa(objects, objects, query_boxes=boxes)
    fused, weights = pma(attended, words, query_positions=box_positions,
                         key_positions=word_positions, return_attention_scores=True)
    assert fused.shape == (None, 4, DIM) and weights.shape == (None, 2, 4, 5)
    model = keras.Model([words, objects, boxes, word_positions, box_positions], [fused, weights])
    randomize(poa, 20)
    randomize(pma, 21)
    rng = np.random.default_rng(22)
    feed = [rng.normal(size=(2, 5, DIM)), rng.normal(size=(2, 4, DIM)),
            random_boxes(rng, (2, 4)), rng.normal(size=(2, 5, DIM)), rng.normal(size=(2, 4, DIM))]
    feed = [np.asarray(a, "float32") for a in feed]
    expected = [to_np(t) for t in model(feed)]
    path = tmp_path / "positional.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    for got, want in zip(loaded(feed), expected):
        np.testing.assert_allclose(to_np(got), want, atol=1e-5)
    for layer in (poa, pma):
        config = layer.get_config()
        clone = PositionalMultiHeadAttention.from_config(config)
        assert clone.get_config() == config
    assert poa.get_config()["fusion"] == "relation_network"
    assert poa.get_config()["geometry_ordering"] == "per_feature"


def test_symbolic_shapes():
    query, positions = keras.Input((5, DIM)), keras.Input((5, 6))
    layer = positional_word_attention(3, 2, output_shape=7, position_dim=6)
    out, scores, semantic, positional = layer(query, query, query_positions=positions,
                                              return_attention_scores=True,
                                              return_raw_scores=True)
    assert out.shape == (None, 5, 7)
    for tensor in (scores, semantic, positional):
        assert tensor.shape == (None, 3, 5, 5) and tensor.dtype == "float32"
    data = inputs(23, position_dim=6)
    eager = layer(data["query"], data["query"], query_positions=data["query_positions"],
                  return_attention_scores=True, return_raw_scores=True)
    assert [tuple(t.shape) for t in eager] == [(2, 5, 7)] + [(2, 3, 5, 5)] * 3
    ragged, ragged_boxes = keras.Input((None, DIM)), keras.Input((None, 4))
    out = positional_object_attention(2, 3)(ragged, ragged, query_boxes=ragged_boxes)
    assert out.shape == (None, None, DIM)
    model = keras.Model([ragged, ragged_boxes], out)
    data = inputs(24, T=7)
    assert tuple(model([data["query"], data["query_boxes"]]).shape) == (2, 7, DIM)


@pytest.mark.parametrize("remat", [False, True])
def test_fit_with_xla(remat):
    keras.utils.set_random_seed(0)
    objects, boxes = keras.Input((5, DIM)), keras.Input((5, 4))
    layer = positional_object_attention(2, 3, dropout=0.1, seed=1, remat_geometry=remat)
    out = keras.layers.Dense(1)(layer(objects, objects, query_boxes=boxes))
    model = keras.Model([objects, boxes], out)
    model.compile(keras.optimizers.Adam(1e-2), "mse", jit_compile=True)
    rng = np.random.default_rng(25)
    x = [rng.normal(size=(16, 5, DIM)).astype("float32"), random_boxes(rng, (16, 5))]
    before = to_np(layer.geometry_kernel)
    history = model.fit(x, rng.normal(size=(16, 5, 1)), epochs=3, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert np.abs(to_np(layer.geometry_kernel) - before).max() > 0  # W_G trains


@pytest.mark.parametrize("position_type", ["vectors", "boxes"])
def test_mixed_precision(position_type):
    data = inputs(26)
    x = data["query"]
    mask = np.ones((2, 5, 5), bool)
    mask[1, 0] = False
    layers = [PositionalMultiHeadAttention(2, 4, position_type=position_type, dtype=dtype)
              for dtype in ("float32", "mixed_float16")]
    kwargs = position_kwargs(layers[0], data)
    for layer in layers:
        layer(x, x, **kwargs)
    randomize(layers[0], 27, scale=0.3)
    layers[1].set_weights(layers[0].get_weights())
    results = [layer(x, x, attention_mask=mask, return_attention_scores=True,
                     return_raw_scores=True, **kwargs) for layer in layers]
    out16 = results[1][0]
    assert keras.backend.standardize_dtype(out16.dtype) == "float16"
    for tensor in results[1][1:]:
        assert keras.backend.standardize_dtype(tensor.dtype) == "float32"
    assert np.isfinite(to_np(out16)).all()
    np.testing.assert_allclose(to_np(out16), to_np(results[0][0]), atol=3e-2, rtol=3e-2)
    if position_type == "boxes":  # the geometry map itself is float32 work
        np.testing.assert_allclose(to_np(results[1][3]), to_np(results[0][3]), atol=1e-5)


def test_dropout_is_seeded_and_only_in_training():
    data = inputs(28)
    x = data["query"]

    def make():
        return positional_word_attention(2, 3, dropout=0.5, seed=4)

    a, b = make(), make()
    kwargs = dict(query_positions=data["query_positions"])
    a(x, x, **kwargs)
    b(x, x, **kwargs)
    b.set_weights(a.get_weights())
    train_a = to_np(a(x, x, training=True, **kwargs))
    np.testing.assert_allclose(train_a, to_np(b(x, x, training=True, **kwargs)))
    infer = to_np(a(x, x, **kwargs))
    assert np.abs(train_a - infer).max() > 1e-4


# ------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(position_type="words"), "position_type"),
        (dict(fusion="mul"), "fusion"),
        (dict(position_dim=0), "position_dim"),
        (dict(position_type="boxes", position_dim=8), "position_dim"),
        (dict(share_geometry_weights=True), "share_geometry_weights"),
        (dict(position_type="boxes", share_geometry_weights=1), "share_geometry_weights"),
        (dict(position_type="boxes", remat_geometry="yes"), "remat_geometry"),
        (dict(geometry_dim=60), "dim"),
        (dict(geometry_ordering="cos_sin"), "ordering"),
        (dict(size_ratio="ratio"), "size_ratio"),
        (dict(box_size_offset=-1.0), "size_offset"),
        (dict(geometry_clip=0.0), "clip"),
        *REFUSED_MHA_ARGUMENTS,
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PositionalMultiHeadAttention(num_heads=2, key_dim=3, **kwargs)


def test_bad_position_inputs_are_named():
    data = inputs(29)
    x = data["query"]
    words, boxes = positional_word_attention(2, 3), positional_object_attention(2, 3)
    # Key positions alone are an error (no positions at all: plain MHA).
    with pytest.raises(ValueError, match="key_positions` needs `query_positions"):
        words(x, x, key_positions=data["query_positions"])
    with pytest.raises(ValueError, match="query_boxes"):
        words(x, x, query_positions=data["query_positions"], query_boxes=data["query_boxes"])
    with pytest.raises(ValueError, match="key_boxes` needs `query_boxes"):
        boxes(x, x, key_boxes=data["query_boxes"])
    with pytest.raises(ValueError, match="query_boxes"):
        boxes(x, x, query_boxes=data["query_boxes"][..., :3])
    with pytest.raises(ValueError, match="key_positions"):
        words(x, x, query_positions=data["query_positions"],
              key_positions=data["query_positions"][:, :4])
    with pytest.raises(ValueError, match="query_boxes"):  # the query's used for 7 keys
        boxes(x, data["value"][:, :3], query_boxes=data["query_boxes"])
    with pytest.raises(ValueError, match="key_positions.*batch size 2 or 1"):
        words(x, x, query_positions=data["query_positions"],
              key_positions=np.concatenate([data["query_positions"]] * 2))
    with pytest.raises(ValueError, match="variant"):
        positional_object_attention(2, 3, variant="mcan")
    assert set(POA_VARIANTS) == {"paper", "released", "relation_network"}


# Issue 17, item 15: the box contract (docs/positional_attention.md).


@pytest.mark.parametrize("remat", [False, True], ids=["", "remat"])
def test_boxes_outside_the_contract_are_named(remat):
    data = inputs(30)
    x, value, boxes = data["query"], data["value"], data["query_boxes"]
    layer = positional_object_attention(2, 3, remat_geometry=remat)
    upside_down = boxes.copy()
    upside_down[1, 2, [1, 3]] = boxes[1, 2, [3, 1]]
    for argument in (upside_down, ops.convert_to_tensor(upside_down)):
        with pytest.raises(ValueError, match=r"`query_boxes` must hold boxes \[x1, y1, x2, y2\] "
                           r"with x1 <= x2 and y1 <= y2\. Received: query_boxes\[1, 2\] = "
                           r".*\(y2 < y1\)"):
            layer(x, x, query_boxes=argument)
    flat = data["key_boxes"].copy()
    flat[0, 4, 2] = flat[0, 4, 0]
    with pytest.raises(ValueError, match=r"`key_boxes` .*positive width and height \(the box "
                       r"geometry divides by them\), or all-zero padding rows\. Received: "
                       r"key_boxes\[0, 4\] = .*\(zero width\)"):
        layer(x, value, query_boxes=boxes, key_boxes=flat)
    # In the contract: all-zero padding rows; pixels (the geometry is
    # scale-free; 512 keeps float32 exact); zero sizes with the "+1" offset.
    padded = boxes.copy()
    padded[1, 3:] = 0.0
    assert np.isfinite(to_np(layer(x, x, query_boxes=padded))).all()
    np.testing.assert_allclose(to_np(layer(x, x, query_boxes=boxes * 512)),
                               to_np(layer(x, x, query_boxes=boxes)), atol=1e-4)
    released = positional_object_attention(2, 3, variant="released")
    assert np.isfinite(to_np(released(x, value, query_boxes=boxes, key_boxes=flat))).all()


def test_boxes_outside_the_contract_give_finite_outputs_in_compiled_code():
    """Compiled code cannot read the boxes: reversed and zero-size boxes give
    finite (meaningless) outputs, never NaN."""
    data = inputs(31)
    x, boxes = data["query"], data["query_boxes"]
    boxes[0, 0] = [0.6, 0.6, 0.2, 0.2]  # reversed
    boxes[0, 1] = [0.3, 0.3, 0.3, 0.3]  # a point
    boxes[1, 2] = [0.1, 0.5, 0.9, 0.5]  # zero height
    layer = positional_object_attention(2, 3)
    symbolic = [keras.Input(batch_shape=a.shape) for a in (x, boxes)]
    model = keras.Model(symbolic, layer(symbolic[0], symbolic[0], query_boxes=symbolic[1]))
    randomize(layer, 32)
    model.compile(jit_compile=True)
    assert np.isfinite(model.predict([x, boxes], batch_size=2, verbose=0)).all()


# ------------------------------------------------- weights and old files

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "positional_keras_files")


@pytest.mark.parametrize("kind", ["vectors", "boxes"])
def test_keras_files_of_the_previous_version_load(kind, tmp_path):
    """A layer with positions builds the weights it always built, in the
    same order: a `.keras` file saved before issue 38 (when every layer
    built its positional weights) loads, computes what it computed, and
    saves and loads again."""
    expected = np.load(os.path.join(FIXTURES, "positional_outputs.npz"))
    model = keras.saving.load_model(os.path.join(FIXTURES, f"positional_{kind}.keras"))
    layer = model.get_layer("positional")
    assert [w.path for w in layer.weights] == list(expected[f"{kind}_weight_paths"])
    inputs = [expected[f"{kind}_x"], expected[f"{kind}_positions"]]
    # The outputs were computed on TensorFlow; the box geometry's sines
    # round differently on JAX (2e-5 at most here), far below what a wrong
    # or misplaced weight would change.
    atol = 1e-4
    np.testing.assert_allclose(to_np(model(inputs)), expected[f"{kind}_output"], atol=atol)
    path = str(tmp_path / "again.keras")
    model.save(path)
    again = keras.saving.load_model(path)
    np.testing.assert_allclose(to_np(again(inputs)), expected[f"{kind}_output"], atol=atol)


def test_without_positions_it_has_keras_weights_and_takes_none(tmp_path):
    """`position_type=None`: Keras MHA's weights in Keras' order and nothing
    else, so a Keras MHA's weights load into it and back; no position input."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 5, DIM)).astype("float32")
    memory = rng.normal(size=(2, 3, DIM)).astype("float32")
    reference = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    reference(x, memory)
    randomize(reference, 4)
    layer = PositionalMultiHeadAttention(num_heads=2, key_dim=4, position_type=None)
    layer(x, memory)
    assert [w.path.split("/", 1)[1] for w in layer.weights] == [
        w.path.split("/", 1)[1] for w in reference.weights
    ]
    layer.set_weights(reference.get_weights())
    np.testing.assert_allclose(to_np(layer(x, memory)), to_np(reference(x, memory)), atol=1e-5)
    back = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    back(x, memory)
    back.set_weights(layer.get_weights())
    np.testing.assert_allclose(to_np(back(x, memory)), to_np(reference(x, memory)), atol=1e-5)
    for name in ("query_positions", "query_boxes"):
        with pytest.raises(ValueError, match="position_type=None"):
            layer(x, memory, **{name: x})
    # Round trip of a model holding it.
    inputs = keras.Input((5, DIM)), keras.Input((3, DIM))
    model = keras.Model(inputs, layer(*inputs))
    path = str(tmp_path / "plain.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.layers[-1].position_type is None
    np.testing.assert_allclose(to_np(loaded([x, memory])), to_np(model([x, memory])), atol=1e-5)
