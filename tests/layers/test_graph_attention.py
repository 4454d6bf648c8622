"""Tests of `keras_structattn.layers.GraphMultiHeadAttention` (SA-M4C).

The layer is checked against a NumPy reference written here with explicit
loops over batch, head, query and key, straight from the SA-M4C paper (Kant
et al., 2020, arXiv:2007.12146; docs/graph_attention.md): projections with
the layer's own kernels, logits scaled by key_dim**-0.5, head h may use the
edge (i, j) iff its label is in the head's subset (13 = every head, 14 =
none) and the masks allow it, optional beta[h, label] on the logits,
optional top-k per row, softmax over the allowed keys, zero weights for rows
without any, output projection. Plus the released head tables
(docs/graph_attention.md), MHA equivalence,
Keras conventions (config and `.keras` round trips, symbolic shapes, `fit`
under XLA, mixed precision, dropout seeds) and argument validation.
"""

import math

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from keras import ops

from keras_structattn.layers import GraphMultiHeadAttention
from keras_structattn.ops import relation_tables as rt
from tests.layers.weights import randomize
from tests.layers.weights import to_np
from tests.layers.weights import weights_by_name
from tests.reference import softmax_row

DIM = 8


def reference(layer, query, value, relations, mask=None):
    """The layer by loops. `mask` is a boolean [B, T, S] (True = may attend).

    Returns (output [B, T, dim_out], weights [B, N, T, S])."""
    w = weights_by_name(layer)
    heads = layer.head_relations
    num_heads, key_dim = layer.num_heads, layer.key_dim
    B, T, _ = query.shape
    S = value.shape[1]
    q = np.einsum("btd,dnk->btnk", query, w["query/kernel"]) + w["query/bias"]
    k = np.einsum("bsd,dnk->bsnk", value, w["key/kernel"]) + w["key/bias"]
    v = np.einsum("bsd,dnk->bsnk", value, w["value/kernel"]) + w["value/bias"]
    beta = w.get("relation_bias")
    weights = np.zeros((B, num_heads, T, S))
    context = np.zeros((B, T, num_heads, v.shape[-1]))
    for b in range(B):
        for h in range(num_heads):
            for i in range(T):
                logits, allowed = [], []
                for j in range(S):
                    label = int(relations[b, i, j]) if relations is not None else rt.IMPLICIT
                    if label == rt.IMPLICIT:
                        ok = True
                    elif label == rt.BLOCKED:
                        ok = False
                    else:
                        ok = (label in heads[h]) or not layer._graph_masking
                    if mask is not None and not mask[b, i, j]:
                        ok = False
                    logit = float(np.dot(q[b, i, h], k[b, j, h])) / math.sqrt(key_dim)
                    if beta is not None:
                        logit += beta[h, label]
                    logits.append(logit)
                    allowed.append(ok)
                if layer._top_k is not None:
                    kept = sorted((logit for logit, ok in zip(logits, allowed) if ok), reverse=True)
                    if len(kept) > layer._top_k:
                        kth = kept[layer._top_k - 1]
                        allowed = [ok and logit >= kth for logit, ok in zip(logits, allowed)]
                if not any(allowed):
                    continue  # zero weights, zero context
                weights[b, h, i] = softmax_row(logits, allowed)
                for j in range(S):
                    context[b, i, h] += weights[b, h, i, j] * v[b, j, h]
    out = np.einsum("btnk,nkd->btd", context, w["attention_output/kernel"])
    return out + w["attention_output/bias"], weights


def random_case(seed, B=2, T=5, S=6, blocked=0.15, implicit=0.1):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(B, T, DIM)).astype("float32")
    value = rng.normal(size=(B, S, DIM)).astype("float32")
    relations = rng.integers(0, 13, size=(B, T, S))
    draw = rng.random((B, T, S))
    relations[draw < blocked] = rt.BLOCKED
    relations[(draw >= blocked) & (draw < blocked + implicit)] = rt.IMPLICIT
    return query, value, relations.astype("int32")


TABLE_CASES = {
    "c1": dict(num_heads=12),
    "c3": dict(num_heads=12, context_size=3),
    "c5_bias": dict(num_heads=12, context_size=5, relation_bias=True),
    "explicit": dict(num_heads=3, head_relations=[[0, 4, 12], [1, 2, 3], [5, 6, 7, 8]]),
    "top_k": dict(num_heads=12, top_k=2),
    "regat": dict(num_heads=12, graph_masking=False, relation_bias=True),
}


