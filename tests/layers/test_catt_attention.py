"""Tests of causal attention (CATT): `GlobalDictionary`,
`CATTAttention`, `TopDownAttention` and `CATTTopDownAttention`.

Both branches are checked against a NumPy reference with explicit loops
over batch, head and query (projections with the layer's own kernels,
logits scaled by key_dim**-0.5, softmax over the allowed keys, zero weights
for rows without any, output projection); IS-ATT against Keras MHA with the
same weights; weight sharing by parameter counts and by editing a shared
kernel; CS-ATT's independence of the sample; the additive Up-Down scorer
against loops. Plus Keras conventions: config and `.keras` round trips,
symbolic shapes, `fit` under XLA, mixed precision, seeded dropout, and
argument validation. See docs/catt_attention.md.
"""

import math

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.layers.catt_attention import CATTAttention
from keras_structattn.layers.catt_top_down_attention import CATTTopDownAttention
from keras_structattn.layers.global_dictionary import GlobalDictionary
from keras_structattn.layers.structured_attention import StructuredMultiHeadAttention
from keras_structattn.layers.top_down_attention import TopDownAttention
from tests._backend import gradients
from tests.layers.mha_cases import REFUSED_MHA_ARGUMENTS
from tests.layers.weights import randomize
from tests.layers.weights import to_np
from tests.layers.weights import weights_by_name
from tests.reference import softmax_row

DIM, HEADS, KEY_DIM, SIZE = 8, 2, 4, 5


def case(seed, B=2, T=4, S=6):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(B, T, DIM)).astype("float32")
    value = rng.normal(size=(B, S, DIM)).astype("float32")
    return query, value


def attend_reference(w, prefix, query, memory, mask=None):
    """Multi-head attention by loops. memory [B, S, d]; mask bool [B, T, S].

    Returns (output [B, T, d_out], weights [B, N, T, S])."""
    q = np.einsum("btd,dnk->btnk", query, w[prefix + "query/kernel"]) + w[prefix + "query/bias"]
    k = np.einsum("bsd,dnk->bsnk", memory, w[prefix + "key/kernel"]) + w[prefix + "key/bias"]
    v = np.einsum("bsd,dnk->bsnk", memory, w[prefix + "value/kernel"]) + w[prefix + "value/bias"]
    B, T, N, key_dim = q.shape
    S = k.shape[1]
    weights = np.zeros((B, N, T, S))
    context = np.zeros((B, T, N, v.shape[-1]))
    for b in range(B):
        for h in range(N):
            for i in range(T):
                allowed = [mask is None or bool(mask[b, i, j]) for j in range(S)]
                if not any(allowed):
                    continue
                logits = [float(np.dot(q[b, i, h], k[b, j, h])) / math.sqrt(key_dim)
                          for j in range(S)]
                weights[b, h, i] = softmax_row(logits, allowed)
                for j in range(S):
                    context[b, i, h] += weights[b, h, i, j] * v[b, j, h]
    out = np.einsum("btnk,nkd->btd", context, w[prefix + "attention_output/kernel"])
    return out + w[prefix + "attention_output/bias"], weights


def catt_reference(layer, query, value, dictionary=None, is_mask=None, cs_mask=None):
    """(Z^, X^, is_weights, cs_weights) of a CATTAttention by loops."""
    w = weights_by_name(layer)
    if dictionary is None:
        dictionary = w["global_dictionary/dictionary"]
    if dictionary.ndim == 2:
        dictionary = np.broadcast_to(dictionary, (len(query),) + dictionary.shape)
    z, a_is = attend_reference(w, "", query, value, is_mask)
    prefix = "" if layer.share_weights else "cs_attention/"
    x, a_cs = attend_reference(w, prefix, query, dictionary, cs_mask)
    return z, x, a_is, a_cs


def built(layer, *args, seed=1, **kwargs):
    layer(*args, **kwargs)
    randomize(layer, seed)
    return layer


# ------------------------------------------------------ GlobalDictionary


