"""Transformer+CATT VQA (`models.vqa.catt_vqa`): its wiring, against its twin and NumPy."""

import keras
import numpy as np
import pytest

from keras_structattn.training import dictionaries
from models import registry
from models.vqa import build as vqa_models
from models.vqa.catt_vqa import CATTVQA

SIZES = dict(hidden_size=16, num_heads=2, filter_size=32, num_language_layers=1,
             num_vision_layers=2, num_cross_layers=2, word_dim=16, max_question_length=6)
VOCAB, ANSWERS, K = 20, 5, 8


def inputs(seed=0, batch=2):
    rng = np.random.default_rng(seed)
    question = rng.integers(1, VOCAB, (batch, 6)).astype("int32")
    question[0, 4:] = 0
    mask = np.ones((batch, 5), bool)
    mask[1, 3:] = False
    corner = rng.uniform(0, 0.5, (batch, 5, 2))
    return {"question": question, "regions": rng.normal(size=(batch, 5, 7)).astype("float32"),
            "boxes": np.concatenate([corner, corner + 0.3], -1).astype("float32"),
            "region_mask": mask}


def model(dictionary_size=K, **changes):
    keras.utils.set_random_seed(1)
    built = CATTVQA(VOCAB, ANSWERS, dictionary_size=dictionary_size, seed=3,
                    **dict(SIZES, **changes))
    built(inputs())
    return built


def numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x), np.float64)


def relative_paths(built):
    """`{path without the model's name: variable}`."""
    prefix = built.name + "/"
    return {v.path[len(prefix):] if v.path.startswith(prefix) else v.path: v
            for v in built.weights}


def test_twin_has_the_is_weights_and_equals_the_is_stream():
    """The twin (dictionary_size=0) is the CATT model without dictionaries
    and fusion Linear; with the CATT model's weights its streams are the CATT
    model's IS streams and its logits the CATT head on the IS stream."""
    catt, twin = model(), model(dictionary_size=0)
    weights, twin_weights = relative_paths(catt), relative_paths(twin)
    assert len(weights) == len(catt.weights)
    assert set(weights) - set(twin_weights) == {
        "language_dictionary/dictionary", "vision_dictionary/dictionary",
        "language_fusion/kernel", "language_fusion/bias"}
    assert set(twin_weights) <= set(weights)
    for path, variable in twin_weights.items():
        variable.assign(weights[path])
    x = inputs(1)
    ours, theirs = catt.streams(x), twin.streams(x)
    for name in ("language", "vision"):
        np.testing.assert_allclose(numpy(theirs[name]), numpy(ours[name]), atol=1e-5)
    assert set(theirs) == {"language", "vision"}
    pooled = catt.pooler(ours["language"][:, 0])
    head = numpy(catt.classifier(catt.head_norm(catt.head_hidden(pooled))))
    np.testing.assert_allclose(numpy(twin(x)), head, atol=1e-5)
    assert np.abs(numpy(catt(x)) - head).max() > 1e-4  # CATT's logits read [L; L_C]


def test_cs_stream_reads_the_dictionary_and_the_is_stream_does_not():
    catt = model()
    x = inputs(2)
    before = catt.streams(x)
    for layer in catt.global_dictionaries().values():
        layer.set_centers(np.random.default_rng(5).normal(size=(K, 16)))
    after = catt.streams(x)
    for name in ("language", "vision"):
        np.testing.assert_allclose(numpy(after[name]), numpy(before[name]), atol=1e-6)
        assert np.abs(numpy(after[name + "_cs"]) - numpy(before[name + "_cs"])).max() > 1e-3


def test_first_layer_cs_attention_is_a_softmax_over_the_dictionary_alone():
    """NumPy: softmax_k((W_q x_t + b_q) . (W_k D_k + b_k) / sqrt(d_h)) per
    head, from each word's embedding and the dictionary only: the sample's
    other words are not keys of CS-ATT."""
    catt = model()
    catt.language_dictionary.set_centers(np.random.default_rng(6).normal(size=(K, 16)))
    x = inputs(3)
    scores = catt.attention_maps(x)["language_dictionary_scores"]  # [B, h, T+1, K]
    words = numpy(catt.embed(x)[0])
    attention = catt.language_blocks[0].self_attention
    q_kernel, q_bias = (numpy(v) for v in attention._query_dense.weights)
    k_kernel, k_bias = (numpy(v) for v in attention._key_dense.weights)
    d = numpy(catt.language_dictionary.dictionary)
    query = np.einsum("btd,dhk->bthk", words, q_kernel) + q_bias
    key = np.einsum("nd,dhk->nhk", d, k_kernel) + k_bias
    logits = np.einsum("bthk,nhk->bhtn", query, key) / np.sqrt(q_kernel.shape[-1])
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    maps = catt.attention_maps(x)
    np.testing.assert_allclose(maps["language_dictionary_weights"],
                               expected.mean(1)[:, 0], atol=1e-5)
    assert maps["region_weights"].shape == maps["cs_region_weights"].shape == (2, 5)
    np.testing.assert_allclose(maps["region_weights"][1, 3:], 0.0)  # padded regions


def test_dictionary_samples_are_the_real_embedded_words_and_regions():
    catt = model()
    x = inputs(4)
    samples = catt.dictionary_samples(x)
    words, word_mask, objects, region_mask = (numpy(t) for t in catt.embed(x))
    real_words = 2 + int((x["question"] != 0).sum())  # + [CLS] per question
    assert samples["language"].shape == (real_words, 16)
    assert samples["vision"].shape == (int(x["region_mask"].sum()), 16)
    np.testing.assert_allclose(samples["vision"], objects[x["region_mask"]], atol=1e-6)
    np.testing.assert_allclose(samples["language"][0], words[0, 0], atol=1e-6)
    report = dictionaries.fit_dictionaries(catt, [inputs(s, 4) for s in range(3)], seed=0)
    assert set(report) == {"language", "vision"}
    assert dictionaries.fit_dictionaries(model(dictionary_size=0), [x]) == {}


def test_keras_round_trip_jit_and_a_fully_masked_image(tmp_path):
    catt = model()
    x = inputs(5)
    path = str(tmp_path / "catt.keras")
    catt.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(numpy(loaded(x)), numpy(catt(x)), atol=1e-6)
    catt.compile(jit_compile=True)
    np.testing.assert_allclose(numpy(catt.predict_on_batch(x)), numpy(catt(x)), atol=1e-4)
    empty = dict(x, region_mask=np.zeros_like(x["region_mask"]))
    assert np.isfinite(numpy(catt(empty))).all()
    assert np.isfinite(numpy(catt.attention_maps(empty)["region_weights"])).all()


def test_sets_and_dispatch():
    import models.vqa.catt_vqa  # noqa: F401

    tiny = registry.get("catt_vqa_tiny")
    # K scaled to Shapes world (the paper's 500 outnumbers its distinct word vectors).
    assert tiny.dictionary_size == 64 and tiny.hidden_size == 128
    assert registry.get("catt_vqa_tiny_nocatt").dictionary_size == 0
    assert registry.get("catt_vqa_small").values() == dict(
        registry.get("catt_vqa_small_nocatt").values(), dictionary_size=500)
    built = vqa_models.build_vqa_model(tiny.override(**SIZES), VOCAB, ANSWERS)
    assert isinstance(built, CATTVQA) and built.dictionary_size == 64
    with pytest.raises(ValueError, match="dictionary_size"):
        CATTVQA(VOCAB, ANSWERS, dictionary_size=-1)