@pytest.mark.parametrize("case", sorted(TABLE_CASES))
def test_matches_loop_reference(case):
    options = dict(TABLE_CASES[case])
    if case == "c1":
        options["context_size"] = 1
    layer = GraphMultiHeadAttention(key_dim=3, **options)
    query, value, relations = random_case(1)
    layer(query, value, relations=relations)
    randomize(layer, 2)
    out, weights = layer(query, value, relations=relations, return_attention_scores=True)
    expected_out, expected_weights = reference(layer, query, value, relations)
    np.testing.assert_allclose(to_np(weights), expected_weights, atol=2e-6)
    np.testing.assert_allclose(to_np(out), expected_out, rtol=1e-5, atol=1e-5)
    # Not vacuous: some rows attend, and the heads differ.
    assert expected_weights.sum() > 1
    if layer.num_heads > 1 and layer._graph_masking:
        assert not np.allclose(expected_weights[:, 0], expected_weights[:, 1])


def test_masks_combine_with_relations():
    layer = GraphMultiHeadAttention(num_heads=12, key_dim=3)
    query, value, relations = random_case(3, T=6, S=6)
    rng = np.random.default_rng(4)
    attention_mask = rng.random((2, 6, 6)) < 0.7
    value_mask = np.ones((2, 6), bool)
    value_mask[1, 4:] = False
    layer(query, value, relations=relations)
    randomize(layer, 5)
    out = layer(query, value, relations=relations, attention_mask=attention_mask,
                value_mask=value_mask, use_causal_mask=True)
    mask = attention_mask & value_mask[:, None, :] & np.tril(np.ones((6, 6), bool))[None]
    np.testing.assert_allclose(to_np(out), reference(layer, query, value, relations, mask)[0],
                               rtol=1e-5, atol=1e-5)


@settings(deadline=None, max_examples=15)
@given(seed=st.integers(0, 10_000), top_k=st.one_of(st.none(), st.integers(1, 7)))
def test_weights_are_a_distribution_over_allowed_keys(seed, top_k):
    """Property: weights are >= 0, zero off the allowed edges, and each row
    sums to 1 or (no allowed key) to 0; never NaN."""
    layer = GraphMultiHeadAttention(num_heads=12, key_dim=2, top_k=top_k)
    query, value, relations = random_case(seed, blocked=0.4)
    _, weights = layer(query, value, relations=relations, return_attention_scores=True)
    weights = to_np(weights)
    table = rt.table_from_sets(layer.head_relations)
    allowed = np.transpose(table[:, relations], (1, 0, 2, 3))  # [B, N, T, S]
    assert np.isfinite(weights).all() and (weights >= 0).all()
    assert (weights[~allowed] == 0).all()
    sums = weights.sum(-1)
    has_edge = allowed.any(-1)
    np.testing.assert_allclose(sums[has_edge], 1.0, atol=1e-5)
    assert (sums[~has_edge] == 0).all()
    if top_k is not None:
        # Ties aside (none with random floats), at most k keys per row.
        assert ((weights > 0).sum(-1) <= top_k).all()


# ------------------------------------------------------------- head tables


def test_head_tables_written_out():
    """The released head tables (docs/graph_attention.md), written out by
    hand: head h owns label h + 1; the direction heads (labels 4..11) add
    neighbours on each side, wrapping."""
    assert rt.context_head_relations(1) == [[label] for label in range(1, 13)]
    c3 = rt.context_head_relations(3)
    assert c3[:3] == [[1], [2], [3]] and c3[11] == [12]
    assert c3[3] == [4, 5, 11]  # label 4: 11 (wrapped) and 5
    assert c3[4] == [4, 5, 6]
    assert c3[10] == [4, 10, 11]  # label 11: 10 and 4 (wrapped)
    c5 = rt.context_head_relations(5)
    assert c5[3] == [4, 5, 6, 10, 11]
    assert c5[7] == [6, 7, 8, 9, 10]  # label 8
    assert c5[10] == [4, 5, 9, 10, 11]
    assert rt.context_head_relations(9)[5] == list(range(4, 12))
    table = rt.table_from_sets(c3)
    assert table[:, rt.IMPLICIT].all() and not table[:, rt.BLOCKED].any()
    assert rt.sets_from_table(table) == c3