def test_dictionary_default_init_is_uniform_0_001_and_float32():
    layer = GlobalDictionary(500, dim=64, dtype="mixed_float16")
    values = to_np(layer.dictionary)
    assert layer.dictionary.shape == (500, 64)
    assert keras.backend.standardize_dtype(layer.dictionary.dtype) == "float32"
    assert values.min() >= 0.0 and values.max() < 0.01 and values.std() > 0.002
    out = layer(np.zeros((2, 3, 64), "float32"))
    assert out.shape == (500, 64)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"


def test_dictionary_takes_its_width_from_the_input_and_given_centres():
    layer = GlobalDictionary(3)
    assert not layer.built
    assert layer(np.zeros((2, 4, 6), "float32")).shape == (3, 6)
    centers = np.arange(18, dtype="float32").reshape(3, 6)
    layer.set_centers(centers)
    np.testing.assert_array_equal(to_np(layer.dictionary), centers)
    unbuilt = GlobalDictionary(3)
    unbuilt.set_centers(centers)
    assert unbuilt.dim == 6
    np.testing.assert_array_equal(to_np(unbuilt(np.zeros((1, 6), "float32"))), centers)


def separated_clusters(seed, k=4, dim=DIM, per_cluster=60):
    rng = np.random.default_rng(seed)
    true = rng.uniform(-10, 10, size=(k, dim))
    n = k * per_cluster
    x = true[rng.integers(0, k, size=n)] + rng.normal(scale=0.1, size=(n, dim))
    return x.astype("float32"), true


def test_adapt_recovers_cluster_centres_deterministically():
    features, true = separated_clusters(0)
    # [N, 3, d] RoI-like features with a zero padded slot, as a dataset.
    padded = np.concatenate([features.reshape(-1, 3, DIM), np.zeros((80, 1, DIM), "float32")], 1)
    layer = GlobalDictionary(4)
    layer.adapt(padded, batch_size=64, seed=3)
    centers = to_np(layer.dictionary)
    distances = np.linalg.norm(true[:, None] - centers[None], axis=-1)
    assert sorted(distances.argmin(1)) == [0, 1, 2, 3] and distances.min(1).max() < 0.1
    assert layer.inertia == pytest.approx(len(features) * DIM * 0.01, rel=0.2)
    again = GlobalDictionary(4)
    again.adapt(padded, batch_size=64, seed=3)
    np.testing.assert_array_equal(to_np(again.dictionary), centers)
    assert again.inertia == layer.inertia


def test_adapt_on_a_tf_data_dataset():
    import tensorflow as tf

    features, true = separated_clusters(1)
    layer = GlobalDictionary(4, dim=DIM)
    layer.adapt(tf.data.Dataset.from_tensor_slices(features).batch(32), seed=0)
    distances = np.linalg.norm(true[:, None] - to_np(layer.dictionary)[None], axis=-1)
    assert distances.min(1).max() < 0.1


def test_dictionary_round_trip(tmp_path):
    inputs = keras.Input((3, DIM))
    layer = GlobalDictionary(SIZE, regularizer="l2")
    model = keras.Model(inputs, layer(inputs))
    layer.set_centers(np.random.default_rng(2).normal(size=(SIZE, DIM)))
    path = tmp_path / "dictionary.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(to_np(loaded.layers[-1].dictionary), to_np(layer.dictionary))
    config = layer.get_config()
    assert GlobalDictionary.from_config(config).get_config() == config


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: GlobalDictionary(0), "size"),
        (lambda: GlobalDictionary(3, dim=0), "dim"),
        (lambda: GlobalDictionary(3, dim=4).set_centers(np.zeros((3, 5))), "centers"),
        (lambda: GlobalDictionary(3).set_centers(np.zeros((2, 5))), "centers"),
        (lambda: GlobalDictionary(3, dim=4)(np.zeros((2, 5), "float32")), "dim=4"),
        (lambda: GlobalDictionary(3).build(), "dim"),
        (lambda: GlobalDictionary(50).adapt(np.ones((10, 4), "float32")), "at least 50"),
    ],
)
def test_dictionary_bad_arguments_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# ------------------------------------------------------- CATTAttention


