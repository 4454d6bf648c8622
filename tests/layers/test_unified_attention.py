"""Tests of the MUAN unified attention block and stack (Yu et al., 2019,
arXiv:1908.04107; docs/gated_attention.md).

A NumPy reference of the UA block written from the paper (Eqs. 7-8, Sec.
III-B): Z = [X; FC_y(Y)] (optionally each part layer-normed first, as the
openvqa code does), gated
self-attention (the loop reference of test_gated_attention) with the joint
key padding mask and the Fig. 5b quadrant masks written out by index, then
post-norm residuals around the attention and FC(4d)-ReLU-FC(d), with Keras's
or the MCAN family's layer norm. Plus the stack (the first block takes two
inputs, later ones Z), the Fig. 6 split, padding that cannot leak, Keras
conventions and argument validation.
"""

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from keras import ops

from keras_structattn.layers.normalization import StdLayerNormalization
from keras_structattn.layers.unified_attention import UnifiedAttentionBlock
from keras_structattn.layers.unified_attention import UnifiedAttentionStack
from keras_structattn.layers.unified_attention import split_attention
from keras_structattn.layers.unified_attention import split_sequence
from tests._backend import gradients
from tests.layers.test_gated_attention import reference as gated_reference
from tests.layers.weights import randomize
from tests.layers.weights import to_np

D, HEADS, M, N, DY = 8, 2, 4, 6, 5  # width, heads, text and visual lengths, d_y


def layer_norm(x, gamma, beta, epsilon, kind):
    mean = x.mean(-1, keepdims=True)
    if kind == "keras":  # biased variance, epsilon inside the root
        return gamma * (x - mean) / np.sqrt(x.var(-1, keepdims=True) + epsilon) + beta
    # MCAN family: unbiased std, epsilon added to the std
    return gamma * (x - mean) / (x.std(-1, ddof=1, keepdims=True) + epsilon) + beta


def allowed_pairs(key_mask, text_length, masked, batch, length):
    """[B, S, S] booleans by index: key padding and the Fig. 5b quadrants."""
    allowed = np.ones((batch, length, length), bool)
    for b in range(batch):
        for i in range(length):
            for j in range(length):
                if key_mask is not None and not key_mask[b, j]:
                    allowed[b, i, j] = False
                same_modality = (i < text_length) == (j < text_length)
                if (masked == "self" and same_modality) or (masked == "co" and not same_modality):
                    allowed[b, i, j] = False
    return allowed


def weights_by_path(block):
    """{"ffn/hidden/kernel": ..., ...}: the block's weights by their paths
    inside the block."""
    return {w.path[len(block.path) + 1:]: to_np(w) for w in block.weights}


def block_reference(block, inputs, visual=None, key_mask=None, text_length=None):
    """The block's output and attention weights. `key_mask`: [B, S] for Z."""
    w = weights_by_path(block)
    norm = lambda x, name: layer_norm(  # noqa: E731
        x, w[f"{name}/gamma"], w[f"{name}/beta"], block.layer_norm_epsilon, block.layer_norm)
    z = inputs
    if visual is not None:
        projected = visual @ w["visual_projection/kernel"] + w["visual_projection/bias"]
        text = inputs
        if block.modality_norm:
            text, projected = norm(text, "text_norm"), norm(projected, "visual_norm")
        z = np.concatenate([text, projected], axis=1)
        text_length = inputs.shape[1]
    mask = allowed_pairs(key_mask, text_length, block.mask_quadrants, *z.shape[:2])
    attended, weights, _ = gated_reference(block.attention, z, mask=mask)
    z = norm(z + attended, "attention_residual/norm")
    hidden = np.maximum(z @ w["ffn/hidden/kernel"] + w["ffn/hidden/bias"], 0.0)
    z = norm(z + hidden @ w["ffn/output/kernel"] + w["ffn/output/bias"], "ffn_residual/norm")
    return z, weights


def random_case(seed, B=2):
    rng = np.random.default_rng(seed)
    text = rng.normal(size=(B, M, D)).astype("float32")
    visual = rng.normal(size=(B, N, DY)).astype("float32")
    text_mask = np.ones((B, M), bool)
    text_mask[1, 3:] = False
    visual_mask = np.ones((B, N), bool)
    visual_mask[0, 4:] = False
    return text, visual, text_mask, visual_mask