def test_everything_allowed_equals_keras_mha():
    """A table in which every head accepts every label, on a fully connected
    graph (random labels 0..12), is Keras MHA with the same weights, masks
    included (rows with an allowed key)."""
    query, value, relations = random_case(6, blocked=0, implicit=0)
    layer = GraphMultiHeadAttention(num_heads=2, key_dim=4, head_relations=rt.all_relations(2))
    mha = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    layer(query, value, relations=relations)
    mha(query, value)
    randomize(layer, 7)
    mha.set_weights(layer.get_weights())
    np.testing.assert_allclose(to_np(layer(query, value, relations=relations)),
                               to_np(mha(query, value)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_np(layer(query, value)), to_np(mha(query, value)),
                               rtol=1e-5, atol=1e-5)
    mask = np.random.default_rng(8).random((2, 5, 6)) < 0.6
    mask[..., 0] = True
    np.testing.assert_allclose(to_np(layer(query, value, relations=relations, attention_mask=mask)),
                               to_np(mha(query, value, attention_mask=mask)), rtol=1e-5, atol=1e-5)


def test_blocked_rows_give_the_output_bias_only():
    """Footnote 5: a row with no allowed key has zero weights, so the layer
    outputs the output projection's bias alone; no NaN, also in gradients."""
    query, value, relations = random_case(9)
    relations[0, 1] = rt.BLOCKED
    relations[1, 3] = 0  # label 0, which no default head accepts
    layer = GraphMultiHeadAttention(num_heads=12, key_dim=2)
    layer(query, value, relations=relations)
    randomize(layer, 10)
    out = to_np(layer(query, value, relations=relations))
    bias = weights_by_name(layer)["attention_output/bias"]
    np.testing.assert_allclose(out[0, 1], bias, atol=1e-6)
    np.testing.assert_allclose(out[1, 3], bias, atol=1e-6)
    assert np.abs(out[0, 0] - bias).max() > 1e-3
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        x = tf.constant(query)
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x, value, relations=relations) ** 2)
        grads = tape.gradient(loss, [x] + layer.trainable_variables)
    else:
        import jax

        def loss(x):
            return ops.sum(layer(x, value, relations=relations) ** 2)

        grads = [jax.grad(loss)(query)]
    assert all(np.isfinite(to_np(g)).all() for g in grads)


def test_gradient_matches_finite_differences():
    query, value, relations = random_case(11, B=1, T=3, S=4)
    layer = GraphMultiHeadAttention(num_heads=12, key_dim=2, relation_bias=True)
    layer(query, value, relations=relations)
    randomize(layer, 12)
    direction = np.random.default_rng(13).normal(size=query.shape)

    def f(x):
        return float(to_np(ops.sum(layer(x.astype("float32"), value, relations=relations) ** 2)))

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        x = tf.constant(query)
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x, value, relations=relations) ** 2)
        grad = to_np(tape.gradient(loss, x))
    else:
        import jax

        grad = to_np(jax.grad(lambda x: ops.sum(layer(x, value, relations=relations) ** 2))(query))
    eps = 1e-2
    numeric = (f(query + eps * direction) - f(query - eps * direction)) / (2 * eps)
    np.testing.assert_allclose((grad * direction).sum(), numeric, rtol=2e-2, atol=2e-3)