@pytest.mark.parametrize("share_weights", [True, False])
@pytest.mark.parametrize("source", ["own", "shared", "batched"])
def test_matches_loop_reference(share_weights, source):
    query, value = case(3)
    rng = np.random.default_rng(4)
    dictionary = {"own": None, "shared": rng.normal(size=(7, DIM)),
                  "batched": rng.normal(size=(2, 7, DIM))}[source]
    kwargs = {} if dictionary is None else dict(dictionary=dictionary.astype("float32"))
    layer = CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE if source == "own" else None,
                            share_weights=share_weights, fusion="none")
    built(layer, query, value, seed=5, **kwargs)
    (z, x), (a_is, a_cs) = layer(query, value, return_attention_scores=True, **kwargs)
    ez, ex, ea_is, ea_cs = catt_reference(layer, query, value, dictionary)
    np.testing.assert_allclose(to_np(a_is), ea_is, atol=2e-6)
    np.testing.assert_allclose(to_np(a_cs), ea_cs, atol=2e-6)
    np.testing.assert_allclose(to_np(z), ez, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_np(x), ex, rtol=1e-5, atol=1e-5)
    assert not np.allclose(ez, ex)


@pytest.mark.parametrize("masks", ["none", "value_mask", "attention_causal", "key"])
def test_is_branch_equals_keras_mha(masks):
    """IS-ATT alone is Keras MHA with the same weights (rows with keys)."""
    query, value = case(6, T=6, S=6)
    rng = np.random.default_rng(7)
    kwargs = {}
    if masks == "value_mask":
        value_mask = np.ones((2, 6), bool)
        value_mask[1, 3:] = False
        kwargs = dict(value_mask=value_mask)
    elif masks == "attention_causal":
        attention_mask = rng.random((2, 6, 6)) < 0.7
        attention_mask[..., 0] = True
        kwargs = dict(attention_mask=attention_mask, use_causal_mask=True)
    elif masks == "key":
        kwargs = dict(key=rng.normal(size=(2, 6, DIM)).astype("float32"))
    layer = built(CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE, fusion="none"),
                  query, value, seed=8, **kwargs)
    mha = keras.layers.MultiHeadAttention(HEADS, KEY_DIM)
    mha(query, value, **kwargs)
    mha.set_weights(layer.get_weights()[: len(mha.weights)])
    z, _ = layer(query, value, **kwargs)
    np.testing.assert_allclose(to_np(z), to_np(mha(query, value, **kwargs)), rtol=1e-5, atol=1e-5)


def test_explicit_mha_equals_keras_mha_with_zero_rows():
    """The base layer (and the CATT decoder's cross-attention): Keras MHA's
    results and weights, zero rows included on every path."""
    query, value = case(37, T=6, S=6)
    value_mask = np.ones((2, 6), bool)
    value_mask[1, 4:] = False
    layer = built(StructuredMultiHeadAttention(HEADS, KEY_DIM), query, value, seed=38)
    mha = keras.layers.MultiHeadAttention(HEADS, KEY_DIM)
    mha(query, value)
    mha.set_weights(layer.get_weights())
    kwargs = dict(value_mask=value_mask, use_causal_mask=True)
    out, scores = layer(query, value, return_attention_scores=True, **kwargs)
    expected, expected_scores = mha(query, value, return_attention_scores=True, **kwargs)
    np.testing.assert_allclose(to_np(out), to_np(expected), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_np(scores), to_np(expected_scores), atol=1e-6)
    assert keras.backend.standardize_dtype(scores.dtype) == "float32"
    value_mask[0] = False
    bias = weights_by_name(layer)["attention_output/bias"]
    np.testing.assert_allclose(to_np(layer(query, value, value_mask=value_mask))[0],
                               np.broadcast_to(bias, (6, DIM)), atol=1e-6)


def test_concat_dense_is_a_linear_2d_to_d_on_both_outputs():
    query, value = case(9)
    fused = built(CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE, fusion="concat_dense"),
                  query, value, seed=10)
    concat = CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE)  # the paper's default
    assert concat.fusion == "concat"
    concat(query, value)
    concat.set_weights(fused.get_weights()[:-2])
    z, x, _, _ = catt_reference(fused, query, value)
    w = weights_by_name(fused)
    expected = np.concatenate([z, x], -1) @ w["fusion/kernel"] + w["fusion/bias"]
    np.testing.assert_allclose(to_np(fused(query, value)), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_np(concat(query, value)), np.concatenate([z, x], -1),
                               rtol=1e-5, atol=1e-5)