BLOCK_CASES = {
    "ua": dict(),
    "mask_self": dict(mask_quadrants="self"),
    "mask_co": dict(mask_quadrants="co"),
    "mcan_norm": dict(layer_norm="mcan", modality_norm=True),
    "no_gate": dict(qk_gate=False, filter_size=12),
    "gate_full_width": dict(gate_per_head=False, gate_dim=3),
}


@pytest.mark.parametrize("case", sorted(BLOCK_CASES))
@pytest.mark.parametrize("multimodal", [True, False])
def test_block_matches_reference(case, multimodal):
    text, visual, text_mask, visual_mask = random_case(1)
    options = BLOCK_CASES[case]
    block = UnifiedAttentionBlock(D, HEADS, multimodal_input=multimodal, **options)
    key_mask = np.concatenate([text_mask, visual_mask], 1)
    if multimodal:
        call = lambda b: b(text, visual, padding_mask=text_mask,  # noqa: E731
                           visual_padding_mask=visual_mask, return_attention_scores=True)
        args = (text, visual, key_mask, None)
    else:
        z = np.random.default_rng(2).normal(size=(2, M + N, D)).astype("float32")
        call = lambda b: b(z, padding_mask=key_mask, text_length=M,  # noqa: E731
                           return_attention_scores=True)
        args = (z, None, key_mask, M)
    call(block)
    randomize(block, 3)
    out, scores = call(block)
    expected_out, expected_scores = block_reference(block, *args)
    np.testing.assert_allclose(to_np(scores), expected_scores, atol=2e-6)
    np.testing.assert_allclose(to_np(out), expected_out, rtol=1e-4, atol=1e-4)
    assert out.shape == (2, M + N, D)
    if case == "mcan_norm":  # not vacuous: the two layer norms differ here
        keras_ln = layer_norm(expected_out, 1.0, 0.0, 1e-6, "keras")
        mcan_ln = layer_norm(expected_out, 1.0, 0.0, 1e-6, "mcan")
        assert np.abs(keras_ln - mcan_ln).max() > 1e-2