def value_and_grad(fn, beta, compiled):
    """(fn(beta), d sum(fn(beta) * w) / d beta) on the current backend, eager
    or under XLA; `fn` returns (output, w)."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        def step(beta):
            with tf.GradientTape() as tape:
                tape.watch(beta)
                out, w = fn(beta)
                loss = tf.reduce_sum(out * w)
            return out, tape.gradient(loss, beta)

        step = tf.function(step, jit_compile=True) if compiled else step
        out, grad = step(tf.constant(beta))
    else:
        import jax

        def loss(beta):
            out, w = fn(beta)
            return ops.sum(out * w), out

        step = jax.value_and_grad(loss, has_aux=True)
        (_, out), grad = (jax.jit(step) if compiled else step)(beta)
    return to_np(out), to_np(grad)


@pytest.mark.parametrize("one_hot_gradient", [False, True])
@pytest.mark.parametrize("compiled", [False, True])
def test_relation_bias_and_its_gradient_match_loops(compiled, one_hot_gradient):
    """Issue 22: on accelerators the bias is a gather whose gradient is a
    one-hot contraction, not the gather's scatter-add (kept on CPU); both
    forms are tested here. Values: beta[h, label]; gradient: grad[h, label]
    = the sum of the upstream gradients where the label occurs (loops).
    Out-of-range labels count as BLOCKED."""
    from keras_structattn.layers.graph_attention import _relation_bias

    rng = np.random.default_rng(30)
    B, N, T, S = 2, 3, 4, 5
    labels = rng.integers(0, rt.NUM_LABELS, size=(B, T, S)).astype("int32")
    labels[0, 0, :3] = (20, -1, 1000)
    beta = rng.normal(size=(N, rt.NUM_LABELS)).astype("float32")
    upstream = rng.normal(size=(B, N, T, S)).astype("float32")

    def fn(beta):
        safe = rt.blocked_if_out_of_range(ops.convert_to_tensor(labels))
        return (_relation_bias(beta, safe, one_hot_gradient),
                ops.convert_to_tensor(upstream))

    bias, grad = value_and_grad(fn, beta, compiled)
    expected_bias = np.zeros((B, N, T, S))
    expected_grad = np.zeros((N, rt.NUM_LABELS))
    for b in range(B):
        for i in range(T):
            for j in range(S):
                label = int(labels[b, i, j])
                label = label if 0 <= label < rt.NUM_LABELS else rt.BLOCKED
                for h in range(N):
                    expected_bias[b, h, i, j] = beta[h, label]
                    expected_grad[h, label] += upstream[b, h, i, j]
    np.testing.assert_array_equal(bias, expected_bias)  # a gather: exact
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-6, atol=1e-6)
    assert expected_grad[:, rt.BLOCKED].any()  # the out-of-range labels landed there


@pytest.mark.parametrize("on_cpu", [False, True])
def test_relation_bias_gradient_through_the_layer(on_cpu, monkeypatch):
    """The layer's gradient with respect to `relation_bias` (the variable,
    [num_heads, NUM_LABELS]) matches central finite differences, ReGAT form
    (no masking) so that every label's bias reaches the softmax; with the
    gradient of either device (see `_relation_bias`)."""
    from keras_structattn.layers import graph_attention

    monkeypatch.setattr(graph_attention, "_default_device_is_cpu", lambda: on_cpu)
    query, value, relations = random_case(31, B=1, T=3, S=4)
    layer = GraphMultiHeadAttention(num_heads=12, key_dim=2, graph_masking=False,
                                    relation_bias=True)
    layer(query, value, relations=relations)
    randomize(layer, 32)
    weights = layer.get_weights()
    index = [w.path for w in layer.weights].index(layer.relation_bias.path)
    beta = weights[index]
    w_out = np.random.default_rng(33).normal(size=(1, 3, DIM)).astype("float32")

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(query, value, relations=relations) * w_out)
        grad = to_np(tape.gradient(loss, layer.relation_bias.value))
    else:
        def fn(beta):
            variables = [beta if v is layer.relation_bias else v.value
                         for v in layer.trainable_variables]
            out, _ = layer.stateless_call(variables, [], query, value, relations=relations)
            return out, ops.convert_to_tensor(w_out)

        _, grad = value_and_grad(fn, beta, compiled=False)
    direction = np.random.default_rng(34).normal(size=beta.shape)
    eps = 1e-2

    def f(b):
        layer.relation_bias.assign(b.astype("float32"))
        return float((to_np(layer(query, value, relations=relations)) * w_out).sum())

    numeric = (f(beta + eps * direction) - f(beta - eps * direction)) / (2 * eps)
    layer.relation_bias.assign(beta)
    np.testing.assert_allclose((grad * direction).sum(), numeric, rtol=1e-2, atol=1e-3)
    assert np.abs(grad).max() > 1e-3


# ------------------------------------------------------- Keras conventions


def test_config_and_keras_file_round_trip(tmp_path):
    inputs = keras.Input((5, DIM))
    memory = keras.Input((6, DIM))
    relations = keras.Input((5, 6), dtype="int32")
    layer = GraphMultiHeadAttention(num_heads=12, key_dim=2, context_size=5, relation_bias=True,
                                    top_k=3, dropout=0.1, seed=3)
    outputs = layer(inputs, memory, relations=relations)
    assert outputs.shape == (None, 5, DIM)
    model = keras.Model([inputs, memory, relations], outputs)
    randomize(layer, 14)
    query, value, labels = random_case(15)
    expected = to_np(model([query, value, labels]))
    path = tmp_path / "graph.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(to_np(loaded([query, value, labels])), expected, atol=1e-6)
    config = layer.get_config()
    clone = GraphMultiHeadAttention.from_config(config)
    assert clone.get_config() == config
    assert config["head_relations"] == rt.context_head_relations(5)


def test_symbolic_scores_shape():
    inputs = keras.Input((5, DIM))
    memory = keras.Input((7, DIM))
    layer = GraphMultiHeadAttention(num_heads=12, key_dim=2)
    out, scores = layer(inputs, memory, relations=keras.Input((5, 7), dtype="int32"),
                        return_attention_scores=True)
    assert out.shape == (None, 5, DIM) and scores.shape == (None, 12, 5, 7)
    assert layer.compute_output_shape((2, 5, DIM), (2, 7, DIM)) == (2, 5, DIM)


def test_fit_with_xla(monkeypatch):
    from keras_structattn.layers import graph_attention

    # The accelerators' relation-bias gradient, whose reshapes meet an
    # unknown batch size here (the CPU's is the gather's own).
    monkeypatch.setattr(graph_attention, "_default_device_is_cpu", lambda: False)
    inputs = keras.Input((5, DIM))
    relations = keras.Input((5, 5), dtype="int32")
    x = GraphMultiHeadAttention(num_heads=12, key_dim=2, relation_bias=True, top_k=4)(
        inputs, inputs, relations=relations)
    model = keras.Model([inputs, relations], keras.layers.Dense(1)(x))
    model.compile("adam", "mse", jit_compile=True)
    rng = np.random.default_rng(16)
    x_data = rng.normal(size=(16, 5, DIM)).astype("float32")
    labels = rng.integers(0, 15, size=(16, 5, 5)).astype("int32")
    history = model.fit([x_data, labels], rng.normal(size=(16, 5, 1)), epochs=3, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]


def test_mixed_precision():
    query, value, relations = random_case(17)
    relations[0, 0] = rt.BLOCKED
    layer32 = GraphMultiHeadAttention(num_heads=12, key_dim=4, relation_bias=True)
    layer16 = GraphMultiHeadAttention(num_heads=12, key_dim=4, relation_bias=True,
                                      dtype="mixed_float16")
    layer32(query, value, relations=relations)
    layer16(query, value, relations=relations)
    randomize(layer32, 18)
    layer16.set_weights(layer32.get_weights())
    out16, weights16 = layer16(query, value, relations=relations, return_attention_scores=True)
    assert keras.backend.standardize_dtype(out16.dtype) == "float16"
    assert keras.backend.standardize_dtype(weights16.dtype) == "float32"
    assert keras.backend.standardize_dtype(layer16.relation_bias.dtype) == "float32"
    assert np.isfinite(to_np(out16)).all()
    np.testing.assert_allclose(to_np(out16), to_np(layer32(query, value, relations=relations)),
                               atol=3e-2, rtol=3e-2)


def test_dropout_is_seeded_and_only_in_training():
    query, value, relations = random_case(19)
    make = lambda: GraphMultiHeadAttention(num_heads=12, key_dim=2, dropout=0.5, seed=4)  # noqa: E731
    a, b = make(), make()
    a(query, value, relations=relations)
    b(query, value, relations=relations)
    b.set_weights(a.get_weights())
    train_a = to_np(a(query, value, relations=relations, training=True))
    train_b = to_np(b(query, value, relations=relations, training=True))
    np.testing.assert_allclose(train_a, train_b)
    infer = to_np(a(query, value, relations=relations))
    assert np.abs(train_a - infer).max() > 1e-4
    np.testing.assert_allclose(infer, to_np(a(query, value, relations=relations)))


# ------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_heads=8), "num_heads=12"),
        (dict(num_heads=12, context_size=2), "context_size"),
        (dict(num_heads=12, context_size=0), "context_size"),
        (dict(num_heads=2, head_relations=[[1], [13]]), r"head_relations\[1\]"),
        (dict(num_heads=2, head_relations=[[1], [2], [3]]), "one entry per head"),
        (dict(num_heads=2, head_relations="all"), "head_relations"),
        (dict(num_heads=12, top_k=0), "top_k"),
        (dict(num_heads=12, graph_masking="yes"), "graph_masking"),
        (dict(num_heads=12, attention_axes=(1, 2)), "attention_axes"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GraphMultiHeadAttention(key_dim=2, **kwargs)


def test_bad_relations_shape_is_named():
    query, value, relations = random_case(20)
    layer = GraphMultiHeadAttention(num_heads=12, key_dim=2)
    with pytest.raises(ValueError, match="relations"):
        layer(query, value, relations=relations[:, :, :4])
    with pytest.raises(ValueError, match="relations"):
        layer(query, value, relations=relations[0])


# Issue 17, item 5: labels outside 0..14, the same on every backend.


@pytest.mark.parametrize("label", [20, 1000, -1])
def test_out_of_range_labels_are_an_error_where_known(label):
    query, value, relations = random_case(20)
    relations[1, 2, 3] = label
    layer = GraphMultiHeadAttention(num_heads=12, key_dim=2, relation_bias=True)
    message = (
        r"`relations` must hold relation labels in 0\.\.14 \(0\.\.12 spatial, 13 = IMPLICIT, "
        rf"14 = BLOCKED\)\. Received: relations\[1, 2, 3\] = {label} \(1 label out of range"
    )
    for labels in (relations, ops.convert_to_tensor(relations)):
        with pytest.raises(ValueError, match=message):
            layer(query, value, relations=labels)


def test_out_of_range_labels_are_blocked_in_compiled_code():
    """Compiled code cannot read the labels: 20, 1000 and -1 mean BLOCKED
    there, for the mask and the relation bias, on every backend."""
    query, value, relations = random_case(21)
    layer = GraphMultiHeadAttention(num_heads=12, key_dim=2, relation_bias=True)
    layer(query, value, relations=relations)
    randomize(layer, 22)  # a non-zero relation bias, BLOCKED's included
    bad, blocked = relations.copy(), relations.copy()
    for where, label in zip(((0, 0, 1), (0, 2, 0), (1, 3, 2)), (20, 1000, -1)):
        bad[where], blocked[where] = label, rt.BLOCKED
    inputs = [keras.Input(batch_shape=x.shape, dtype=str(x.dtype)) for x in (query, value, bad)]
    outputs = layer(inputs[0], inputs[1], relations=inputs[2], return_attention_scores=True)
    model = keras.Model(inputs, outputs)
    model.compile(jit_compile=True)
    output, weights = model.predict([query, value, bad], batch_size=2, verbose=0)
    expected, expected_weights = layer(query, value, relations=blocked,
                                       return_attention_scores=True)
    np.testing.assert_allclose(output, to_np(expected), atol=1e-5)
    np.testing.assert_allclose(weights, to_np(expected_weights), atol=1e-6)
    for b, i, j in ((0, 0, 1), (0, 2, 0), (1, 3, 2)):
        assert not weights[b, :, i, j].any()


def test_end_to_end_from_boxes_under_xla():
    """Boxes and masks in, relations built in the graph (`textvqa_relations`
    as keras.ops), a spatially aware layer, `fit` with XLA: the labels the
    model builds are those of the host (NumPy) builder."""
    from keras_structattn.ops import textvqa_relations
    from keras_structattn.ops import textvqa_relations_numpy

    rng = np.random.default_rng(21)
    n, q, o, r, d = 8, 3, 4, 2, 2
    corners = rng.random((n, o + r, 2)) * 0.7
    boxes = np.concatenate([corners, corners + rng.random((n, o + r, 2)) * 0.3], -1)
    data = dict(
        question_mask=rng.random((n, q)) < 0.8,
        object_boxes=boxes[:, :o].astype("float32"),
        object_mask=rng.random((n, o)) < 0.8,
        ocr_boxes=boxes[:, o:].astype("float32"),
        ocr_mask=rng.random((n, r)) < 0.8,
    )
    length = q + o + r + d
    shapes = dict(tokens=((length, DIM), "float32"), question_mask=((q,), "bool"),
                  object_boxes=((o, 4), "float32"), object_mask=((o,), "bool"),
                  ocr_boxes=((r, 4), "float32"), ocr_mask=((r,), "bool"))
    inputs = {name: keras.Input(shape, dtype=dtype, name=name)
              for name, (shape, dtype) in shapes.items()}
    graph = {k: v for k, v in inputs.items() if k != "tokens"}
    relations = textvqa_relations(**graph, decoder_length=d)
    x = GraphMultiHeadAttention(num_heads=12, key_dim=2)(
        inputs["tokens"], inputs["tokens"], relations=relations)
    model = keras.Model(inputs, [keras.layers.Dense(1)(x), relations])
    tokens = rng.normal(size=(n, length, DIM)).astype("float32")
    _, built = model.predict(dict(data, tokens=tokens), verbose=0)
    np.testing.assert_array_equal(built, textvqa_relations_numpy(**data, decoder_length=d))
    trainer = keras.Model(inputs, model.outputs[0])
    trainer.compile("adam", "mse", jit_compile=True)
    history = trainer.fit(dict(data, tokens=tokens), rng.normal(size=(n, length, 1)),
                          epochs=3, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert history.history["loss"][-1] < history.history["loss"][0]
