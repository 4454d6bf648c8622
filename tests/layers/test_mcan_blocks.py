"""Tests of MCAN's SA and SGA blocks (`keras_structattn.layers.mcan_blocks`).

A brute-force NumPy forward pass with the blocks' weights, in inference
mode: multi-head attention by loops over the real keys (plain MCAN), or the
loop reference of tests/layers/test_positional_attention.py (MCAN+PA's
PWA, POA, PMA), then the residual, MCAN's layer norm (unbiased std,
epsilon added to it) and the FFN. Padded keys change nothing; config.
"""

import math

import keras
import numpy as np
import pytest

from keras_structattn.layers.mcan_blocks import MCANGuidedAttentionBlock
from keras_structattn.layers.mcan_blocks import MCANSelfAttentionBlock
from tests.layers.test_positional_attention import reference as positional_reference
from tests.layers.weights import randomize as randomize_at_scale
from tests.layers.weights import to_np
from tests.ops.test_box_geometry import random_boxes

D, HEADS = 8, 2


def randomize(layer, seed):
    randomize_at_scale(layer, seed, scale=0.4)


def mcan_norm(x, norm):
    gamma, beta = (to_np(w) for w in norm.weights)
    mean = x.mean(-1, keepdims=True)
    return gamma * (x - mean) / (x.std(-1, ddof=1, keepdims=True) + 1e-6) + beta


def numpy_mha(layer, query, value, key_mask):
    """Multi-head attention by loops; `key_mask` [B, S] (True = real)."""
    w = {"/".join(v.path.split("/")[-2:]): to_np(v) for v in layer.weights}

    def project(x, name):
        return np.einsum("btd,dnk->btnk", x, w[f"{name}/kernel"]) + w[f"{name}/bias"]

    q, k, v = project(query, "query"), project(value, "key"), project(value, "value")
    batch, length, heads, key_dim = q.shape
    context = np.zeros(q.shape)
    for b in range(batch):
        real = [j for j in range(value.shape[1]) if key_mask[b, j]]
        for h in range(heads):
            for i in range(length):
                logits = [np.dot(q[b, i, h], k[b, j, h]) / math.sqrt(key_dim) for j in real]
                if not real:
                    continue
                e = np.exp(np.array(logits) - max(logits))
                context[b, i, h] = (e / e.sum()) @ v[b, real, h]
    out = np.einsum("btnk,nkd->btd", context, w["attention_output/kernel"])
    return out + w["attention_output/bias"]


def numpy_ffn(ffn, x):
    hidden = np.maximum(x @ to_np(ffn.hidden_dense.kernel) + to_np(ffn.hidden_dense.bias), 0)
    return hidden @ to_np(ffn.output_dense.kernel) + to_np(ffn.output_dense.bias)


def attention_reference(layer, query, value, key_mask, query_pos=None, key_pos=None):
    if query_pos is None:
        return numpy_mha(layer, query, value, key_mask)
    mask = np.broadcast_to(key_mask[:, None, :], (query.shape[0], query.shape[1], value.shape[1]))
    key_pos = query_pos if key_pos is None else key_pos
    return positional_reference(layer, query, value, query_pos, key_pos, mask)[0]


def data(seed, B=2, T=5, N=6):
    rng = np.random.default_rng(seed)
    return dict(
        words=rng.normal(size=(B, T, D)).astype("float32"),
        regions=rng.normal(size=(B, N, D)).astype("float32"),
        word_mask=np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)[:, :T],
        region_mask=np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)[:, :N],
        word_positions=rng.normal(size=(1, T, D)).astype("float32"),
        region_positions=rng.normal(size=(B, N, D)).astype("float32"),
        boxes=random_boxes(rng, (B, N)),
    )


