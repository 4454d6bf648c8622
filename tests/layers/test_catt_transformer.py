"""Tests of the stacked Transformer+CATT blocks (Yang et al., 2021,
arXiv:2103.03493, Fig. 5; docs/catt_attention.md).

The encoder and decoder stacks are checked against a NumPy reference of
post-norm blocks written here from the paper and the module's description:
in each block the IS stream self-attends, the CS stream's
attention uses the IS stream as query over the dictionary (first block, no
mask) or the previous CS output (token mask, causal in the decoder), both
with the IS input as residual; the decoder's IS stream cross-attends to the
encoder's IS output and its CS stream to the encoder's CS output; FFN and
norms are shared. Plus stream independence, causality, padding, parameter
counts, `.keras` round trip, `fit` under XLA and mixed precision.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.layers.catt_transformer import CATTDecoder
from keras_structattn.layers.catt_transformer import CATTDecoderBlock
from keras_structattn.layers.catt_transformer import CATTEncoder
from keras_structattn.layers.catt_transformer import CATTEncoderBlock
from tests._backend import compiled_on_jax
from tests.layers.weights import randomize as randomize_at_scale
from tests.layers.weights import to_np
from tests.layers.weights import weights_by_name

HIDDEN, FILTER, HEADS, K_IMAGE, K_WORDS = 8, 12, 2, 5, 6


def randomize(layer, seed):
    randomize_at_scale(layer, seed, scale=0.4)


def run(layer, *args, **kwargs):
    """`layer(*args, **kwargs)`, as one jit compile on JAX (see tests._backend)."""
    return compiled_on_jax(lambda *a: layer(*a, **kwargs))(*args)


def mha(w, prefix, query, memory, mask=None):
    """Vectorised multi-head attention; rows without keys give zero context."""
    q = np.einsum("btd,dnk->btnk", query, w[prefix + "query/kernel"]) + w[prefix + "query/bias"]
    k = np.einsum("bsd,dnk->bsnk", memory, w[prefix + "key/kernel"]) + w[prefix + "key/bias"]
    v = np.einsum("bsd,dnk->bsnk", memory, w[prefix + "value/kernel"]) + w[prefix + "value/bias"]
    logits = np.einsum("btnk,bsnk->bnts", q, k) / np.sqrt(q.shape[-1])
    allowed = np.ones(logits.shape, bool) if mask is None else np.broadcast_to(
        mask[:, None], logits.shape)
    logits = np.where(allowed, logits, -np.inf)
    top = np.max(logits, -1, keepdims=True)
    exps = np.where(allowed, np.exp(logits - np.where(np.isfinite(top), top, 0)), 0.0)
    weights = exps / np.maximum(exps.sum(-1, keepdims=True), 1e-300)
    context = np.einsum("bnts,bsnk->btnk", weights, v)
    return np.einsum("btnk,nkd->btd", context, w[prefix + "attention_output/kernel"]) + \
        w[prefix + "attention_output/bias"]


def norm(w, name, x, eps=1e-6):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w[name + "/gamma"] + w[name + "/beta"]


def feed_forward(w, p, x):
    y = np.maximum(x @ w[p + "ffn/hidden/kernel"] + w[p + "ffn/hidden/bias"], 0)
    return norm(w, p + "ffn_residual/norm",
                x + y @ w[p + "ffn/output/kernel"] + w[p + "ffn/output/bias"])


def stream_prefixes(block, shared):
    """(IS prefix, CS prefix) of a block's stream sublayers, and CS attention."""
    if shared:
        return block, block, block + "self_attention/"
    return block, block + "cs_", block + "self_attention/cs_attention/"


def self_attention_ref(w, block, shared, x, context, pad, causal):
    is_p, cs_p, cs_attention = stream_prefixes(block, shared)
    B, T = x.shape[:2]
    key_mask = np.ones((B, 1, T), bool) if pad is None else pad[:, None, :]
    if causal:
        key_mask = key_mask & np.tril(np.ones((T, T), bool))[None]
    z = mha(w, block + "self_attention/", x, x, key_mask)
    if context.ndim == 2:  # the dictionary: no mask
        c = mha(w, cs_attention, x, np.broadcast_to(context, (B,) + context.shape))
    else:
        c = mha(w, cs_attention, x, context, key_mask)
    return (norm(w, is_p + "self_attention_residual/norm", x + z),
            norm(w, cs_p + "self_attention_residual/norm", x + c))


