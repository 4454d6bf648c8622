"""The Up-Down captioner and BUTD+CATT (models/captioning/updown.py): the teacher-forced
pass against a NumPy reference of Anderson et al. (2018, arXiv:1707.07998,
Eq. 2-7) and of CATT's CS branch (arXiv:2103.03493, supplementary), cached
decoding equal to it, `[B, K, T]` captions, masking, the K-means dictionary
protocol, decoding and sampling, serialisation and the hparams sets."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.decoding.seq2seq import compiled_generate
from keras_structattn.decoding.seq2seq import generate
from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.training.dictionaries import fit_dictionaries
from keras_structattn.training.schedules import WarmupRsqrtDecay
from keras_structattn.training.self_critical import sample_captions
from models import registry
from models.captioning.updown import UpDownCaptioner

VOCAB = 11
HIDDEN = 16
REGIONS = 5
CHANNELS = 6
LENGTH = 6
GRID = (2, 3)
DICTIONARY = 7


def tiny(**changes):
    values = dict(vocab_size=VOCAB, hidden_size=HIDDEN, attention_size=8, dropout=0.0, seed=4)
    values.update(changes)
    return UpDownCaptioner(**values)


def region_features(rng, real=(3, 5)):
    """Two images; image i has its first `real[i]` regions unmasked (the
    padding ones random, not zeros)."""
    b = len(real)
    return {
        "features": rng.normal(size=(b, REGIONS, CHANNELS)).astype("float32"),
        "boxes": rng.uniform(size=(b, REGIONS, 4)).astype("float32"),
        "mask": np.arange(REGIONS)[None, :] < np.asarray(real)[:, None],
    }


def grid_features(rng, b=2):
    return rng.normal(size=(b, *GRID, CHANNELS)).astype("float32")


def captions(rng, b=2):
    ids = rng.integers(2, VOCAB, size=(b, LENGTH)).astype("int32")
    ids[:, 0] = 0  # the start symbol
    return ids


def numpy(x):
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")), "float64")


CASES = {
    "butd_regions": (dict(), region_features),
    "catt_regions": (dict(dictionary_size=DICTIONARY), region_features),
    "catt_own_scorer_grid": (
        dict(dictionary_size=DICTIONARY, share_scorer=False, encoder_input="grid",
             grid_height=GRID[0], grid_width=GRID[1]),
        grid_features,
    ),
}


def make_case(name, seed=0):
    changes, make_features = CASES[name]
    model = tiny(**changes)
    rng = np.random.default_rng(seed)
    features, decoder_inputs = make_features(rng), captions(rng)
    model((features, decoder_inputs))
    if model.is_catt:  # distinct entries, so the CS weights are far from uniform
        model.global_dictionaries()["visual"].set_centers(
            rng.normal(size=(DICTIONARY, HIDDEN))
        )
    return model, features, decoder_inputs


# ------------------------------------------------------- NumPy reference


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def dense(layer, x):
    y = x @ numpy(layer.kernel)
    return y + numpy(layer.bias) if layer.use_bias else y


def lstm(cell, x, h, c):
    """Keras' LSTMCell: gates i, f, c, o of `x W + h U + b`."""
    z = x @ numpy(cell.kernel) + h @ numpy(cell.recurrent_kernel) + numpy(cell.bias)
    i, f, g, o = np.split(z, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def additive(scorer, h, values, mask=None):
    """Eq. 3-5: `w^T tanh(W_v v_i + W_h h)`, softmax over the allowed
    entries (none allowed: zeros), the weighted sum of the values."""
    projected = dense(scorer.value_projection, values)  # [B, N, a] or [N, a]
    hidden = np.tanh(projected + dense(scorer.query_projection, h)[:, None, :])
    logits = dense(scorer.score, hidden)[..., 0]  # [B, N]
    if mask is None:
        mask = np.ones_like(logits, bool)
    logits = np.where(mask, logits, -np.inf)
    top = np.max(np.where(mask, logits, 0.0), axis=-1, keepdims=True)
    weights = np.where(mask, np.exp(logits - top), 0.0)
    weights /= np.maximum(weights.sum(-1, keepdims=True), 1e-30)
    if values.ndim == 2:
        return weights @ values, weights
    return np.einsum("bn,bnd->bd", weights, values), weights


def reference(model, features, ids):
    """Teacher-forced logits and attention weights, written out from the
    weights (self-critical.pytorch's TopDownCore; BUTD+CATT's [IS; CS; h1])."""
    if isinstance(features, dict):
        f, mask = features["features"], features["mask"]
    else:
        f = features.reshape(len(features), -1, features.shape[-1])
        mask = np.ones(f.shape[:2], bool)
    v = np.maximum(dense(model.feature_embedding, f.astype("float64")), 0.0) * mask[..., None]
    mean = v.sum(1) / np.maximum(mask.sum(1, keepdims=True), 1)
    words = numpy(model.target_embedding.embeddings)[ids] * (ids != 0)[..., None]
    zeros = np.zeros((len(ids), HIDDEN))
    h1, c1, h2, c2 = zeros, zeros, zeros, zeros
    logits, is_weights, cs_weights = [], [], []
    for t in range(ids.shape[1]):
        h1, c1 = lstm(model.attention_lstm, np.concatenate([h2, mean, words[:, t]], -1), h1, c1)
        if model.is_catt:
            layer = model.attention
            context, weights = additive(layer.attention, h1, v, mask)
            entries = numpy(layer.global_dictionary.dictionary)
            cs_scorer = layer.cs_attention or layer.attention
            cs_context, cs = additive(cs_scorer, h1, entries)
            x = np.concatenate([context, cs_context, h1], -1)
            cs_weights.append(cs)
        else:
            context, weights = additive(model.attention, h1, v, mask)
            x = np.concatenate([context, h1], -1)
        h2, c2 = lstm(model.language_lstm, x, h2, c2)
        logits.append(h2 @ numpy(model.output_projection.kernel))
        is_weights.append(weights)
    cs = np.stack(cs_weights, 1) if cs_weights else None
    return np.stack(logits, 1), np.stack(is_weights, 1), cs


@pytest.mark.parametrize("name", list(CASES))
def test_teacher_forcing_equals_the_numpy_reference(name):
    model, features, decoder_inputs = make_case(name)
    logits, is_weights, cs_weights = reference(model, features, decoder_inputs)
    np.testing.assert_allclose(
        numpy(model((features, decoder_inputs))), logits, rtol=1e-4, atol=1e-5
    )
    got_is, got_cs = model.attention_weights(features, decoder_inputs)
    np.testing.assert_allclose(numpy(got_is), is_weights, atol=1e-5)
    if model.is_catt:
        np.testing.assert_allclose(numpy(got_cs), cs_weights, atol=1e-5)
        assert cs_weights.std() > 1e-3  # the check is not of uniform weights
    else:
        assert got_cs is None
    if isinstance(features, dict):  # padding regions get no weight
        assert np.all(numpy(got_is)[0, :, 3:] == 0)


# ------------------------------------------------------------- decoding


def step_by_step(model, features, decoder_inputs):
    encoded, mask = model.encode(features)
    cache = model.initial_cache(encoded, mask, decoder_inputs.shape[1])
    out = []
    for t in range(decoder_inputs.shape[1]):
        logits, cache = model.decode_step(
            decoder_inputs[:, t : t + 1], cache, ops.convert_to_tensor(t)
        )
        out.append(numpy(logits))
    return np.stack(out, axis=1)


@pytest.mark.parametrize("name", list(CASES))
def test_decode_step_equals_teacher_forcing(name):
    model, features, decoder_inputs = make_case(name, seed=1)
    np.testing.assert_allclose(
        step_by_step(model, features, decoder_inputs),
        numpy(model((features, decoder_inputs))),
        atol=1e-5,
    )


def test_captions_per_image_equal_repeated_images():
    model, features, _ = make_case("catt_regions", seed=2)
    rng = np.random.default_rng(2)
    ids = np.stack([captions(rng) for _ in range(3)], axis=1)  # [B, K=3, T]
    got = numpy(model((features, ids)))
    assert got.shape == (2, 3, LENGTH, VOCAB)
    repeated = {key: np.repeat(value, 3, axis=0) for key, value in features.items()}
    flat = numpy(model((repeated, ids.reshape(-1, LENGTH))))
    np.testing.assert_allclose(got.reshape(flat.shape), flat, atol=1e-5)


def test_catt_is_weights_equal_butd_with_the_same_weights():
    """CATT adds the CS branch beside IS-ATT: with the attention LSTM, the
    features and the scorer copied, the first word's IS weights are plain
    BUTD's (later words differ: the language LSTMs read different inputs)."""
    catt, features, decoder_inputs = make_case("catt_regions", seed=3)
    butd = tiny()
    butd((features, decoder_inputs))
    pairs = [
        (butd.target_embedding, catt.target_embedding),
        (butd.feature_embedding, catt.feature_embedding),
        (butd.attention_lstm, catt.attention_lstm),
        (butd.attention, catt.attention.attention),
    ]
    for mine, theirs in pairs:
        mine.set_weights(theirs.get_weights())
    got = numpy(catt.attention_weights(features, decoder_inputs)[0])
    expected = numpy(butd.attention_weights(features, decoder_inputs)[0])
    np.testing.assert_allclose(got[:, 0], expected[:, 0], atol=1e-6)
    assert not np.allclose(got[:, 1:], expected[:, 1:], atol=1e-4)


def test_an_image_with_every_region_masked_gives_no_nan():
    model, features, decoder_inputs = make_case("catt_regions", seed=4)
    features = dict(features, mask=np.zeros((2, REGIONS), bool))
    features["features"][0, 0] = np.nan  # masked: must not leak
    logits = numpy(model((features, decoder_inputs)))
    assert np.all(np.isfinite(logits))
    is_weights, cs_weights = model.attention_weights(features, decoder_inputs)
    assert np.all(numpy(is_weights) == 0)
    np.testing.assert_allclose(numpy(cs_weights).sum(-1), 1.0, atol=1e-5)


def argmax_loop(model, features, length):
    encoded, mask = model.encode(features)
    cache = model.initial_cache(encoded, mask, length)
    ids = np.zeros((len(features["mask"]), 1), "int32")
    out = []
    for t in range(length):
        logits, cache = model.decode_step(ids, cache, ops.convert_to_tensor(t))
        ids = numpy(logits).argmax(-1).astype("int32")[:, None]
        out.append(ids[:, 0])
    out = np.stack(out, 1)
    for row in out:  # zeros after the first EOS, as the decoders return
        ends = np.flatnonzero(row == EOS_ID)
        if ends.size:
            row[ends[0] + 1 :] = 0
    return out


def test_generate_and_sample():
    model, features, _ = make_case("catt_regions", seed=5)
    expected = argmax_loop(model, features, 5)
    ids, _ = compiled_generate(model, max_decode_length=5, beam_size=1)(features)
    np.testing.assert_array_equal(ops.convert_to_numpy(ids), expected)
    ids, scores = generate(model, features, max_decode_length=5, beam_size=3)
    assert ops.convert_to_numpy(ids).shape == (2, 5)
    assert np.all(np.isfinite(numpy(scores)))
    uniforms = np.random.default_rng(5).uniform(size=(6, 5)).astype("float32")
    sampled = ops.convert_to_numpy(sample_captions(model, features, uniforms, 3))
    assert sampled.shape == (6, 5) and sampled.min() >= 0 and sampled.max() < VOCAB


# ------------------------------------------------------ the dictionary


def test_fit_dictionaries_clusters_the_real_region_vectors():
    model, _, _ = make_case("catt_regions", seed=6)
    butd = tiny()
    assert butd.global_dictionaries() == {}
    rng = np.random.default_rng(6)
    batches = [(region_features(rng, real=(2, 4)), captions(rng)) for _ in range(3)]
    rows = np.concatenate([
        np.maximum(dense(model.feature_embedding, f["features"]), 0.0)[f["mask"]]
        for f, _ in batches
    ])
    np.testing.assert_allclose(
        model.dictionary_samples(batches[0])["visual"], rows[:6], rtol=1e-5, atol=1e-6
    )

    def inertia(centres):
        distances = ((rows[:, None, :] - centres[None]) ** 2).sum(-1)
        return distances.min(1).sum()

    dictionary = model.global_dictionaries()["visual"]
    dictionary.set_centers(np.random.default_rng(0).uniform(0, 0.01, (DICTIONARY, HIDDEN)))
    before = inertia(numpy(dictionary.dictionary))
    report = fit_dictionaries(model, batches, seed=0)
    assert report["visual"]["rows"] == len(rows) == 18
    after = inertia(numpy(dictionary.dictionary))
    np.testing.assert_allclose(report["visual"]["inertia"], after, rtol=1e-4)
    assert after < 0.5 * before


# ---------------------------------------------- saving, hparams, errors


def test_keras_round_trip(tmp_path):
    model, features, decoder_inputs = make_case("catt_own_scorer_grid", seed=7)
    expected = numpy(model((features, decoder_inputs)))
    path = str(tmp_path / "updown.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(numpy(loaded((features, decoder_inputs))), expected, atol=1e-6)
    assert loaded.get_config() == model.get_config()
    rebuilt = UpDownCaptioner.from_config(model.get_config())
    assert rebuilt.get_config() == model.get_config()


def test_registered_sets():
    base = registry.get("updown_base")
    assert base.model_type == "updown_captioner"
    assert (base.hidden_size, base.attention_size, base.dropout, base.dictionary_size) == (
        1000, 512, 0.5, 0
    )
    # The recipe's schedule peaks at self-critical.pytorch's 5e-4.
    schedule = WarmupRsqrtDecay(
        base.learning_rate_constant, base.learning_rate_warmup_steps, base.hidden_size
    )
    np.testing.assert_allclose(
        float(schedule(base.learning_rate_warmup_steps - 1)), 5e-4, rtol=1e-6
    )
    assert registry.get("updown_catt_base").dictionary_size == 1000
    tiny_set = registry.get("updown_catt_tiny")
    # K scaled to Shapes world (48 kinds of shape), not COCO's 1000.
    assert (tiny_set.hidden_size, tiny_set.dictionary_size) == (128, 64)
    assert registry.get("updown_tiny").dictionary_size == 0
    model = UpDownCaptioner.from_hparams(tiny_set, vocab_size=VOCAB)
    assert model.is_catt and model.hidden_size == 128


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="encoder_input"):
        tiny(encoder_input="pixels")
    with pytest.raises(ValueError, match="dictionary_size"):
        tiny(dictionary_size=-1)
    with pytest.raises(ValueError, match="dropout"):
        tiny(dropout=1.0)
    with pytest.raises(ValueError, match="built"):
        tiny(dictionary_size=3).global_dictionaries()
    model = tiny(encoder_input="grid", grid_height=GRID[0], grid_width=GRID[1])
    rng = np.random.default_rng(8)
    with pytest.raises(ValueError, match="grid_height"):
        model.encode(rng.normal(size=(1, 3, 3, CHANNELS)).astype("float32"))
    with pytest.raises(ValueError, match="keys"):
        tiny().encode({"features": np.zeros((1, 2, 3), "float32")})