@pytest.mark.parametrize("positional", [False, True])
def test_self_attention_block_matches_numpy(positional):
    x = data(0)
    block = MCANSelfAttentionBlock(D, HEADS, positional=positional, seed=1)
    extra = {"positions": x["word_positions"]} if positional else {}
    block(x["words"], x["word_mask"], **extra)
    randomize(block, 2)
    out, scores = block(x["words"], x["word_mask"], return_attention_scores=True, **extra)
    words = x["words"].astype(np.float64)
    pos = np.broadcast_to(x["word_positions"], words.shape) if positional else None
    y = attention_reference(block.attention, words, words, x["word_mask"], pos)
    h = mcan_norm(words + y, block.attention_residual.norm)
    expected = mcan_norm(h + numpy_ffn(block.ffn, h), block.ffn_residual.norm)
    np.testing.assert_allclose(to_np(out), expected, rtol=1e-4, atol=1e-4)
    assert tuple(scores.shape) == (2, HEADS, 5, 5)
    np.testing.assert_allclose(to_np(scores)[0, :, :, 3:], 0.0)
    # Padded words (keys) change nothing in the real rows.
    changed = x["words"].copy()
    changed[0, 3:] = 50.0
    again = to_np(block(changed, x["word_mask"], **extra))
    np.testing.assert_allclose(again[0, :3], to_np(out)[0, :3], atol=1e-5)


@pytest.mark.parametrize("positional,variant", [(False, "paper"), (True, "paper"),
                                                (True, "released")])
def test_guided_attention_block_matches_numpy(positional, variant):
    x = data(3)
    block = MCANGuidedAttentionBlock(D, HEADS, positional=positional, object_variant=variant,
                                     geometry_dim=16, seed=4)
    extra = {}
    if positional:
        extra = dict(boxes=x["boxes"], positions=x["region_positions"],
                     guide_positions=x["word_positions"])
    call = lambda regions, words: block(  # noqa: E731
        regions, words, x["region_mask"], x["word_mask"], return_attention_scores=True, **extra)
    call(x["regions"], x["words"])
    randomize(block, 5)
    out, self_scores, guided_scores = call(x["regions"], x["words"])
    regions, words = x["regions"].astype(np.float64), x["words"].astype(np.float64)
    boxes = x["boxes"] if positional else None
    y = attention_reference(block.self_attention, regions, regions, x["region_mask"], boxes)
    h = mcan_norm(regions + y, block.self_residual.norm)
    qpos = x["region_positions"] if positional else None
    kpos = np.broadcast_to(x["word_positions"], words.shape) if positional else None
    y = attention_reference(block.guided_attention, h, words, x["word_mask"], qpos, kpos)
    h = mcan_norm(h + y, block.guided_residual.norm)
    expected = mcan_norm(h + numpy_ffn(block.ffn, h), block.ffn_residual.norm)
    np.testing.assert_allclose(to_np(out), expected, rtol=1e-4, atol=2e-4)
    assert tuple(self_scores.shape) == (2, HEADS, 6, 6)
    assert tuple(guided_scores.shape) == (2, HEADS, 6, 5)
    np.testing.assert_allclose(to_np(guided_scores)[0, :, :, 3:], 0.0)
    # Padded words and padded regions (as keys) change nothing.
    regions2, words2 = x["regions"].copy(), x["words"].copy()
    regions2[0, 4:] = 30.0
    words2[0, 3:] = -30.0
    again = to_np(call(regions2, words2)[0])
    np.testing.assert_allclose(again[0, :4], to_np(out)[0, :4], atol=1e-4)


def test_positions_required_and_config_round_trip():
    x = data(6)
    block = MCANGuidedAttentionBlock(D, HEADS, positional=True, object_variant="released",
                                     fusion="add", dropout=0.2, seed=7)
    with pytest.raises(ValueError, match="boxes"):
        block(x["regions"], x["words"])
    plain = MCANSelfAttentionBlock(D, HEADS)
    with pytest.raises(ValueError, match="positional=True"):
        plain(x["words"], positions=x["word_positions"])
    for layer in (block, MCANSelfAttentionBlock(D, HEADS, positional=True, layer_norm="keras")):
        clone = type(layer).from_config(layer.get_config())
        assert clone.get_config() == layer.get_config()
    assert block.get_config()["object_variant"] == "released"
    assert keras.saving.get_registered_object("keras_structattn>MCANGuidedAttentionBlock")
    # Symbolic call.
    words = keras.Input((5, D))
    out, scores = plain(words, return_attention_scores=True)
    assert tuple(out.shape) == (None, 5, D) and tuple(scores.shape) == (None, HEADS, 5, 5)
