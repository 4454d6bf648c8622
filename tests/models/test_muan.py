"""Tests of `models.vqa.muan` (MUAN for VQA and for visual grounding; Yu et
al., 2019, arXiv:1908.04107, Sec. III).

Wiring is checked by recomputing the outputs from the sublayers by hand
(the `[ans]` token is row 0 of the stack's text output; the grounding heads
read the region rows), padding by perturbing padded words and regions, and
learning by short fits on tiny synthetic tasks whose answer is a marker in
the inputs. The attention maps are checked against the definitions (rows
of the softmax sum to 1, padding gets 0, column-wise max over real rows).
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.tasks.grounding import heads as grounding
from models import registry
from models.vqa import muan
from tests._backend import to_numpy

VOCAB, ANSWERS, T, N, C = 12, 5, 4, 6, 6
SMALL = dict(hidden_size=16, num_heads=2, filter_size=32, num_blocks=2, word_dim=8, dropout=0.0,
             attention_dropout=0.0)


def _inputs(seed=0, batch=3, text_key="question", pad=True):
    """Example 0 has 2 padding words, example 1 two padding regions."""
    rng = np.random.default_rng(seed)
    text = rng.integers(1, VOCAB, size=(batch, T)).astype("int32")
    mask = np.ones((batch, N), bool)
    if pad:
        text[0, 2:] = 0
        mask[1, 4:] = False
    x1y1 = rng.uniform(0.0, 0.5, size=(batch, N, 2))
    boxes = np.concatenate([x1y1, x1y1 + rng.uniform(0.1, 0.5, size=(batch, N, 2))], -1)
    regions = rng.normal(size=(batch, N, C)).astype("float32")
    regions[~mask] = 0.0
    boxes[~mask] = 0.0
    return {text_key: text, "regions": regions, "boxes": boxes.astype("float32"),
            "region_mask": mask}


def _vqa(**changes):
    model = muan.MUAN(VOCAB, ANSWERS, seed=3, **dict(SMALL, **changes))
    model(_inputs())
    return model


def _grounding(**changes):
    model = muan.MUANGrounding(VOCAB, seed=3, box_feature_dim=4, **dict(SMALL, **changes))
    model(_inputs(text_key="expression"))
    return model


def test_vqa_wiring_answers_from_the_ans_token():
    model = _vqa()
    inputs = _inputs()
    logits = model(inputs)
    assert tuple(logits.shape) == (3, ANSWERS) and logits.dtype == "float32"
    # By hand: [ans] + words through the LSTM, the stack, row 0 -> Dense.
    encoder = model.text_encoder
    text = encoder(inputs["question"])
    assert tuple(text.shape) == (3, T + 1, 16)
    text_out, _ = model.stack(text, inputs["regions"],
                              text_mask=encoder.question_mask(inputs["question"]),
                              visual_mask=inputs["region_mask"])
    np.testing.assert_allclose(to_numpy(logits), to_numpy(model.classifier(text_out[:, 0])),
                               rtol=1e-5, atol=1e-6)
    # The [ans] token is a learned vector before the first word.
    assert encoder.prepend_token and model.stack.blocks[0].modality_norm
    assert not any("box" in w.path for w in model.weights)  # boxes unused for VQA


def test_vqa_padding_changes_nothing():
    model = _vqa()
    inputs = _inputs()
    logits = to_numpy(model(inputs))
    changed = dict(inputs, regions=inputs["regions"].copy())
    changed["regions"][1, 4:] = 50.0  # padded regions of example 1
    # Two more padding words at the end.
    changed["question"] = np.pad(inputs["question"], ((0, 0), (0, 2)))
    np.testing.assert_allclose(to_numpy(model(changed)), logits, rtol=1e-5, atol=1e-5)
    # A real region does change the answer.
    changed["regions"][1, 0] += 5.0
    assert np.abs(to_numpy(model(changed))[1] - logits[1]).max() > 1e-4


def test_vqa_attention_maps():
    model = _vqa()
    inputs = _inputs()
    maps = model.attention_maps(inputs)
    assert maps["text_length"] == T + 1
    assert maps["unified"].shape == (3, 2, T + 1 + N, T + 1 + N)
    assert maps["region_weights"].shape == (3, N) and maps["question_weights"].shape == (3, T)
    # The [ans] row (mean over heads) is a distribution over the real keys:
    # itself, the words and the regions.
    ans_self = maps["unified"][:, :, 0, 0].mean(1)
    total = ans_self + maps["question_weights"].sum(1) + maps["region_weights"].sum(1)
    np.testing.assert_allclose(total, 1.0, atol=1e-5)
    np.testing.assert_array_equal(maps["question_weights"][0, 2:], 0.0)  # padded words
    np.testing.assert_array_equal(maps["region_weights"][1, 4:], 0.0)  # padded regions


def test_qk_gate_false_is_the_ablation_config():
    gated, plain = _vqa(), _vqa(qk_gate=False)
    for block in plain.stack.blocks:
        assert block.get_config()["qk_gate"] is False
    assert all(b.get_config()["qk_gate"] for b in gated.stack.blocks)
    assert plain.count_params() < gated.count_params()
    assert not any("qk_gate" in w.path for w in plain.weights)


def test_grounding_outputs_and_padding():
    model = _grounding()
    inputs = _inputs(text_key="expression")
    outputs = model(inputs)
    assert tuple(outputs["scores"].shape) == (3, N)
    assert tuple(outputs["box_deltas"].shape) == (3, N, 4)
    assert outputs["scores"].dtype == "float32" and outputs["box_deltas"].dtype == "float32"
    probabilities = to_numpy(ops.softmax(outputs["scores"], axis=-1))
    np.testing.assert_array_equal(probabilities[1, 4:], 0.0)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-6)
    # Box features: each region sees its box (5-d feature -> Dense(4)).
    assert model.box_projection.units == 4
    moved = dict(inputs, boxes=inputs["boxes"].copy())
    moved["boxes"][0, 0] = [0.0, 0.0, 1.0, 1.0]
    assert np.abs(to_numpy(model(moved)["scores"])[0] - to_numpy(outputs["scores"])[0]).max() > 0
    predicted, index = model.predict_boxes(outputs, inputs["boxes"])
    assert tuple(predicted.shape) == (3, 4)
    np.testing.assert_array_equal(to_numpy(index, "int64"),
                                  np.argmax(to_numpy(outputs["scores"]), -1))


def test_grounding_attention_maps_column_max():
    model = _grounding()
    inputs = _inputs(text_key="expression")
    maps = model.attention_maps(inputs)
    assert maps["text_length"] == T
    unified = maps["unified"].mean(1)  # [B, S, S]
    real = np.concatenate([inputs["expression"] != 0, inputs["region_mask"]], 1)
    for b in range(3):
        expected = unified[b][real[b]].max(axis=0)  # over real query rows
        np.testing.assert_allclose(maps["word_weights"][b], expected[:T], atol=1e-6)
        np.testing.assert_allclose(maps["region_weights"][b], expected[T:], atol=1e-6)
    assert maps["block_region_weights"].shape == (3, 2, N)
    np.testing.assert_array_equal(maps["region_weights"][1, 4:], 0.0)


@pytest.mark.parametrize("kind", ["vqa", "grounding"])
def test_keras_round_trip(tmp_path, kind):
    model = _vqa(qk_gate=False) if kind == "vqa" else _grounding()
    inputs = _inputs(text_key="question" if kind == "vqa" else "expression")
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is type(model) and loaded.get_config() == model.get_config()
    before, after = model(inputs), loaded(inputs)
    if kind == "grounding":
        before, after = before["box_deltas"], after["box_deltas"]
    np.testing.assert_allclose(to_numpy(after), to_numpy(before), rtol=1e-6, atol=1e-6)


def _marker_task(seed, batch, text_key):
    """Region features with a marker (+3 on channel 0) on one region; the
    first word says nothing. The answer / referent is the marked region."""
    data = _inputs(seed, batch, text_key, pad=False)
    rng = np.random.default_rng(seed + 1)
    target = rng.integers(0, N if text_key == "expression" else ANSWERS, size=batch)
    data["regions"][np.arange(batch), target, 0] += 3.0
    return data, target


def test_vqa_fit_lowers_the_loss():
    keras.utils.set_random_seed(0)
    model = _vqa()
    data, answer = _marker_task(0, 64, "question")
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = model.evaluate(data, answer, batch_size=64, verbose=0)
    model.fit(data, answer, batch_size=16, epochs=5, verbose=0, shuffle=False)  # 20 steps
    after = model.evaluate(data, answer, batch_size=64, verbose=0)
    assert after < 0.8 * before


def test_grounding_fit_lowers_the_loss():
    keras.utils.set_random_seed(0)
    model = _grounding()
    data, referent = _marker_task(0, 48, "expression")
    batch = len(referent)
    target_distribution = np.eye(N, dtype="float32")[referent]
    gt_box = data["boxes"][np.arange(batch), referent] + 0.02
    packed = grounding.regression_targets_numpy(data["boxes"], gt_box, data["region_mask"])
    targets = {"scores": target_distribution, "box_deltas": packed}
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss={"scores": grounding.RankLoss(),
                        "box_deltas": grounding.BoxRegressionLoss()},
                  loss_weights={"scores": 1.0, "box_deltas": 0.5})
    before = model.evaluate(data, targets, batch_size=48, verbose=0, return_dict=True)
    model.fit(data, targets, batch_size=8, epochs=5, verbose=0, shuffle=False)  # 30 steps
    after = model.evaluate(data, targets, batch_size=48, verbose=0, return_dict=True)
    assert after["loss"] < 0.8 * before["loss"]
    assert after["scores_loss"] < 0.5 * before["scores_loss"]  # ranks the marked region
    assert np.isfinite(after["loss"])


def test_registered_sets():
    base = registry.get("muan_base")
    assert (base.model_type, base.architecture) == ("vqa", "muan")
    # The paper's Sec. IV-B: d 768, h 8 (d_g = d/h = 96), L 10, Adam beta2
    # 0.99, batch 64, lr 1.5e-2 / sqrt(d L).
    assert (base.hidden_size, base.num_heads, base.num_blocks, base.gate_dim) == (768, 8, 10, 0)
    assert base.optimizer_adam_beta2 == 0.99 and base.batch_size == 64
    np.testing.assert_allclose(base.learning_rate, 1.5e-2 / np.sqrt(768 * 10))
    tiny, nogate = registry.get("muan_tiny"), registry.get("muan_tiny_nogate")
    assert (tiny.hidden_size, tiny.num_heads, tiny.filter_size, tiny.num_blocks) == (64, 4, 256, 4)
    assert tiny.qk_gate and not nogate.qk_gate
    assert nogate.values() == tiny.override(qk_gate=False).values()
    model = muan.MUAN.from_hparams(nogate, VOCAB, ANSWERS, seed=1)
    assert model.stack.blocks[0].attention.qk_gate is False
    ground = registry.get("muan_grounding_base")
    assert (ground.model_type, ground.max_expression_length, ground.regression_weight) == (
        "grounding", 15, 0.5)
    assert ground.use_box_features and ground.box_feature_dim == 0
    assert registry.get("muan_grounding_tiny").hidden_size == 64
    with pytest.raises(ValueError, match="grounding"):
        muan.MUANGrounding.from_hparams(base, VOCAB)


def test_bad_inputs_raise():
    model = _vqa()
    inputs = _inputs()
    inputs.pop("region_mask")
    with pytest.raises(ValueError, match="region_mask"):
        model(inputs)
    with pytest.raises(ValueError, match="mask_quadrants"):
        muan.MUAN(VOCAB, ANSWERS, mask_quadrants="both")


def test_gate_comparison_sets_and_the_gate_bias():
    """The d 128 sets of the gate comparison (d_h 32, 2 blocks, the paper's
    rate rule) differ only in the gate; `gate_bias_init` reaches every
    block's FC_g bias, and those gates start near sigmoid(4)."""
    gated = registry.get("muan_d128")
    assert (gated.hidden_size // gated.num_heads, gated.num_blocks) == (32, 2)
    np.testing.assert_allclose(gated.learning_rate, 1.5e-2 / np.sqrt(128 * 2))
    assert gated.gate_bias_init == 0.0
    assert registry.get("muan_d128_nogate").values() == gated.override(qk_gate=False).values()
    high = registry.get("muan_d128_gate_bias")
    assert high.values() == gated.override(gate_bias_init=4.0).values()
    model = _vqa(gate_bias_init=4.0)
    for block in model.stack.blocks:
        bias = [w for w in block.weights if w.path.endswith("qk_gate_output/bias")]
        np.testing.assert_array_equal(to_numpy(bias[0]), 4.0)
    x = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")
    gates = model.stack.blocks[0].attention(x, x, return_gates=True)[1]
    assert 0.95 < float(np.mean(to_numpy(gates))) < 0.995
    assert model.get_config()["gate_bias_init"] == 4.0
    assert model.stack.blocks[0].get_config()["gate_bias_initializer"] is not None
    assert _vqa().stack.blocks[0].get_config()["gate_bias_initializer"] is None
