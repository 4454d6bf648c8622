"""M4C and SA-M4C (models/textvqa/m4c.py) against NumPy references on small cases.

The pointer scores, the attention mask, the loss and the previous-prediction
embeddings are recomputed in NumPy from the model's weights; greedy
decoding (one cached step at a time) is compared with the teacher-forced
pass on its own argmax path; `.keras` files round-trip.
"""

import keras
import numpy as np
import pytest

from keras_structattn.ops.spatial_graph import textvqa_relations_numpy
from models.textvqa.m4c import M4C
from models.textvqa.m4c import answer_text
from models.textvqa.m4c import m4c_attention_mask
from models.textvqa.m4c import m4c_loss

B, LQ, NO, T, S, V = 3, 5, 4, 6, 4, 9


def _boxes(rng, n):
    corner = rng.uniform(0.0, 0.6, (B, n, 2))
    size = rng.uniform(0.05, 0.35, (B, n, 2))
    return np.concatenate([corner, corner + size], -1).astype("float32")


def make_inputs(seed=0, spatial=False):
    rng = np.random.default_rng(seed)
    question = rng.integers(1, 20, (B, LQ)).astype("int32")
    question[1, 3:] = 0
    question[2, 1:] = 0
    inputs = dict(
        question=question,
        objects=rng.normal(size=(B, NO, 7)).astype("float32"),
        object_boxes=_boxes(rng, NO),
        object_mask=np.arange(NO)[None] < np.array([[4], [2], [1]]),
        ocr=rng.normal(size=(B, T, 11)).astype("float32"),
        ocr_boxes=_boxes(rng, T),
        # Row 2 has no OCR token at all: its pointer scores are all padding.
        ocr_mask=np.arange(T)[None] < np.array([[6], [3], [0]]),
    )
    if spatial:
        inputs["relations"] = textvqa_relations_numpy(
            question != 0, inputs["object_boxes"], inputs["object_mask"],
            inputs["ocr_boxes"], inputs["ocr_mask"], S)
    return inputs


def make_model(spatial=False, **kwargs):
    return M4C(20, V, max_ocr=T, num_steps=S, hidden_size=24, num_heads=12, filter_size=32,
               num_text_layers=1, num_layers=1, num_spatial_layers=2 if spatial else 0,
               max_question_length=8, seed=3, **kwargs)


def numpy(x):
    return keras.ops.convert_to_numpy(x)


def teacher_forced_on(model, inputs, indices):
    previous = np.concatenate([np.ones((B, 1), "int32"), indices[:, :-1]], axis=1)
    return numpy(model(dict(inputs, previous=previous), training=False))


@pytest.mark.parametrize("spatial", [False, True], ids=["m4c", "sa_m4c"])
def test_cached_greedy_decoding_equals_teacher_forcing_on_its_path(spatial):
    """Each decoding step runs one position against cached keys and values;
    the full pass fed the decoded path gives the same scores and argmaxes."""
    model = make_model(spatial)
    inputs = make_inputs(1, spatial)
    indices, scores = model.decode(inputs, return_scores=True)
    indices, scores = numpy(indices), numpy(scores)
    full = teacher_forced_on(model, inputs, indices)
    assert not np.isnan(full).any()
    np.testing.assert_allclose(scores, full, atol=2e-4, rtol=2e-4)
    np.testing.assert_array_equal(full.argmax(-1), indices)
    # What `predict` runs: the call without `previous` decodes.
    np.testing.assert_array_equal(numpy(model.predict_on_batch(inputs)), indices)


def _layer_norm(x, layer):
    gamma, beta = (numpy(w) for w in layer.weights)
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + layer.epsilon) * gamma + beta


def test_pointer_scores_match_a_numpy_bilinear_reference():
    model = make_model()
    model.decode(make_inputs())  # builds
    rng = np.random.default_rng(4)
    decoded = rng.normal(size=(B, S, 24)).astype("float32")
    ocr = rng.normal(size=(B, T, 24)).astype("float32")
    mask = make_inputs()["ocr_mask"]
    got = numpy(model._scores(decoded, ocr, mask))
    kernel, bias = (numpy(w) for w in model.classifier.weights)
    wq, bq = (numpy(w) for w in model.pointer_query.weights)
    wk, bk = (numpy(w) for w in model.pointer_key.weights)
    want = np.zeros((B, S, V + T))
    for b in range(B):
        for s in range(S):
            want[b, s, :V] = decoded[b, s] @ kernel + bias
            q = decoded[b, s] @ wq + bq
            for n in range(T):
                k = ocr[b, n] @ wk + bk
                want[b, s, V + n] = q @ k / np.sqrt(24) + (0.0 if mask[b, n] else -10000.0)
    np.testing.assert_allclose(got, want, atol=1e-3, rtol=1e-4)


def test_previous_predictions_embed_tied_rows_and_copied_tokens():
    model = make_model(dropout=0.0)
    inputs = make_inputs()
    model.decode(inputs)
    _, _, ocr_embedding = model.encoder_inputs(inputs, training=False)
    ocr_embedding = numpy(ocr_embedding)
    previous = np.array([[1, 4, V + 2, V], [1, V + 1, 2, 0], [1, 8, 8, 3]], "int32")
    got = numpy(model.embed_previous(previous, ocr_embedding, np.arange(S)))
    answers = _layer_norm(numpy(model.classifier.kernel).T, model.answer_norm)
    copies = _layer_norm(ocr_embedding, model.copy_norm)
    positions = numpy(model.step_positions.embeddings)
    types = numpy(model.step_types.embeddings)
    for b in range(B):
        for s in range(S):
            index = previous[b, s]
            raw = answers[index] if index < V else copies[b, index - V]
            extra = _layer_norm(positions[s] + types[int(index >= V)], model.step_norm)
            np.testing.assert_allclose(got[b, s], raw + extra, atol=1e-4)