def test_shared_weights_really_are_shared():
    query, value = case(11)
    mha = keras.layers.MultiHeadAttention(HEADS, KEY_DIM)
    mha(query, value)
    mha_params = mha.count_params()
    none = CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE, fusion="none")
    none(query, value)
    assert none.count_params() == mha_params + SIZE * DIM
    dense = CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE, fusion="concat_dense")
    dense(query, value)
    assert dense.count_params() == mha_params + SIZE * DIM + 2 * DIM * DIM + DIM
    separate = CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE, share_weights=False,
                               fusion="none")
    separate(query, value)
    assert separate.count_params() == 2 * mha_params + SIZE * DIM

    randomize(none, 12)
    z0, x0 = (to_np(t) for t in none(query, value))
    kernel = none.query_dense.kernel
    kernel.assign(kernel * 1.5)
    z1, x1 = (to_np(t) for t in none(query, value))
    assert np.abs(z1 - z0).max() > 1e-3 and np.abs(x1 - x0).max() > 1e-3
    kernel = none.key_dense.kernel
    kernel.assign(kernel * 0.5)
    z2, x2 = (to_np(t) for t in none(query, value))
    assert np.abs(z2 - z1).max() > 1e-3 and np.abs(x2 - x1).max() > 1e-3

    randomize(separate, 13)
    z0, x0 = (to_np(t) for t in separate(query, value))
    separate.query_dense.kernel.assign(separate.query_dense.kernel * 1.5)
    z1, x1 = (to_np(t) for t in separate(query, value))
    assert np.abs(z1 - z0).max() > 1e-3
    np.testing.assert_array_equal(x1, x0)  # CS has its own projections


def test_cs_depends_on_the_dictionary_not_on_the_sample():
    query, value = case(14)
    layer = built(CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE, fusion="none"),
                  query, value, seed=15)
    z0, x0 = (to_np(t) for t in layer(query, value))
    other = np.random.default_rng(16).normal(size=value.shape).astype("float32")
    value_mask = np.zeros((2, 6), bool)
    value_mask[:, 0] = True
    for kwargs in (dict(value=other), dict(value=value, key=other),
                   dict(value=value, value_mask=value_mask)):
        z1, x1 = (to_np(t) for t in layer(query, **kwargs))
        assert np.abs(z1 - z0).max() > 1e-3
        np.testing.assert_allclose(x1, x0, rtol=1e-6, atol=1e-6)
    dictionary = layer.global_dictionary.dictionary
    dictionary.assign(dictionary * 2.0 + 0.1)
    z2, x2 = (to_np(t) for t in layer(query, value))
    np.testing.assert_allclose(z2, z0, rtol=1e-6, atol=1e-6)
    assert np.abs(x2 - x0).max() > 1e-3


def test_rows_without_keys_give_the_output_bias_only():
    """Zero rows in IS-ATT: zero weights, output = output bias; CS-ATT of the
    same rows is unaffected; no NaN, also in gradients."""
    query, value = case(17)
    value_mask = np.ones((2, 6), bool)
    value_mask[1] = False  # sample 1: no keys at all
    attention_mask = np.ones((2, 4, 6), bool)
    attention_mask[0, 2] = False  # one row of sample 0
    layer = built(CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE, fusion="none"),
                  query, value, seed=18)
    kwargs = dict(value_mask=value_mask, attention_mask=attention_mask)
    (z, x), (a_is, a_cs) = layer(query, value, return_attention_scores=True, **kwargs)
    z, x, a_is = to_np(z), to_np(x), to_np(a_is)
    bias = weights_by_name(layer)["attention_output/bias"]
    np.testing.assert_allclose(z[1], np.broadcast_to(bias, z[1].shape), atol=1e-6)
    np.testing.assert_allclose(z[0, 2], bias, atol=1e-6)
    assert np.abs(z[0, 1] - bias).max() > 1e-3
    assert (a_is[1] == 0).all() and (a_is[0, :, 2] == 0).all()
    np.testing.assert_allclose(to_np(a_cs).sum(-1), 1.0, atol=1e-6)
    _, ex, _, _ = catt_reference(layer, query, value)
    np.testing.assert_allclose(x, ex, rtol=1e-5, atol=1e-5)
    for fast in ({}, dict(return_attention_scores=True)):  # same with or without scores
        out = layer(query, value, **kwargs, **fast)
        out = out[0] if fast else out
        np.testing.assert_allclose(to_np(out[0]), z, atol=1e-6)

    def loss(q):
        a, b = layer(q, value, **kwargs)
        return ops.sum(a**2) + ops.sum(b**2)

    assert np.isfinite(gradients(loss, query)[0]).all()


