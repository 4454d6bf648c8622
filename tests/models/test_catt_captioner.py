"""The Transformer+CATT captioner and its twin (models/captioning/catt_captioner.py).

The stacks themselves are checked against a NumPy reference in
tests/layers/test_catt_transformer.py; here: the model's wiring (the twin
is the CATT model's IS stream, the predictor reads `[Z^; X^]`), cached
decoding equal to teacher forcing, `[B, K, T]` captions, the K-means
dictionary protocol, decoding, masking and serialisation.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.decoding.seq2seq import generate
from keras_structattn.ops.kmeans import inertia
from keras_structattn.training.dictionaries import fit_dictionaries
from models import registry
from models.captioning.catt_captioner import CATTCaptioner
from tests._backend import compiled_on_jax

VOCAB, HIDDEN, REGIONS, CHANNELS, LENGTH, K = 11, 16, 5, 6, 6, 7


def tiny(**changes):
    values = dict(vocab_size=VOCAB, hidden_size=HIDDEN, filter_size=24, num_hidden_layers=2,
                  num_heads=2, dictionary_size=K, seed=3)
    values.update(changes)
    return CATTCaptioner(**values)


def data(seed=0, real=(3, 5)):
    rng = np.random.default_rng(seed)
    features = {
        "features": rng.normal(size=(2, REGIONS, CHANNELS)).astype("float32"),
        "boxes": np.sort(rng.uniform(size=(2, REGIONS, 4)), -1).astype("float32"),
        "mask": np.arange(REGIONS)[None, :] < np.asarray(real)[:, None],
    }
    ids = rng.integers(2, VOCAB, size=(2, LENGTH)).astype("int32")
    ids[:, 0] = 0
    return features, ids


def numpy(x):
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")), "float64")


def built(model, seed=0):
    features, ids = data(seed)
    model((features, ids))
    return model, features, ids


def compiled_step(model):
    """`model.decode_step`, one jit compile on JAX for every position."""
    return compiled_on_jax(lambda ids, cache, index: model.decode_step(ids, cache, index))


@pytest.mark.parametrize("dictionary_size", [K, 0])
def test_decode_step_equals_teacher_forcing(dictionary_size):
    model, features, ids = built(tiny(dictionary_size=dictionary_size))
    full = numpy(model((features, ids)))
    encoded, mask = model.encode(features)
    cache = model.initial_cache(encoded, mask, LENGTH)
    step = compiled_step(model)
    steps = []
    for t in range(LENGTH):
        logits, cache = step(ids[:, t:t + 1], cache, ops.convert_to_tensor(t, "int32"))
        steps.append(numpy(logits))
    np.testing.assert_allclose(np.stack(steps, 1), full, rtol=1e-4, atol=1e-4)


def test_the_twin_is_the_is_stream_of_the_catt_model():
    """With the CATT model's weights (dictionaries aside) and the IS half of
    its predictor, the twin gives the CATT model's logits when the CS half
    of the predictor is zero: the IS stream alone is the twin."""
    catt, features, ids = built(tiny())
    twin, _, _ = built(tiny(dictionary_size=0))
    kernel = numpy(catt.output_projection.kernel)
    assert kernel.shape == (2 * HIDDEN, VOCAB)
    catt.output_projection.kernel.assign(np.concatenate(
        [kernel[:HIDDEN], np.zeros_like(kernel[HIDDEN:])]).astype("float32"))
    values = {w.path.split("/", 1)[1]: w for w in catt.weights}
    for weight in twin.weights:
        source = values[weight.path.split("/", 1)[1]]
        value = numpy(source)[:HIDDEN] if "output_projection" in weight.path else numpy(source)
        weight.assign(value.astype("float32"))
    assert twin.count_params() == catt.count_params() - 2 * K * HIDDEN - HIDDEN * VOCAB
    np.testing.assert_allclose(numpy(twin((features, ids))), numpy(catt((features, ids))),
                               rtol=1e-5, atol=1e-5)
    # ... and the CS half of the predictor is what the dictionaries reach.
    catt.output_projection.kernel.assign(kernel.astype("float32"))
    before = numpy(catt((features, ids)))
    words = catt.global_dictionaries()["words"].dictionary
    words.assign(words * 5.0 + 1.0)
    assert np.abs(numpy(catt((features, ids))) - before).max() > 1e-4


def test_captions_per_image_equal_repeated_images():
    model, features, ids = built(tiny())
    per_image = np.stack([ids, ids[::-1]], 1)  # [B, 2, T]
    logits = numpy(model((features, per_image)))
    repeated = {k: np.repeat(v, 2, axis=0) for k, v in features.items()}
    flat = numpy(model((repeated, per_image.reshape(4, LENGTH))))
    np.testing.assert_allclose(logits.reshape(4, LENGTH, VOCAB), flat, rtol=1e-5, atol=1e-5)


def test_padding_regions_and_an_empty_image():
    model, features, ids = built(tiny())
    before = numpy(model((features, ids)))
    noisy = dict(features, features=features["features"].copy())
    noisy["features"][0, 3:] = 1e4  # padding regions of image 0
    np.testing.assert_allclose(numpy(model((noisy, ids))), before, rtol=1e-5, atol=1e-5)
    empty = dict(features, mask=np.zeros_like(features["mask"]))
    assert np.all(np.isfinite(numpy(model((empty, ids)))))


def test_fit_dictionaries_clusters_what_the_first_blocks_see():
    model, features, ids = built(tiny())
    samples = model.dictionary_samples((features, ids))
    # Image: the embedded real regions; words: start token + words, no padding.
    assert samples["image"].shape == (int(features["mask"].sum()), HIDDEN)
    assert samples["words"].shape == (2 * LENGTH, HIDDEN)
    embedded, mask = model.embed_image(features)
    np.testing.assert_allclose(samples["image"], numpy(embedded)[numpy(mask) > 0], atol=1e-6)
    dictionaries = model.global_dictionaries()
    uniform = {name: inertia(samples[name], numpy(d.dictionary))
               for name, d in dictionaries.items()}
    report = fit_dictionaries(model, [(features, ids)], seed=0)
    for name, layer in dictionaries.items():
        assert report[name]["rows"] == len(samples[name])
        assert inertia(samples[name], numpy(layer.dictionary)) < 0.5 * uniform[name]
        # Usage by a loop: each row's nearest centre; one batch, so the same per batch.
        centers = numpy(layer.dictionary).astype(np.float64)
        nearest = {int(np.argmin([((row - c) ** 2).sum() for c in centers]))
                   for row in samples[name].astype(np.float64)}
        assert report[name]["entries_used"] == len(nearest)
        assert report[name]["entries_used_per_batch"] == len(nearest)
        distinct = {tuple(np.round(row, 5)) for row in samples[name]}
        assert report[name]["distinct_rows"] == len(distinct)
    assert fit_dictionaries(model, [(features, ids)], init="uniform") == {}
    with pytest.raises(ValueError, match="only 8 vectors"):
        fit_dictionaries(built(tiny(dictionary_size=20))[0], [(features, ids)])


def test_generate_greedy_equals_an_argmax_loop():
    """Greedy search equals an argmax loop over `decode_step` (which equals
    the teacher-forced pass: `test_decode_step_equals_teacher_forcing`)."""
    model, features, _ = built(tiny(), seed=2)
    ids, _ = generate(model, features, max_decode_length=4, beam_size=1)
    encoded, mask = model.encode(features)
    cache = model.initial_cache(encoded, mask, 4)
    step = compiled_step(model)
    expected, previous = [], np.zeros((2, 1), "int32")
    for t in range(4):
        logits, cache = step(previous, cache, ops.convert_to_tensor(t, "int32"))
        previous = numpy(logits).argmax(-1)[:, None].astype("int32")
        expected.append(previous[:, 0])
    expected = np.stack(expected, 1)
    for row in expected:  # generate stops at EOS (1) and pads with 0 after it
        ends = np.flatnonzero(row == 1)
        if len(ends):
            row[ends[0] + 1:] = 0
    np.testing.assert_array_equal(ops.convert_to_numpy(ids), expected)
    beams, scores = generate(model, features, max_decode_length=4, beam_size=3)
    assert ops.convert_to_numpy(beams).shape == (2, 4)
    assert np.all(np.isfinite(numpy(scores)))


def test_encdec_attention_of_both_streams():
    model, features, ids = built(tiny())
    is_w, cs_w = (numpy(w) for w in model.encdec_attention(features, ids, layer=0))
    for weights in (is_w, cs_w):
        assert weights.shape == (2, 2, LENGTH, REGIONS)
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
        assert np.all(weights[0, :, :, 3:] == 0)
    twin, _, _ = built(tiny(dictionary_size=0))
    assert twin.encdec_attention(features, ids)[1] is None


def test_keras_round_trip(tmp_path):
    model, features, ids = built(tiny(share_weights=False))
    expected = numpy(model((features, ids)))
    path = tmp_path / "catt_captioner.keras"
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_allclose(numpy(restored((features, ids))), expected, atol=1e-5)
    config = model.get_config()
    assert CATTCaptioner.from_config(config).get_config() == config


def test_sets_and_arguments():
    base = registry.get("catt_captioner_base")
    assert (base.num_hidden_layers, base.hidden_size, base.num_heads, base.dictionary_size) == (
        6, 512, 8, 500)
    assert registry.get("transformer_captioner_tiny").dictionary_size == 0
    # K scaled to Shapes world (48 kinds of shape, 40-140 words), not COCO's 500.
    assert registry.get("catt_captioner_tiny").dictionary_size == 64
    model = CATTCaptioner.from_hparams(registry.get("catt_captioner_tiny"), VOCAB)
    assert model.predictor_width == 2 * model.hidden_size
    with pytest.raises(ValueError, match="dictionary_size"):
        tiny(dictionary_size=-1)
    with pytest.raises(ValueError, match="encoder_input"):
        tiny(encoder_input="pixels")
