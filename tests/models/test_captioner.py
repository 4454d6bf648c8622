"""The Transformer captioner: cached decoding and `generate` equal the full
pass, area attention where the paper puts it (Li et al., 2019,
arXiv:1810.10126, section 4.3), attention weights over areas, region
inputs, serialisation, hparams sets and argument errors."""

import math

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.decoding.seq2seq import compiled_generate
from keras_structattn.decoding.seq2seq import generate
from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.layers.area_attention import MultiHeadAreaAttention
from models import registry
from models.captioning.transformer_captioner import TransformerCaptioner
from tests.models.test_transformer import forward
from tests.models.test_transformer import step_by_step

VOCAB = 20
GRID = 3
CHANNELS = 6


def tiny(**changes):
    values = dict(
        vocab_size=VOCAB, hidden_size=32, filter_size=64, num_hidden_layers=2,
        num_heads=4, grid_height=GRID, grid_width=GRID, seed=3,
    )
    values.update(changes)
    return TransformerCaptioner(**values)


AREA_2X2 = dict(num_area_layers=2, max_area_width=2, max_area_height=2)


def grid_features(rng, b=2):
    return rng.normal(size=(b, GRID, GRID, CHANNELS)).astype("float32")


def region_features(rng, b=2, r=5, real=(5, 3)):
    """Random regions; image i has its first `real[i]` regions unmasked."""
    corners = rng.uniform(size=(b, r, 2, 2))
    boxes = np.concatenate([corners.min(2), corners.max(2)], -1)  # x1, y1, x2, y2
    mask = np.arange(r)[None, :] < np.asarray(real)[:, None]
    return {
        "features": rng.normal(size=(b, r, CHANNELS)).astype("float32"),
        "boxes": boxes.astype("float32"),
        "mask": mask,
    }


def captions(rng, b=2, t=5):
    target = rng.integers(2, VOCAB, size=(b, t)).astype("int32")
    return np.concatenate([np.zeros((b, 1), "int32"), target[:, :-1]], 1)


# One batch shape everywhere (2 images, 5 caption tokens and decoding steps,
# 5 regions): eager JAX compiles each op once per shape, so the tests share
# them.
MAX_LENGTH = 5


def logits_of(model, features, decoder_inputs):
    return forward(model, (features, decoder_inputs))


CASES = {
    "grid": (dict(), grid_features),
    "grid_area2x2": (AREA_2X2, grid_features),
    "grid_area_learned_keys_sinusoid": (  # Eq. 9 keys in the first layer
        dict(num_area_layers=1, max_area_width=2, max_area_height=2,
             area_key_mode="concat", grid_positions="sinusoid"),
        grid_features,
    ),
    "regions": (dict(encoder_input="regions"), region_features),
}


# ------------------------------------------------------------- decoding


# (The regular grid model's decoder is the Transformer's, tested with it;
# the learned-keys case has a regular second layer.)
@pytest.mark.parametrize("name", ["grid_area2x2", "grid_area_learned_keys_sinusoid", "regions"])
def test_cached_decoding_equals_full_pass(name):
    changes, make_features = CASES[name]
    model = tiny(**changes)
    rng = np.random.default_rng(0)
    features, decoder_inputs = make_features(rng), captions(rng)
    full = logits_of(model, features, decoder_inputs)
    cached = step_by_step(model, features, decoder_inputs, max_length=MAX_LENGTH)
    np.testing.assert_allclose(cached, full, atol=1e-5)


def argmax_loop(model, features, length):
    """Greedy decoding by full passes over a fixed-length buffer (causal: the
    zeros after position t do not change the logits at t)."""
    batch = len(features["mask"]) if isinstance(features, dict) else len(features)
    buffer = np.zeros((batch, length + 1), "int32")
    for t in range(length):
        buffer[:, t + 1] = logits_of(model, features, buffer[:, :-1])[:, t].argmax(-1)
    ids = buffer[:, 1:]
    for row in ids:  # zeros after the first EOS, as the decoders return
        ends = np.flatnonzero(row == EOS_ID)
        if ends.size:
            row[ends[0] + 1 :] = 0
    return ids


@pytest.mark.parametrize("name", ["grid_area2x2", "regions"])
def test_greedy_generate_equals_the_argmax_loop(name):
    changes, make_features = CASES[name]
    model = tiny(**changes)
    features = make_features(np.random.default_rng(1))
    expected = argmax_loop(model, features, MAX_LENGTH)
    if name == "regions":  # compiled, the dict of regions as the source
        run = compiled_generate(model, max_decode_length=MAX_LENGTH, beam_size=1)
        ids, _ = run(features)
    else:
        ids, _ = generate(model, features, max_decode_length=MAX_LENGTH, beam_size=1)
    np.testing.assert_array_equal(ops.convert_to_numpy(ids), expected)


# ----------------------------------------------------------- area layers