def test_query_mask_and_keras_mask_propagation():
    tokens = np.array([[1, 2, 3, 0], [4, 5, 0, 0]])
    inputs = keras.Input((4,), dtype="int32")
    embedded = keras.layers.Embedding(10, DIM, mask_zero=True)(inputs)
    memory = keras.Input((6, DIM))
    layer = CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE, fusion="none")
    (z, x), (a_is, a_cs) = layer(embedded, memory, return_attention_scores=True)
    model = keras.Model([inputs, memory], [z, x, a_is, a_cs])
    _, value = case(19)
    z, x, a_is, a_cs = (to_np(t) for t in model([tokens, value]))
    padded = tokens == 0
    assert (a_is.transpose(0, 2, 1, 3)[padded] == 0).all()
    assert (a_cs.transpose(0, 2, 1, 3)[padded] == 0).all()
    np.testing.assert_allclose(a_cs.transpose(0, 2, 1, 3)[~padded].sum(-1), 1.0, atol=1e-6)
    # The query mask is set on both outputs (eager).
    embedded = model.layers[1](tokens)
    from keras_structattn.layers._masking import get_keras_mask

    for out in layer(embedded, value):
        np.testing.assert_array_equal(np.asarray(get_keras_mask(out)), ~padded)


def test_dictionary_mask():
    query, value = case(20)
    rng = np.random.default_rng(21)
    dictionary = rng.normal(size=(2, 7, DIM)).astype("float32")
    dictionary_mask = rng.random((2, 7)) < 0.6
    dictionary_mask[:, 0] = True
    layer = built(CATTAttention(HEADS, KEY_DIM, dictionary_size=None, fusion="none"),
                  query, value, dictionary=dictionary, seed=22)
    _, x = layer(query, value, dictionary=dictionary, dictionary_mask=dictionary_mask)
    cs_mask = np.broadcast_to(dictionary_mask[:, None, :], (2, 4, 7))
    _, ex, _, _ = catt_reference(layer, query, value, dictionary, cs_mask=cs_mask)
    np.testing.assert_allclose(to_np(x), ex, rtol=1e-5, atol=1e-5)
    per_query = rng.random((2, 4, 7)) < 0.5
    per_query[..., 1] = True
    _, x = layer(query, value, dictionary=dictionary, dictionary_mask=per_query)
    _, ex, _, _ = catt_reference(layer, query, value, dictionary, cs_mask=per_query)
    np.testing.assert_allclose(to_np(x), ex, rtol=1e-5, atol=1e-5)


def test_one_dictionary_shared_by_two_layers_in_a_model(tmp_path):
    """A `GlobalDictionary` output passed to two layers: one variable."""
    regions = keras.Input((6, DIM))
    words = keras.Input((4, DIM))
    dictionary = GlobalDictionary(SIZE, name="image_dictionary")(regions)
    first = CATTAttention(HEADS, KEY_DIM, dictionary_size=None, fusion="concat_dense")(
        regions, regions, dictionary=dictionary)
    second = CATTAttention(HEADS, KEY_DIM, dictionary_size=None)(words, first,
                                                                    dictionary=dictionary)
    model = keras.Model([regions, words], second)
    assert sum(1 for w in model.weights if "dictionary" in w.path) == 1
    query, value = case(23)
    expected = to_np(model([value, query]))
    path = tmp_path / "shared.keras"
    model.save(path)
    np.testing.assert_allclose(to_np(keras.models.load_model(path)([value, query])), expected,
                               atol=1e-6)