def test_quadrant_masks_and_split():
    """Fig. 5b: "self" zeroes A_TT and A_VV, "co" zeroes A_TV and A_VT; the
    unmasked quadrants carry all the weight; rows without any key left
    (a text row whose visual keys are all padding, under "self") are zero."""
    text, visual, text_mask, visual_mask = random_case(4)
    visual_mask[1, :] = False  # sample 1: no real visual token
    quadrants = {}
    for masked in (None, "self", "co"):
        block = UnifiedAttentionBlock(D, HEADS, multimodal_input=True, mask_quadrants=masked)
        _, scores = block(text, visual, padding_mask=text_mask, visual_padding_mask=visual_mask,
                          return_attention_scores=True)
        quadrants[masked] = {k: to_np(v) for k, v in split_attention(scores, M)._asdict().items()}
        assert quadrants[masked]["tv"].shape == (2, HEADS, M, N)
        assert quadrants[masked]["vt"].shape == (2, HEADS, N, M)
    full, no_self, no_co = quadrants[None], quadrants["self"], quadrants["co"]
    assert all(np.abs(full[k][0]).max() > 0 for k in ("tt", "tv", "vt", "vv"))
    assert (no_self["tt"] == 0).all() and (no_self["vv"] == 0).all()
    assert (no_co["tv"] == 0).all() and (no_co["vt"] == 0).all()
    np.testing.assert_allclose(no_self["tv"][0].sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(no_co["tt"].sum(-1), 1.0, atol=1e-5)
    assert (no_self["tv"][1] == 0).all()  # zero rows: nothing visual to attend to


def test_split_helpers_by_index():
    length = M + N
    scores = (100 * np.arange(length)[:, None] + np.arange(length)[None, :])[None, None]
    parts = split_attention(scores, M)
    assert (parts.tt == 100 * np.arange(M)[:, None] + np.arange(M)).all()
    assert (parts.tv == 100 * np.arange(M)[:, None] + M + np.arange(N)).all()
    assert (parts.vt == 100 * (M + np.arange(N))[:, None] + np.arange(M)).all()
    assert (parts.vv == 100 * (M + np.arange(N))[:, None] + M + np.arange(N)).all()
    z = np.arange(2 * length * 3).reshape(2, length, 3)
    text, vis = split_sequence(z, M)
    assert (text == z[:, :M]).all() and (vis == z[:, M:]).all()
    with pytest.raises(ValueError, match="text_length"):
        split_attention(scores, 0)


# ------------------------------------------------------------------ stack


def test_stack_chains_the_blocks():
    """Eqs. 7-8: block 0 takes (X, Y), block l takes block l-1's Z with the
    joint mask; the output is Z split into its text and visual parts."""
    text, visual, text_mask, visual_mask = random_case(5)
    stack = UnifiedAttentionStack(3, D, HEADS, filter_size=12, mask_quadrants="co")
    stack(text, visual, text_mask=text_mask, visual_mask=visual_mask)
    randomize(stack, 6)
    text_out, visual_out, scores = stack(text, visual, text_mask=text_mask,
                                         visual_mask=visual_mask, return_attention_scores=True)
    assert [b.multimodal_input for b in stack.blocks] == [True, False, False]
    key_mask = np.concatenate([text_mask, visual_mask], 1)
    z, expected_scores = block_reference(stack.blocks[0], text, visual, key_mask)
    all_scores = [expected_scores]
    for block in stack.blocks[1:]:
        z, expected_scores = block_reference(block, z, None, key_mask, M)
        all_scores.append(expected_scores)
    np.testing.assert_allclose(to_np(text_out), z[:, :M], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(to_np(visual_out), z[:, M:], rtol=1e-4, atol=1e-4)
    assert len(scores) == 3
    for got, want in zip(scores, all_scores):
        np.testing.assert_allclose(to_np(got), want, atol=1e-5)


@settings(deadline=None, max_examples=6)
@given(seed=st.integers(0, 10_000), padded=st.integers(1, N - 1))
def test_padding_does_not_leak(seed, padded):
    """Property: padded visual features (any values) do not change the
    outputs of the real tokens, and get zero attention weight."""
    text, visual, text_mask, _ = random_case(seed)
    visual_mask = np.ones((2, N), bool)
    visual_mask[:, N - padded:] = False
    stack = UnifiedAttentionStack(2, D, HEADS, filter_size=12)
    stack(text, visual, text_mask=text_mask, visual_mask=visual_mask)
    randomize(stack, seed + 1)
    noisy = visual.copy()
    noisy[:, N - padded:] = np.random.default_rng(seed + 2).normal(scale=5, size=(2, padded, DY))
    a_text, a_vis, scores = stack(text, visual, text_mask=text_mask, visual_mask=visual_mask,
                                  return_attention_scores=True)
    b_text, b_vis = stack(text, noisy, text_mask=text_mask, visual_mask=visual_mask)
    # Padded text rows are computed too (only keys are masked): all text rows match.
    np.testing.assert_allclose(to_np(b_text), to_np(a_text), atol=1e-5)
    np.testing.assert_allclose(to_np(b_vis)[:, : N - padded], to_np(a_vis)[:, : N - padded],
                               atol=1e-5)
    for s in scores:
        assert (to_np(s)[..., M + N - padded:] == 0).all()
        assert (to_np(s)[1, :, :, 3:M] == 0).all()  # padded text keys


@pytest.mark.filterwarnings("ignore:.*does not support masking")  # outputs carry no mask
def test_keras_masks_fill_the_stack_masks():
    tokens = np.array([[5, 2, 0, 0], [1, 2, 3, 4]])
    embed = keras.layers.Embedding(9, D, mask_zero=True)
    _, visual, _, visual_mask = random_case(7)
    stack = UnifiedAttentionStack(2, D, HEADS, filter_size=12)
    x = embed(tokens)
    implicit = stack(x, visual, visual_mask=visual_mask)
    explicit = stack(x, visual, text_mask=tokens != 0, visual_mask=visual_mask)
    unmasked = stack(ops.convert_to_tensor(to_np(x), "float32"), visual, visual_mask=visual_mask)
    np.testing.assert_allclose(to_np(implicit[0]), to_np(explicit[0]), atol=1e-6)
    assert np.abs(to_np(implicit[0]) - to_np(unmasked[0])).max() > 1e-4


# ------------------------------------------------------------ layer norm


def test_mcan_layer_norm():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(3, 4, 6)).astype("float32") * 3 + 1
    x[0, 0] = 2.0  # a constant row: zero std
    ln = StdLayerNormalization(1e-6)
    ln(x)
    ln.set_weights([rng.normal(size=6).astype("float32"), rng.normal(size=6).astype("float32")])
    gamma, beta = ln.get_weights()
    expected = layer_norm(x.astype("float64"), gamma, beta, 1e-6, "mcan")
    np.testing.assert_allclose(to_np(ln(x)), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_np(ln(x))[0, 0], beta, atol=1e-6)
    (grad,) = gradients(lambda t: ops.sum(ln(t) ** 3), x)
    assert np.isfinite(grad).all()
    keras_ln = layer_norm(x.astype("float64"), gamma, beta, 1e-6, "keras")
    assert np.abs(keras_ln - expected).max() > 1e-2  # biased vs unbiased std
    out16 = StdLayerNormalization(dtype="mixed_float16")(x)
    assert keras.backend.standardize_dtype(out16.dtype) == "float16"


# ------------------------------------------------------- Keras conventions


def test_config_and_keras_file_round_trip(tmp_path):
    text = keras.Input((M, D))
    visual = keras.Input((N, DY))
    text_mask = keras.Input((M,), dtype="bool")
    visual_mask = keras.Input((N,), dtype="bool")
    stack = UnifiedAttentionStack(2, D, HEADS, filter_size=12, gate_dim=3, mask_quadrants="self",
                                  layer_norm="mcan", modality_norm=True, seed=5)
    text_out, visual_out, scores = stack(text, visual, text_mask=text_mask,
                                         visual_mask=visual_mask, return_attention_scores=True)
    assert text_out.shape == (None, M, D) and visual_out.shape == (None, N, D)
    assert [s.shape for s in scores] == [(None, HEADS, M + N, M + N)] * 2
    model = keras.Model([text, visual, text_mask, visual_mask], [text_out, visual_out])
    randomize(stack, 9)
    inputs = list(random_case(10))
    expected = [to_np(t) for t in model(inputs)]
    path = tmp_path / "muan.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    for got, want in zip(loaded(inputs), expected):
        np.testing.assert_allclose(to_np(got), want, atol=1e-5)
    config = stack.get_config()
    assert UnifiedAttentionStack.from_config(config).get_config() == config
    block_config = stack.blocks[1].get_config()
    assert UnifiedAttentionBlock.from_config(block_config).get_config() == block_config
    assert config["gate_dim"] == 3 and config["mask_quadrants"] == "self"


def test_block_symbolic_shapes():
    z = keras.Input((M + N, D))
    block = UnifiedAttentionBlock(D, HEADS)
    out, scores, gates = block(z, return_attention_scores=True, return_gates=True)
    assert out.shape == (None, M + N, D)
    assert scores.shape == (None, HEADS, M + N, M + N) and gates.shape == (None, HEADS, M + N, 2)
    first = UnifiedAttentionBlock(D, HEADS, multimodal_input=True)
    assert first(keras.Input((M, D)), keras.Input((N, DY))).shape == (None, M + N, D)


def test_fit_with_xla():
    # Without dropout, so that full-batch Adam on 16 examples must fit them:
    # with dropout the loss of 3 single-batch epochs goes up or down by seed.
    keras.utils.set_random_seed(0)
    text = keras.Input((M, D))
    visual = keras.Input((N, DY))
    stack = UnifiedAttentionStack(2, D, HEADS, filter_size=12, dropout=0.0, seed=1)
    text_out, _ = stack(text, visual)
    model = keras.Model([text, visual], keras.layers.Dense(1)(text_out[:, 0]))
    model.compile(keras.optimizers.Adam(1e-2), "mse", jit_compile=True)
    rng = np.random.default_rng(11)
    data = [rng.normal(size=(16, M, D)).astype("float32"),
            rng.normal(size=(16, N, DY)).astype("float32")]
    history = model.fit(data, rng.normal(size=(16, 1)), epochs=5, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < 0.5 * losses[0]


def test_mixed_precision():
    text, visual, text_mask, visual_mask = random_case(12)
    make = lambda dtype: UnifiedAttentionStack(  # noqa: E731
        2, D, HEADS, filter_size=12, mask_quadrants="self", dtype=dtype)
    stack32, stack16 = make("float32"), make("mixed_float16")
    visual_mask[1, :] = False  # zero rows in fp16
    for stack in (stack32, stack16):
        stack(text, visual, text_mask=text_mask, visual_mask=visual_mask)
    randomize(stack32, 13, scale=0.3)
    stack16.set_weights(stack32.get_weights())
    out16 = stack16(text, visual, text_mask=text_mask, visual_mask=visual_mask,
                    return_attention_scores=True)
    out32 = stack32(text, visual, text_mask=text_mask, visual_mask=visual_mask)
    assert keras.backend.standardize_dtype(out16[0].dtype) == "float16"
    assert keras.backend.standardize_dtype(out16[2][0].dtype) == "float32"
    for a, b in zip(out16[:2], out32):
        assert np.isfinite(to_np(a)).all()
        np.testing.assert_allclose(to_np(a), to_np(b), atol=5e-2, rtol=5e-2)


def test_dropout_is_seeded_and_only_in_training():
    text, visual, text_mask, visual_mask = random_case(14)
    def make():
        return UnifiedAttentionStack(2, D, HEADS, filter_size=12, dropout=0.3, seed=7)

    a, b = make(), make()
    a(text, visual)
    b(text, visual)
    b.set_weights(a.get_weights())
    train_a = to_np(a(text, visual, training=True)[0])
    np.testing.assert_allclose(train_a, to_np(b(text, visual, training=True)[0]))
    infer = to_np(a(text, visual)[0])
    assert np.abs(train_a - infer).max() > 1e-4
    np.testing.assert_allclose(infer, to_np(a(text, visual)[0]))
    seeds = [layer.seed for layer in a._flatten_layers() if isinstance(layer, keras.layers.Dropout)]
    assert len(seeds) == len(set(seeds)) == 8  # 4 per block, each its own seed


# ------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(hidden_size=10, num_heads=4), "hidden_size"),
        (dict(num_heads=0), "num_heads"),
        (dict(filter_size=0), "filter_size"),
        (dict(dropout=1.0), "dropout"),
        (dict(attention_dropout=-0.1), "attention_dropout"),
        (dict(mask_quadrants="both"), "mask_quadrants"),
        (dict(layer_norm="torch"), "layer_norm"),
        (dict(layer_norm_epsilon=0), "layer_norm_epsilon"),
        (dict(modality_norm=1), "modality_norm"),
        (dict(gate_dim=0), "gate_dim"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    options = dict(hidden_size=D, num_heads=HEADS)
    options.update(kwargs)
    with pytest.raises(ValueError, match=match):
        UnifiedAttentionBlock(**options)


def test_bad_calls_are_explained():
    text, visual, _, _ = random_case(15)
    z = np.concatenate([text, text[:, :2]], 1)
    with pytest.raises(ValueError, match="visual"):
        UnifiedAttentionBlock(D, HEADS, multimodal_input=True)(text)
    with pytest.raises(ValueError, match="visual"):
        UnifiedAttentionBlock(D, HEADS)(z, visual)
    with pytest.raises(ValueError, match="text_length"):
        UnifiedAttentionBlock(D, HEADS, mask_quadrants="co")(z)
    with pytest.raises(ValueError, match="hidden_size"):
        UnifiedAttentionBlock(D, HEADS)(visual)
    with pytest.raises(ValueError, match="num_blocks"):
        UnifiedAttentionStack(0, D, HEADS)