def test_area_attention_is_in_the_first_layers_of_encoder_self_and_encdec():
    model = tiny(num_hidden_layers=3, **AREA_2X2)
    for i in range(3):
        attentions = (
            model.encoder_blocks[i].self_attention,
            model.decoder_blocks[i].encdec_attention,
        )
        for attention in attentions:
            assert isinstance(attention, MultiHeadAreaAttention) == (i < 2)
        # The caption's self-attention stays regular.
        assert not isinstance(model.decoder_blocks[i].self_attention, MultiHeadAreaAttention)
    area = model.decoder_blocks[0].encdec_attention
    assert (area.memory_height, area.max_area_height, area.max_area_width) == (GRID, 2, 2)
    only_encdec = tiny(area_attention_kinds="encdec", **AREA_2X2)
    assert not isinstance(only_encdec.encoder_blocks[0].self_attention, MultiHeadAreaAttention)
    assert isinstance(only_encdec.decoder_blocks[0].encdec_attention, MultiHeadAreaAttention)


def test_unit_areas_equal_regular_attention():
    rng = np.random.default_rng(2)
    features, decoder_inputs = grid_features(rng), captions(rng)
    regular = tiny()
    expected = logits_of(regular, features, decoder_inputs)
    unit = tiny(num_area_layers=2, max_area_width=1, max_area_height=1)
    unit((features, decoder_inputs))
    assert isinstance(unit.encoder_blocks[0].self_attention, MultiHeadAreaAttention)
    unit.set_weights(regular.get_weights())
    np.testing.assert_allclose(logits_of(unit, features, decoder_inputs), expected, atol=1e-5)


def rectangles(height, width, max_height, max_width):
    """Every rectangle of the grid, in the order of the paper's reference
    (tensor2tensor): by height, then width, then top-left corner row-major."""
    return [
        (r, c, h, w)
        for h in range(1, max_height + 1)
        for w in range(1, max_width + 1)
        for r in range(height - h + 1)
        for c in range(width - w + 1)
    ]


def test_area_coordinates_enumerate_the_rectangles():
    # Unequal sides catch a swapped height and width; a 3-high area fits
    # the 3x3 grid in one row of corners only.
    model = tiny(num_area_layers=1, max_area_width=2, max_area_height=3)
    for layer, (max_height, max_width) in enumerate([(3, 2), (1, 1)]):
        expected = np.array(rectangles(GRID, GRID, max_height, max_width))
        np.testing.assert_array_equal(model.area_coordinates(layer), expected)
    assert len(model.area_coordinates(0)) == 9 + 6 + 6 + 4 + 3 + 2
    with pytest.raises(ValueError, match="layer"):
        model.area_coordinates(2)


def test_encdec_attention_weights_are_over_the_areas():
    model = tiny(num_area_layers=1, max_area_width=2, max_area_height=2)
    rng = np.random.default_rng(3)
    features, decoder_inputs = grid_features(rng), captions(rng)
    for layer in (0, 1):  # an area layer and a regular one
        weights = ops.convert_to_numpy(model.encdec_attention(features, decoder_inputs, layer))
        coordinates = model.area_coordinates(layer)
        assert len(coordinates) == (25 if layer == 0 else 9)
        assert weights.shape == (2, 4, 5, len(coordinates))
        assert weights.dtype == np.float32
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
        assert (weights >= 0).all()


# --------------------------------------------------------------- regions


def test_regions_padding_and_empty_images():
    model = tiny(encoder_input="regions")
    rng = np.random.default_rng(5)
    decoder_inputs = captions(rng)
    # Image 0: 3 regions and 2 padding ones (random, not zeros); image 1:
    # every region masked.
    padded = region_features(rng, real=(3, 0))
    unpadded = {key: value[:, :3] for key, value in padded.items()}
    unpadded["mask"] = np.ones_like(unpadded["mask"])
    logits = logits_of(model, padded, decoder_inputs)
    np.testing.assert_allclose(
        logits[0], logits_of(model, unpadded, decoder_inputs)[0], atol=1e-5
    )
    assert np.isfinite(logits).all()
    # The mask matters: the same padding, unmasked, changes the logits.
    unmasked = dict(padded, mask=np.ones_like(padded["mask"]))
    assert np.abs(logits_of(model, unmasked, decoder_inputs)[0] - logits[0]).max() > 1e-4


def test_region_embedding_is_m4c_style():
    """`LN(W f) + LN(W_b g)` with g = (x1, y1, x2, y2, w, h, w * h), in NumPy."""
    model = tiny(encoder_input="regions")
    regions = region_features(np.random.default_rng(6), real=(5, 2))
    model.encode(regions)
    x, mask = model._embed_regions(regions)

    def layer_norm(v):
        return (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-6)

    def dense(layer, v):
        kernel, bias = (ops.convert_to_numpy(w) for w in layer.weights)
        return v @ kernel + bias

    x1, y1, x2, y2 = np.moveaxis(regions["boxes"], -1, 0)
    geometry = np.stack([x1, y1, x2, y2, x2 - x1, y2 - y1, (x2 - x1) * (y2 - y1)], -1)
    expected = layer_norm(dense(model.feature_projection, regions["features"]))
    expected += layer_norm(dense(model.box_projection, geometry))
    expected *= regions["mask"][..., None]
    np.testing.assert_allclose(ops.convert_to_numpy(x), expected, atol=1e-5)
    np.testing.assert_array_equal(ops.convert_to_numpy(mask), regions["mask"])