def encoder_ref(encoder, x, pad=None, shared=True):
    w = weights_by_name(encoder)
    z, c = x, w["global_dictionary/dictionary"]
    for i in range(encoder.num_layers):
        block = f"block_{i}/"
        z, c = self_attention_ref(w, block, shared, z, c, pad, causal=False)
        is_p, cs_p, _ = stream_prefixes(block, shared)
        z, c = feed_forward(w, is_p, z), feed_forward(w, cs_p, c)
    return z, c


def decoder_ref(decoder, x, enc_z, enc_c, pad=None, enc_pad=None, shared=True):
    w = weights_by_name(decoder)
    z, c = x, w["global_dictionary/dictionary"]
    enc_mask = None if enc_pad is None else enc_pad[:, None, :]
    for i in range(decoder.num_layers):
        block = f"block_{i}/"
        z, c = self_attention_ref(w, block, shared, z, c, pad, causal=True)
        is_p, cs_p, _ = stream_prefixes(block, shared)
        z = norm(w, is_p + "cross_attention_residual/norm",
                 z + mha(w, is_p + "cross_attention/", z, enc_z, enc_mask))
        c = norm(w, cs_p + "cross_attention_residual/norm",
                 c + mha(w, cs_p + "cross_attention/", c, enc_c, enc_mask))
        z, c = feed_forward(w, is_p, z), feed_forward(w, cs_p, c)
    return np.concatenate([z, c], -1)


def inputs(seed, B=2, S=5, T=4):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(B, S, HIDDEN)).astype("float32")
    y = rng.normal(size=(B, T, HIDDEN)).astype("float32")
    pad = np.ones((B, S), bool)
    pad[1, 3:] = False
    words = np.ones((B, T), bool)
    words[0, 3:] = False
    return x, y, pad, words


def make_pair(share_weights=True, seed=0, **kwargs):
    common = dict(share_weights=share_weights, **kwargs)
    encoder = CATTEncoder(2, HIDDEN, FILTER, HEADS, dictionary_size=K_IMAGE, **common)
    decoder = CATTDecoder(2, HIDDEN, FILTER, HEADS, dictionary_size=K_WORDS, **common)
    encoder.build((2, 5, HIDDEN))
    decoder.build((2, 4, HIDDEN), (2, 5, HIDDEN), (2, 5, HIDDEN))
    randomize(encoder, seed + 1)
    randomize(decoder, seed + 2)
    return encoder, decoder


