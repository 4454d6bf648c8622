"""Tests of the MCAN and MCAN+PA VQA models (`models/vqa/mcan.py`).

Mask invariance of the logits (padded words and regions, whatever they
hold, change nothing); the `.keras` round trip of `mcan_tiny` and
`mcan_pa_tiny`; a short `fit` on a learnable toy task lowers the loss;
training compiled by XLA on JAX; the hparams sets and the dispatcher.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.training.losses import SoftTargetBinaryCrossEntropy
from models import registry
from models.vqa.build import build_vqa_model
from models.vqa.mcan import MCAN
from tests._backend import compiled_on_jax
from tests.ops.test_box_geometry import random_boxes

VOCAB, ANSWERS, T, N, C = 11, 5, 6, 7, 12


def tiny(architecture, **changes):
    name = "mcan_pa_tiny" if architecture == "mcan_pa" else "mcan_tiny"
    small = dict(hidden_size=16, num_heads=2, filter_size=32, word_dim=8, flat_mlp_size=8,
                 flat_output_size=16, num_encoder_layers=1, num_decoder_layers=1,
                 pa_geometry_dim=16)
    small.update(changes)
    return registry.get(name).override(**small)


def batch(seed, size=3):
    rng = np.random.default_rng(seed)
    question = rng.integers(1, VOCAB, size=(size, T)).astype("int32")
    lengths = rng.integers(2, T + 1, size=size)
    lengths[0] = 3
    for b, length in enumerate(lengths):
        question[b, length:] = 0
    region_mask = np.ones((size, N), bool)
    region_mask[0, 4:] = False
    boxes = random_boxes(rng, (size, N))
    boxes[~region_mask] = 0.0
    regions = rng.normal(size=(size, N, C)).astype("float32")
    regions[~region_mask] = 0.0
    return dict(question=question, regions=regions, boxes=boxes, region_mask=region_mask)


def logits_of(model, inputs):
    # One jit compile per model on JAX instead of every op eagerly (the
    # weights are made outside it).
    if not model.built:
        model.build({key: value.shape for key, value in inputs.items()})
    if not hasattr(model, "_test_forward"):
        model._test_forward = compiled_on_jax(lambda x: model(x, training=False))
    forward = model._test_forward
    return np.asarray(ops.convert_to_numpy(forward(inputs)))


@pytest.mark.parametrize("architecture", ["mcan", "mcan_pa"])
def test_padding_changes_nothing(architecture):
    model = build_vqa_model(tiny(architecture), VOCAB, ANSWERS, seed=0)
    inputs = batch(1)
    logits = logits_of(model, inputs)
    assert logits.shape == (3, ANSWERS) and logits.dtype == np.float32
    assert np.isfinite(logits).all()
    changed = {key: value.copy() for key, value in inputs.items()}
    # Padded regions: other features and other (valid) boxes.
    changed["regions"][0, 4:] = 7.0
    changed["boxes"][0, 4:] = [0.1, 0.2, 0.5, 0.6]
    np.testing.assert_allclose(logits_of(model, changed), logits, atol=1e-5)
    # Another region really changes the answer (the test can fail).
    changed["regions"][0, 1] += 3.0
    assert np.abs(logits_of(model, changed)[0] - logits[0]).max() > 1e-4
    maps = model.attention_maps(inputs)
    assert maps["region_weights"].shape == (3, N) and maps["question_weights"].shape == (3, T)
    np.testing.assert_allclose(maps["region_weights"][0, 4:], 0.0)
    np.testing.assert_allclose(maps["question_weights"][0, 3:], 0.0)
    np.testing.assert_allclose(maps["region_weights"].sum(-1), 1.0, rtol=1e-5)


def test_padded_words_change_nothing():
    # Padded words are id 0 by definition; a shorter question padded to a
    # longer length gives the same logits (plain MCAN: no position table).
    model = build_vqa_model(tiny("mcan"), VOCAB, ANSWERS, seed=0)
    inputs = batch(2)
    longer = dict(inputs, question=np.pad(inputs["question"], ((0, 0), (0, 3))))
    expected = logits_of(model, inputs)
    model_long = MCAN.from_config(model.get_config())
    model_long(longer)
    model_long.set_weights(model.get_weights())
    np.testing.assert_allclose(logits_of(model_long, longer), expected, atol=1e-5)


@pytest.mark.parametrize("architecture", ["mcan", "mcan_pa"])
def test_keras_round_trip(tmp_path, architecture):
    model = build_vqa_model(tiny(architecture), VOCAB, ANSWERS,
                            word_vectors=np.ones((VOCAB, 8), "float32"), seed=3)
    inputs = batch(4)
    expected = logits_of(model, inputs)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(logits_of(loaded, inputs), expected, atol=1e-6)
    assert loaded.positional == (architecture == "mcan_pa")
    # The GloVe rows travelled in the weights, not in the config.
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded.question_encoder.embedding.embeddings), 1.0)


def learnable_set(seed, size=64):
    """Answer = which of 4 channels is raised in every region."""
    data = batch(seed, size)
    data["region_mask"][:] = True
    rng = np.random.default_rng(seed + 100)
    data["regions"] = rng.normal(size=(size, N, C)).astype("float32")
    data["boxes"] = random_boxes(rng, (size, N))
    answers = rng.integers(0, 4, size=size)
    data["regions"][np.arange(size), :, answers] += 2.0
    targets = np.zeros((size, ANSWERS), "float32")
    targets[np.arange(size), answers] = 1.0
    return data, targets


def test_fit_lowers_the_loss():
    # MCAN+PA (its graph holds every plain MCAN layer as well); tracing the
    # train step, not the steps, takes the time.
    keras.utils.set_random_seed(0)
    model = build_vqa_model(tiny("mcan_pa", dropout=0.0), VOCAB, ANSWERS, seed=0)
    data, targets = learnable_set(5)
    # XLA-compiled on JAX; on TensorFlow the LSTM (cuDNN-capable) makes
    # Keras run the step without XLA whatever `jit_compile` says.
    jit = keras.backend.backend() == "jax"
    model.compile(optimizer=keras.optimizers.Adam(5e-3), loss=SoftTargetBinaryCrossEntropy(),
                  jit_compile=jit or "auto")
    history = model.fit(data, targets, batch_size=16, epochs=8, verbose=0, shuffle=False)
    losses = history.history["loss"]
    assert np.isfinite(losses).all()
    # Below the best answer-prior loss (4 answers of 1/4 each: 4 H(1/4)).
    prior = -4 * (0.25 * np.log(0.25) + 0.75 * np.log(0.75))
    assert losses[-1] < 0.6 * prior, losses


def test_hparams_sets_and_dispatch():
    small = registry.get("mcan_small")
    assert (small.hidden_size, small.num_heads, small.filter_size) == (512, 8, 2048)
    assert (small.num_encoder_layers, small.flat_output_size, small.learning_rate) == (
        6, 1024, 1e-4)
    assert small.decay_epochs == "10,12" and small.optimizer_adam_beta2 == 0.98
    assert registry.get("mcan_large").flat_output_size == 2048
    assert registry.get("mcan_pa_small").architecture == "mcan_pa"
    for name in ("mcan_tiny", "mcan_pa_tiny"):
        assert registry.get(name).model_type == "vqa"
    model = build_vqa_model(registry.get("mcan_pa_tiny"), VOCAB, ANSWERS)
    assert isinstance(model, MCAN) and model.positional
    assert len(model.encoder_blocks) == 2
    with pytest.raises(ValueError, match="architecture"):
        build_vqa_model(small.override(architecture="other"), VOCAB, ANSWERS)
    too_long = dict(batch(0), question=np.ones((3, 20), "int32"))
    with pytest.raises(ValueError, match="max_question_length"):
        build_vqa_model(tiny("mcan_pa", max_question_length=14), VOCAB, ANSWERS)(too_long)