@pytest.mark.parametrize("fusion", ["concat_dense", "concat", "none"])
def test_config_and_keras_file_round_trip(tmp_path, fusion):
    inputs = keras.Input((4, DIM))
    memory = keras.Input((6, DIM))
    layer = CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE, fusion=fusion,
                            share_weights=fusion != "concat", dropout=0.1, seed=3,
                            output_shape=6)
    outputs = layer(inputs, memory)
    model = keras.Model([inputs, memory], outputs)
    randomize(layer, 24)
    query, value = case(25)
    expected = [to_np(t) for t in keras.tree.flatten(model([query, value]))]
    path = tmp_path / "catt.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    got = [to_np(t) for t in keras.tree.flatten(loaded([query, value]))]
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, atol=1e-6)
    config = layer.get_config()
    clone = CATTAttention.from_config(config)
    assert clone.get_config() == config
    assert config["dictionary_size"] == SIZE and config["fusion"] == fusion


def test_symbolic_shapes():
    inputs = keras.Input((5, DIM))
    memory = keras.Input((7, DIM))
    out, (a_is, a_cs) = CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE)(
        inputs, memory, return_attention_scores=True)
    assert out.shape == (None, 5, 2 * DIM)  # [Z^; X^], the paper's fusion
    assert a_is.shape == (None, HEADS, 5, 7) and a_cs.shape == (None, HEADS, 5, SIZE)
    assert a_cs.dtype == "float32"
    out = CATTAttention(HEADS, KEY_DIM, fusion="concat", output_shape=3)(inputs, memory)
    assert out.shape == (None, 5, 6)
    (z, x), (_, a_cs) = CATTAttention(HEADS, KEY_DIM, fusion="none", dictionary_size=None)(
        inputs, memory, dictionary=keras.Input((9, DIM)), return_attention_scores=True)
    assert z.shape == x.shape == (None, 5, DIM) and a_cs.shape == (None, HEADS, 5, 9)
    query, value = case(26, T=5, S=7)
    eager, (a_is, a_cs) = CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE)(
        query, value, return_attention_scores=True)
    assert tuple(a_is.shape) == (2, HEADS, 5, 7) and tuple(a_cs.shape) == (2, HEADS, 5, SIZE)


def test_fit_with_xla_trains_the_dictionary():
    inputs = keras.Input((5, DIM))
    layer = CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE)
    model = keras.Model(inputs, keras.layers.Dense(1)(layer(inputs, inputs)))
    model.compile(keras.optimizers.Adam(0.01), "mse", jit_compile=True)
    before = to_np(layer.global_dictionary.dictionary)
    rng = np.random.default_rng(27)
    x = rng.normal(size=(16, 5, DIM)).astype("float32")
    history = model.fit(x, rng.normal(size=(16, 5, 1)), epochs=3, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert np.abs(to_np(layer.global_dictionary.dictionary) - before).max() > 1e-4


def test_mixed_precision():
    query, value = case(28)
    value_mask = np.ones((2, 6), bool)
    value_mask[0] = False
    layer32 = CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE)
    layer16 = CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE, dtype="mixed_float16")
    layer32(query, value)
    layer16(query, value)
    randomize(layer32, 29)
    layer16.set_weights(layer32.get_weights())
    out16, (a_is, a_cs) = layer16(query, value, value_mask=value_mask,
                                  return_attention_scores=True)
    assert keras.backend.standardize_dtype(out16.dtype) == "float16"
    assert keras.backend.standardize_dtype(a_is.dtype) == "float32"
    assert keras.backend.standardize_dtype(a_cs.dtype) == "float32"
    variable = layer16.global_dictionary.dictionary
    assert keras.backend.standardize_dtype(variable.dtype) == "float32"
    assert np.isfinite(to_np(out16)).all()
    np.testing.assert_allclose(to_np(out16), to_np(layer32(query, value, value_mask=value_mask)),
                               atol=3e-2, rtol=3e-2)