@pytest.mark.parametrize("share_weights", [True, False])
def test_stacks_match_numpy_reference(share_weights):
    encoder, decoder = make_pair(share_weights)
    x, y, pad, words = inputs(3)
    z, c = run(encoder, x, padding_mask=pad)
    ez, ec = encoder_ref(encoder, x, pad, shared=share_weights)
    np.testing.assert_allclose(to_np(z), ez, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(to_np(c), ec, rtol=1e-4, atol=1e-4)
    assert not np.allclose(ez, ec)
    out = run(decoder, y, z, c, padding_mask=words, encoder_padding_mask=pad)
    expected = decoder_ref(decoder, y, to_np(z), to_np(c), words, pad, shared=share_weights)
    assert out.shape == (2, 4, 2 * HIDDEN)
    np.testing.assert_allclose(to_np(out), expected, rtol=1e-4, atol=1e-4)


def test_is_stream_ignores_dictionaries_and_the_cs_memory():
    """The IS stream is a plain post-norm Transformer: it depends neither on
    the dictionaries nor on the encoder's CS output; the CS stream does."""
    encoder, decoder = make_pair()
    x, y, pad, words = inputs(4)
    z0, c0 = (to_np(t) for t in run(encoder, x, padding_mask=pad))
    dictionary = encoder.global_dictionary.dictionary
    dictionary.assign(dictionary * 3.0 + 0.5)
    z1, c1 = (to_np(t) for t in run(encoder, x, padding_mask=pad))
    np.testing.assert_allclose(z1, z0, rtol=1e-6, atol=1e-6)
    assert np.abs(c1 - c0).max() > 1e-3
    out0 = to_np(run(decoder, y, z0, c0, padding_mask=words))
    out1 = to_np(run(decoder, y, z0, c1, padding_mask=words))
    np.testing.assert_allclose(out1[..., :HIDDEN], out0[..., :HIDDEN], rtol=1e-6, atol=1e-6)
    assert np.abs(out1[..., HIDDEN:] - out0[..., HIDDEN:]).max() > 1e-3
    words_dictionary = decoder.global_dictionary.dictionary
    words_dictionary.assign(words_dictionary * 3.0 + 0.5)
    out2 = to_np(run(decoder, y, z0, c1, padding_mask=words))
    np.testing.assert_allclose(out2[..., :HIDDEN], out1[..., :HIDDEN], rtol=1e-6, atol=1e-6)
    assert np.abs(out2[..., HIDDEN:] - out1[..., HIDDEN:]).max() > 1e-3


def test_decoder_is_causal_in_both_streams_and_ignores_padding():
    encoder, decoder = make_pair()
    x, y, pad, _ = inputs(5)
    encode = compiled_on_jax(lambda x: encoder(x, padding_mask=pad))
    decode = compiled_on_jax(lambda y, z, c: decoder(y, z, c, encoder_padding_mask=pad))
    z, c = encode(x)
    out = to_np(decode(y, z, c))
    changed = y.copy()
    changed[:, 2:] = np.random.default_rng(10).normal(size=changed[:, 2:].shape)
    after = to_np(decode(changed, z, c))
    np.testing.assert_allclose(after[:, :2], out[:, :2], rtol=1e-5, atol=1e-5)
    assert np.abs(after[:, 2:] - out[:, 2:]).max() > 1e-3
    # Padded encoder items change nothing in either stream.
    noisy = x.copy()
    noisy[1, 3:] = 100.0
    z2, c2 = (to_np(t) for t in encode(noisy))
    np.testing.assert_allclose(z2[pad], to_np(z)[pad], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c2[pad], to_np(c)[pad], rtol=1e-5, atol=1e-5)
    z2[1, 3:], c2[1, 3:] = -50.0, 50.0
    np.testing.assert_allclose(to_np(decode(y, z2.astype("float32"), c2.astype("float32"))), out,
                               rtol=1e-5, atol=1e-5)


def test_parameter_counts():
    """With shared weights, CATT adds only the dictionaries to a post-norm
    Transformer; without, each stream has its own attention, norms and FFN."""
    encoder, decoder = make_pair()
    mha = keras.layers.MultiHeadAttention(HEADS, HIDDEN // HEADS)
    x, y, _, _ = inputs(6)
    mha(x, x)
    ffn = 2 * HIDDEN * FILTER + FILTER + HIDDEN
    norm_params = 2 * HIDDEN
    encoder_block = mha.count_params() + ffn + 2 * norm_params
    decoder_block = 2 * mha.count_params() + ffn + 3 * norm_params
    assert encoder.count_params() == 2 * encoder_block + K_IMAGE * HIDDEN
    assert decoder.count_params() == 2 * decoder_block + K_WORDS * HIDDEN
    separate, separate_decoder = make_pair(share_weights=False)
    assert separate.count_params() == 4 * encoder_block + K_IMAGE * HIDDEN
    assert separate_decoder.count_params() == 4 * decoder_block + K_WORDS * HIDDEN


def captioner(dtype=None, seed=0, num_layers=2):
    regions = keras.Input((5, HIDDEN))
    region_mask = keras.Input((5,), dtype="bool")
    words = keras.Input((4,), dtype="int32")
    embedded = keras.layers.Embedding(11, HIDDEN, dtype=dtype)(words)
    z, c = CATTEncoder(num_layers, HIDDEN, FILTER, HEADS, dictionary_size=K_IMAGE, dtype=dtype,
                       layer_dropout=0.1, seed=seed)(regions, padding_mask=region_mask)
    features = CATTDecoder(num_layers, HIDDEN, FILTER, HEADS, dictionary_size=K_WORDS, dtype=dtype,
                           seed=seed)(embedded, z, c, encoder_padding_mask=region_mask)
    logits = keras.layers.Dense(11, dtype=dtype)(features)
    return keras.Model([regions, region_mask, words], logits)


def caption_data(seed, n=16):
    rng = np.random.default_rng(seed)
    regions = rng.normal(size=(n, 5, HIDDEN)).astype("float32")
    mask = np.ones((n, 5), bool)
    mask[::2, 4:] = False
    words = rng.integers(1, 11, size=(n, 4)).astype("int32")
    return [regions, mask, words], rng.integers(0, 11, size=(n, 4))


def test_captioner_round_trip(tmp_path):
    model = captioner(seed=3, num_layers=1)
    data, _ = caption_data(7)
    expected = to_np(run(model, data))
    path = tmp_path / "catt_captioner.keras"
    model.save(path)
    np.testing.assert_allclose(to_np(run(keras.models.load_model(path), data)), expected, atol=1e-5)
    for layer in model.layers:
        if isinstance(layer, (CATTEncoder, CATTDecoder)):
            config = layer.get_config()
            assert type(layer).from_config(config).get_config() == config


def test_decoder_fit_with_xla():
    """The decoder stack (CATT self-attention over the word dictionary,
    cross-attention to both encoder streams, FFN) trains under XLA; one
    block, as XLA compile time grows with depth."""
    words = keras.Input((4,), dtype="int32")
    memories = [keras.Input((5, HIDDEN)) for _ in range(2)]
    embedded = keras.layers.Embedding(11, HIDDEN)(words)
    features = CATTDecoder(1, HIDDEN, FILTER, HEADS, dictionary_size=K_WORDS, layer_dropout=0.1,
                           seed=4)(embedded, *memories)
    model = keras.Model([words] + memories, keras.layers.Dense(11)(features))
    model.compile(keras.optimizers.Adam(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
    (regions, _, tokens), labels = caption_data(8)
    history = model.fit([tokens, regions, regions[:, ::-1]], labels, epochs=4, batch_size=16,
                        verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]


def test_mixed_precision():
    model32 = captioner(num_layers=1)
    model16 = captioner(dtype="mixed_float16", num_layers=1)
    model16.set_weights(model32.get_weights())
    data, _ = caption_data(8, n=4)
    out16 = run(model16, data)
    assert keras.backend.standardize_dtype(out16.dtype) == "float16"
    encoder = [layer for layer in model16.layers if isinstance(layer, CATTEncoder)][0]
    variable = encoder.global_dictionary.dictionary
    assert keras.backend.standardize_dtype(variable.dtype) == "float32"
    assert np.isfinite(to_np(out16)).all()
    np.testing.assert_allclose(to_np(out16), to_np(run(model32, data)), atol=5e-2, rtol=5e-2)


def test_blocks_compose_into_the_stacks():
    """Blocks are public: a hand-built stack with the same weights is the same."""
    encoder, _ = make_pair()
    x, _, pad, _ = inputs(9)
    first = CATTEncoderBlock(HIDDEN, FILTER, HEADS)
    second = CATTEncoderBlock(HIDDEN, FILTER, HEADS)
    dictionary = encoder.global_dictionary.dictionary
    z, c = first(x, dictionary, padding_mask=pad)
    second(z, c, padding_mask=pad)
    first.set_weights(encoder.blocks[0].get_weights())
    second.set_weights(encoder.blocks[1].get_weights())
    z, c = second(*first(x, dictionary, padding_mask=pad), padding_mask=pad)
    ez, ec = run(encoder, x, padding_mask=pad)
    np.testing.assert_allclose(to_np(z), to_np(ez), atol=1e-6)
    np.testing.assert_allclose(to_np(c), to_np(ec), atol=1e-6)
    assert CATTDecoderBlock.from_config(CATTDecoderBlock(HIDDEN, FILTER, HEADS).get_config())


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: CATTEncoderBlock(9, FILTER, 2), "divisible"),
        (lambda: CATTEncoderBlock(HIDDEN, 0, 2), "filter_size"),
        (lambda: CATTEncoderBlock(HIDDEN, FILTER, 2, share_weights=None), "share_weights"),
        (lambda: CATTDecoderBlock(HIDDEN, FILTER, 2, layer_dropout=1.0), "layer_dropout"),
        (lambda: CATTEncoder(0, HIDDEN, FILTER, 2), "num_layers"),
        (lambda: CATTEncoder(1, HIDDEN, FILTER, 2, dictionary_size=0), "dictionary_size"),
        (lambda: CATTDecoder(1, HIDDEN, FILTER, 2, concat_outputs="yes"), "concat_outputs"),
        (lambda: CATTEncoder(1, HIDDEN, FILTER, 2)(np.zeros((1, 3, 6), "float32")), "x"),
        (lambda: CATTEncoderBlock(HIDDEN, FILTER, 2)(
            np.zeros((1, 3, HIDDEN), "float32"), np.zeros((4, 6), "float32")), "context"),
    ],
)
def test_bad_arguments_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def copy_shared_weights(source, target):
    """Sets every weight of `target` from the weight of `source` at the same
    path (the twin's weights are a subset of the CATT stack's)."""
    values = weights_by_name(source)
    for weight in target.weights:
        weight.assign(values[weight.path.split("/", 1)[1]].astype("float32"))


def test_the_twin_stacks_equal_the_is_stream_with_the_same_weights():
    """`dictionary_size=None` stacks are the CATT stacks' IS stream alone:
    the same weights (the dictionaries aside) give the same outputs."""
    encoder, decoder = make_pair()
    decoder.concat_outputs = False
    twin_encoder = CATTEncoder(2, HIDDEN, FILTER, HEADS, dictionary_size=None)
    twin_decoder = CATTDecoder(2, HIDDEN, FILTER, HEADS, dictionary_size=None)
    twin_encoder.build((2, 5, HIDDEN))
    twin_decoder.build((2, 4, HIDDEN), (2, 5, HIDDEN))
    assert twin_encoder.count_params() == encoder.count_params() - K_IMAGE * HIDDEN
    assert twin_decoder.count_params() == decoder.count_params() - K_WORDS * HIDDEN
    copy_shared_weights(encoder, twin_encoder)
    copy_shared_weights(decoder, twin_decoder)
    x, y, pad, words = inputs(8)
    z, c = run(encoder, x, padding_mask=pad)
    twin_z, twin_c = run(twin_encoder, x, padding_mask=pad)
    assert twin_c is None
    np.testing.assert_allclose(to_np(twin_z), to_np(z), rtol=1e-5, atol=1e-5)
    is_stream, _ = run(decoder, y, z, c, padding_mask=words, encoder_padding_mask=pad)
    twin_out = run(twin_decoder, y, twin_z, padding_mask=words, encoder_padding_mask=pad)
    np.testing.assert_allclose(to_np(twin_out), to_np(is_stream), rtol=1e-5, atol=1e-5)


def test_the_first_cs_attention_sees_the_dictionary_not_the_sample():
    """In the first block the CS stream of an item depends on its own query
    and the dictionary only: changing the other items (the sample's keys
    and values) leaves it, and not the IS stream, unchanged."""
    encoder, _ = make_pair()
    block = encoder.blocks[0]
    dictionary = to_np(encoder.global_dictionary.dictionary).astype("float32")
    x, _, pad, _ = inputs(9)
    z0, c0 = (to_np(t) for t in run(block, x, dictionary, padding_mask=pad))
    changed = x.copy()
    changed[:, 1:] += np.random.default_rng(1).normal(size=changed[:, 1:].shape)
    z1, c1 = (to_np(t) for t in run(block, changed, dictionary, padding_mask=pad))
    np.testing.assert_allclose(c1[:, 0], c0[:, 0], rtol=1e-5, atol=1e-5)
    assert np.abs(z1[:, 0] - z0[:, 0]).max() > 1e-3
    assert np.abs(c1[:, 1:] - c0[:, 1:]).max() > 1e-3


@pytest.mark.parametrize("share_weights,cs_stream", [(True, True), (False, True), (True, False)])
def test_cached_decoding_equals_the_full_pass(share_weights, cs_stream):
    """Step by step with the caches (IS keys/values, the CS context buffer,
    the projected encoder memories) equals the teacher-forced pass."""
    encoder, decoder = make_pair(share_weights)
    if not cs_stream:
        twin_encoder = CATTEncoder(2, HIDDEN, FILTER, HEADS, dictionary_size=None)
        twin_decoder = CATTDecoder(2, HIDDEN, FILTER, HEADS, dictionary_size=None)
        twin_encoder.build((2, 5, HIDDEN))
        twin_decoder.build((2, 4, HIDDEN), (2, 5, HIDDEN))
        copy_shared_weights(encoder, twin_encoder)
        copy_shared_weights(decoder, twin_decoder)
        encoder, decoder = twin_encoder, twin_decoder
    x, y, pad, _ = inputs(10)
    z, c = encoder(x, padding_mask=pad)
    full = to_np(decoder(y, z, c, encoder_padding_mask=pad))
    cache = decoder.initial_cache(z, c, y.shape[1])
    steps = []
    for t in range(y.shape[1]):
        out, cache = decoder.call_cached(y[:, t:t + 1], cache, ops.convert_to_tensor(t, "int32"),
                                         encoder_padding_mask=pad)
        steps.append(to_np(out)[:, 0])
    np.testing.assert_allclose(np.stack(steps, 1), full, rtol=1e-4, atol=1e-4)


def test_cross_attention_scores_are_distributions_over_the_real_items():
    encoder, decoder = make_pair()
    x, y, pad, _ = inputs(11)
    z, c = encoder(x, padding_mask=pad)
    for layer in (0, -1):
        is_scores, cs_scores = (to_np(s) for s in decoder.cross_attention_scores(
            y, z, c, layer=layer, encoder_padding_mask=pad))
        for scores in (is_scores, cs_scores):
            assert scores.shape == (2, HEADS, 4, 5)
            np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-5)
            assert np.all(scores[1, :, :, 3:] == 0)
        assert not np.allclose(is_scores, cs_scores)