# -------------------------------------------------------------- positions


def test_grid_positions():
    hidden = 32
    sinusoid = tiny(grid_positions="sinusoid")
    signal = ops.convert_to_numpy(sinusoid._grid_positions())

    def sinusoids(position, channels):  # tensor2tensor's timing signal
        n = channels // 2
        inverse = np.exp(-np.arange(n) * math.log(1e4) / (n - 1))
        return np.concatenate([np.sin(position * inverse), np.cos(position * inverse)])

    for r in range(GRID):
        for c in range(GRID):
            expected = np.concatenate([sinusoids(r, hidden // 2), sinusoids(c, hidden // 2)])
            np.testing.assert_allclose(signal[r, c], expected, atol=1e-5)
    learned = tiny()
    learned.build(((None, GRID, GRID, CHANNELS), (None, None)))
    rows = ops.convert_to_numpy(learned.row_embedding.embeddings)
    columns = ops.convert_to_numpy(learned.column_embedding.embeddings)
    np.testing.assert_allclose(
        ops.convert_to_numpy(learned._grid_positions()),
        rows[:, None, :] + columns[None, :, :],
        atol=1e-6,
    )


# ---------------------------------------------------- saving and hparams


@pytest.mark.parametrize("name", ["grid_area_learned_keys_sinusoid", "regions"])
def test_keras_round_trip(tmp_path, name):
    changes, make_features = CASES[name]
    model = tiny(**changes)
    rng = np.random.default_rng(7)
    features, decoder_inputs = make_features(rng), captions(rng)
    expected = logits_of(model, features, decoder_inputs)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(logits_of(loaded, features, decoder_inputs), expected, atol=1e-6)
    assert loaded.get_config() == model.get_config()
    rebuilt = TransformerCaptioner.from_config(model.get_config())
    assert rebuilt.get_config() == model.get_config()


def test_registered_sets():
    expected = {"tiny": (2, 128, 512, 4), "small": (3, 256, 1024, 4), "base": (6, 512, 2048, 8)}
    # Areas in the first third of the layers (the paper: 2 of 6), at least one.
    area_layers = {"tiny": 1, "small": 1, "base": 2}
    names = [name for name in registry.registered() if name.startswith("captioner_")]
    assert len(names) == 9
    for size, (layers, hidden, filters, heads) in expected.items():
        for suffix, side in (("", 1), ("_area2x2", 2), ("_area3x3", 3)):
            hp = registry.get(f"captioner_{size}{suffix}")
            assert hp.model_type == "captioner"
            assert (hp.num_hidden_layers, hp.hidden_size, hp.filter_size,
                    hp.num_heads) == (layers, hidden, filters, heads)
            assert (hp.num_area_layers, hp.max_area_width, hp.max_area_height) == (
                0 if side == 1 else area_layers[size], side, side
            )
            assert hp.area_attention_kinds == "encoder_self,encdec"
            model = TransformerCaptioner.from_hparams(hp, vocab_size=VOCAB)
            assert len(model.decoder_blocks) == layers
            # The areas of the 8x8 grid (area_coordinates needs no build).
            assert len(model.area_coordinates(0)) == sum(
                (9 - h) * (9 - w) for h in range(1, side + 1) for w in range(1, side + 1)
            )


def test_area_attention_adds_no_weights():
    """Eq. 3/4 area attention is parameter free (the paper's fair
    comparison, section 4)."""
    regular = tiny()
    regular.build(((None, GRID, GRID, CHANNELS), (None, None)))
    area = tiny(**AREA_2X2)
    area.build(((None, GRID, GRID, CHANNELS), (None, None)))
    assert area.count_params() == regular.count_params()


# ---------------------------------------------------------------- errors


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="regions"):
        tiny(encoder_input="regions", **AREA_2X2)
    with pytest.raises(ValueError, match="grid_positions"):
        tiny(grid_positions="random")
    with pytest.raises(ValueError, match="encoder_input"):
        tiny(encoder_input="pixels")
    with pytest.raises(ValueError, match="num_area_layers"):
        tiny(num_area_layers=3)
    with pytest.raises(ValueError, match="area_key_mode"):
        tiny(area_key_mode="median")
    model = tiny(**AREA_2X2)
    rng = np.random.default_rng(8)
    wrong = rng.normal(size=(1, GRID + 1, GRID, CHANNELS)).astype("float32")
    with pytest.raises(ValueError, match=r"grid_height.*\(3, 3\).*\(1, 4, 3, 6\)"):
        model((wrong, captions(rng, b=1)))
    with pytest.raises(ValueError, match="not a dict"):
        model.encode(region_features(rng))
    with pytest.raises(ValueError, match="keys"):
        tiny(encoder_input="regions").encode({"features": np.zeros((1, 2, 3))})
    with pytest.raises(ValueError, match="needs a grid"):
        tiny(encoder_input="regions").area_coordinates()