def test_dropout_is_seeded_and_only_in_training():
    query, value = case(30)
    a, b = (CATTAttention(HEADS, KEY_DIM, dictionary_size=SIZE, dropout=0.5, seed=4)
            for _ in range(2))
    a(query, value)
    b(query, value)
    b.set_weights(a.get_weights())
    train_a = to_np(a(query, value, training=True))
    train_b = to_np(b(query, value, training=True))
    np.testing.assert_allclose(train_a, train_b)
    infer = to_np(a(query, value))
    assert np.abs(train_a - infer).max() > 1e-4
    np.testing.assert_allclose(infer, to_np(a(query, value)))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(dictionary_size=0), "dictionary_size"),
        (dict(fusion="sum"), "fusion"),
        (dict(share_weights="yes"), "share_weights"),
        *REFUSED_MHA_ARGUMENTS,
        (dict(use_gate=True, share_weights=False), "use_gate"),
        (dict(output_shape=(2, 3), fusion="concat_dense"), "output_shape"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CATTAttention(HEADS, KEY_DIM, **kwargs)


def test_bad_inputs_are_named():
    query, value = case(31)
    with pytest.raises(ValueError, match="same width"):
        CATTAttention(HEADS, KEY_DIM)(query, value, key=np.zeros((2, 6, 3), "float32"))
    with pytest.raises(ValueError, match="dictionary_mask.*no dictionary"):
        CATTAttention(HEADS, KEY_DIM, dictionary_size=None)(
            query, value, dictionary_mask=np.ones((5,), bool))
    layer = CATTAttention(HEADS, KEY_DIM)
    layer(query, value)
    with pytest.raises(ValueError, match="dictionary"):
        layer(query, value, dictionary=np.zeros((5, 3), "float32"))
    with pytest.raises(ValueError, match="dictionary_mask"):
        layer(query, value, dictionary=np.zeros((5, DIM), "float32"),
              dictionary_mask=np.ones((2, 4, 5, 1), bool))


# ------------------------------------------------------------- Up-Down


def top_down_reference(w, prefix, query, value, mask=None):
    """Eq. 23 by loops: query [B, dq], value [B, N, dv]."""
    B, N = len(query), value.shape[1]
    context = np.zeros((B, value.shape[-1]))
    weights = np.zeros((B, N))
    for b in range(B):
        h = query[b] @ w[prefix + "query_projection/kernel"] + w[prefix + "query_projection/bias"]
        scores, allowed = [], []
        for i in range(N):
            v = (value[b, i] @ w[prefix + "value_projection/kernel"]
                 + w[prefix + "value_projection/bias"])
            scores.append(float(np.tanh(v + h) @ w[prefix + "score/kernel"][:, 0]
                                + w[prefix + "score/bias"][0]))
            allowed.append(mask is None or bool(mask[b, i]))
        if not any(allowed):
            continue
        top = max(s for s, ok in zip(scores, allowed) if ok)
        exps = [math.exp(s - top) if ok else 0.0 for s, ok in zip(scores, allowed)]
        for i in range(N):
            weights[b, i] = exps[i] / sum(exps)
            context[b] += weights[b, i] * value[b, i]
    return context, weights


def test_top_down_attention_matches_loops_with_masks_and_zero_rows():
    rng = np.random.default_rng(32)
    query = rng.normal(size=(3, 5)).astype("float32")
    value = rng.normal(size=(3, 6, DIM)).astype("float32")
    mask = rng.random((3, 6)) < 0.6
    mask[0, 0] = True
    mask[2] = False
    layer = built(TopDownAttention(7), query, value, seed=33)
    context, weights = layer(query, value, value_mask=mask, return_attention_scores=True)
    expected_context, expected_weights = top_down_reference(weights_by_name(layer), "", query,
                                                            value, mask)
    np.testing.assert_allclose(to_np(weights), expected_weights, atol=2e-6)
    np.testing.assert_allclose(to_np(context), expected_context, rtol=1e-5, atol=1e-5)
    assert (to_np(context)[2] == 0).all()
    # T queries at once equal T single steps; a [N, dv] memory is shared.
    steps = rng.normal(size=(3, 4, 5)).astype("float32")
    together = to_np(layer(steps, value, value_mask=mask))
    for t in range(4):
        step = to_np(layer(steps[:, t], value, value_mask=mask))
        np.testing.assert_allclose(together[:, t], step, rtol=1e-5, atol=1e-6)
    shared = to_np(layer(query, value[0]))
    np.testing.assert_allclose(shared, to_np(layer(query, np.broadcast_to(value[0], value.shape))),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("share_weights", [True, False])
def test_causal_top_down_attention(share_weights):
    rng = np.random.default_rng(34)
    query = rng.normal(size=(3, 5)).astype("float32")
    value = rng.normal(size=(3, 6, DIM)).astype("float32")
    mask = np.ones((3, 6), bool)
    mask[1, 3:] = False
    layer = built(CATTTopDownAttention(7, dictionary_size=SIZE, share_weights=share_weights),
                  query, value, seed=35)
    output, (a_is, a_cs) = layer(query, value, value_mask=mask, return_attention_scores=True)
    w = weights_by_name(layer)
    dictionary = np.broadcast_to(w["global_dictionary/dictionary"], (3, SIZE, DIM))
    is_context, is_weights = top_down_reference(w, "attention/", query, value, mask)
    prefix = "attention/" if share_weights else "cs_attention/"
    cs_context, cs_weights = top_down_reference(w, prefix, query, dictionary)
    np.testing.assert_allclose(to_np(output), np.concatenate([is_context, cs_context], -1),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_np(a_is), is_weights, atol=2e-6)
    np.testing.assert_allclose(to_np(a_cs), cs_weights, atol=2e-6)
    scorer = TopDownAttention(7)
    scorer(query, value)
    expected = scorer.count_params() * (1 if share_weights else 2) + SIZE * DIM
    assert layer.count_params() == expected
    # CS ignores the regions.
    pair = CATTTopDownAttention(7, dictionary_size=SIZE, share_weights=share_weights,
                                  fusion="none")
    pair(query, value)
    pair.set_weights(layer.get_weights())
    z0, x0 = (to_np(t) for t in pair(query, value))
    z1, x1 = (to_np(t) for t in pair(query, value * 2 + 1))
    assert np.abs(z1 - z0).max() > 1e-3
    np.testing.assert_allclose(x1, x0, rtol=1e-6, atol=1e-6)


def test_causal_top_down_round_trip_and_mixed_precision(tmp_path):
    hidden = keras.Input((5,))
    regions = keras.Input((6, DIM))
    layer = CATTTopDownAttention(7, dictionary_size=SIZE, share_weights=False,
                                   kernel_initializer="he_normal")
    model = keras.Model([hidden, regions], layer(hidden, regions))
    assert model.output_shape == (None, 2 * DIM)
    rng = np.random.default_rng(36)
    query = rng.normal(size=(3, 5)).astype("float32")
    value = rng.normal(size=(3, 6, DIM)).astype("float32")
    randomize(layer, 37)
    expected = to_np(model([query, value]))
    path = tmp_path / "butd.keras"
    model.save(path)
    np.testing.assert_allclose(to_np(keras.models.load_model(path)([query, value])), expected,
                               atol=1e-6)
    config = layer.get_config()
    assert CATTTopDownAttention.from_config(config).get_config() == config
    half = CATTTopDownAttention(7, dictionary_size=SIZE, share_weights=False,
                                  dtype="mixed_float16")
    half(query, value)
    half.set_weights(layer.get_weights())
    out, (a_is, _) = half(query, value, return_attention_scores=True)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"
    assert keras.backend.standardize_dtype(a_is.dtype) == "float32"
    np.testing.assert_allclose(to_np(out), expected, atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: TopDownAttention(0), "attention_dim"),
        (lambda: CATTTopDownAttention(4, dictionary_size=0), "dictionary_size"),
        (lambda: CATTTopDownAttention(4, fusion="concat_dense"), "fusion"),
        (lambda: CATTTopDownAttention(4, share_weights=1), "share_weights"),
        (lambda: CATTTopDownAttention(4, dictionary_size=None)(
            np.zeros((2, 3), "float32"), np.zeros((2, 4, 5), "float32")), "dictionary"),
        (lambda: CATTTopDownAttention(4)(
            np.zeros((2, 3), "float32"), np.zeros((2, 4, 5), "float32"),
            dictionary=np.zeros((3, 6), "float32")), "dictionary"),
    ],
)
def test_top_down_bad_arguments_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()