def test_attention_mask_matches_the_m4c_rule():
    inputs = make_inputs()
    q_mask = inputs["question"] != 0
    got = numpy(m4c_attention_mask(q_mask, inputs["object_mask"], inputs["ocr_mask"], S))
    valid = np.concatenate([q_mask, inputs["object_mask"], inputs["ocr_mask"]], 1)
    n = valid.shape[1]
    for b in range(B):
        for i in range(n + S):
            for j in range(n + S):
                if j < n:
                    want = valid[b, j]
                else:
                    want = i >= n and j <= i
                assert got[b, i, j] == want, (b, i, j)


def test_loss_is_the_masked_bce_sum_over_unmasked_steps():
    rng = np.random.default_rng(5)
    targets = (rng.random((2, 3, 5)) < 0.3).astype("float32")
    scores = rng.normal(scale=3.0, size=(2, 3, 5)).astype("float32")
    mask = np.array([[1, 1, 0], [1, 0, 0]], "float32")
    p = 1 / (1 + np.exp(-scores.astype(np.float64)))
    bce = -(targets * np.log(p) + (1 - targets) * np.log(1 - p))
    want = (bce * mask[:, :, None]).sum() / mask.sum()
    assert float(numpy(m4c_loss(targets, scores, mask))) == pytest.approx(want, rel=1e-5)
    # No step in the loss: 0, not NaN.
    assert float(numpy(m4c_loss(targets, scores, np.zeros_like(mask)))) == 0.0


def test_a_training_step_reduces_the_loss_and_stays_finite():
    model = make_model(True)
    inputs = make_inputs(2, True)
    rng = np.random.default_rng(2)
    previous = rng.integers(0, V + T, (B, S)).astype("int32")
    targets = (rng.random((B, S, V + T)) < 0.2).astype("float32")
    mask = np.ones((B, S), "float32")
    # Graph mode on TensorFlow (an XLA compile would cost more than the steps).
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  jit_compile=keras.backend.backend() == "jax")
    data = (dict(inputs, previous=previous), targets, mask)
    first = float(model.train_on_batch(*data))
    for _ in range(3):
        last = float(model.train_on_batch(*data))
    assert np.isfinite(first) and last < first


@pytest.mark.parametrize("spatial", [False, True], ids=["m4c", "sa_m4c"])
def test_keras_file_round_trip(spatial, tmp_path):
    model = make_model(spatial)
    inputs = make_inputs(3, spatial)
    previous = np.ones((B, S), "int32")
    want = numpy(model(dict(inputs, previous=previous)))
    path = tmp_path / "m4c.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(numpy(loaded(dict(inputs, previous=previous))), want, atol=1e-5)
    assert loaded.get_config() == model.get_config()


def test_spatial_model_needs_relations():
    model = make_model(True)
    with pytest.raises(ValueError, match="relations"):
        model.decode(make_inputs())


def test_answer_text_stops_at_eos_and_copies_ocr_tokens():
    words = ["<pad>", "<s>", "</s>", "<unk>", "red", "'s"]
    ocr = ["Cafe", "joe"]
    assert answer_text([7, 5, 4, 2, 4], words, ocr) == ("joe's red", [1])
    assert answer_text([2, 4], words, ocr) == ("", [])
    assert answer_text([6, 6, 6], words, ocr) == ("Cafe Cafe Cafe", [0, 0, 0])
    # <pad> (0) and <s> (1) are no words of an answer.
    assert answer_text([1, 4, 0, 6, 2], words, ocr) == ("red Cafe", [0])


@pytest.mark.parametrize("size", ["tiny", "base"])
def test_m4c_6n_is_sa_m4c_with_plain_layers(size):
    """M4C† 6N (Kant et al., 2020, Table 2): the depth, width and trained
    parameters of SA-M4C's 2 plain + 4 spatial layers, all plain."""
    from models import registry

    plain, sa = registry.get(f"m4c_6n_{size}"), registry.get(f"sa_m4c_{size}")
    assert (plain.architecture, plain.num_layers, plain.num_spatial_layers) == ("m4c", 6, 0)
    assert (sa.architecture, sa.num_layers, sa.num_spatial_layers) == ("sa_m4c", 2, 4)
    ignore = {"architecture", "num_layers", "num_spatial_layers"}
    assert {k: v for k, v in plain.values().items() if k not in ignore} == {
        k: v for k, v in sa.values().items() if k not in ignore}
    assert registry.get(f"m4c_{size}").num_layers == 4  # M4C's own depth (Hu et al.)
    if size == "tiny":  # same parameter count, built
        counts = []
        for spatial in (False, True):
            model = M4C(20, V, max_ocr=T, num_steps=S, hidden_size=plain.hidden_size,
                        num_heads=12, filter_size=plain.filter_size, num_text_layers=1,
                        num_layers=2 if spatial else 6, num_spatial_layers=4 if spatial else 0,
                        max_question_length=8, seed=3)
            model(dict(make_inputs(spatial=spatial), previous=np.ones((B, S), "int32")))
            counts.append(model.count_params())
        assert counts[0] == counts[1]
