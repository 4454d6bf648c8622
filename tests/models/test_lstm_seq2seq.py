"""The LSTM seq2seq with multi-head (area) Luong attention: step-by-step
decoding equals teacher forcing, width-1 area attention equals regular
attention, padding gets no attention, serialisation and a short fit."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.layers import MultiHeadAreaAttention
from keras_structattn.training.losses import PaddedCrossEntropy
from models import registry
from models.translation.lstm_seq2seq import LSTMSeq2Seq
from tests._backend import jit

VOCAB = 30


def small(**changes):
    values = dict(vocab_size=VOCAB, hidden_size=16, num_heads=2, dropout=0.0, seed=2)
    values.update(changes)
    return LSTMSeq2Seq(**values)


def batch(rng, b=3, s=7, t=5):
    source = rng.integers(2, VOCAB, size=(b, s)).astype("int32")
    source[1 % b, 4:] = 0
    target = rng.integers(2, VOCAB, size=(b, t)).astype("int32")
    decoder_inputs = np.concatenate([np.zeros((b, 1), "int32"), target[:, :-1]], 1)
    return source, decoder_inputs, target


def step_by_step(model, source, decoder_inputs, step=None):
    encoder, mask = model.encode(source)
    cache = model.initial_cache(encoder, mask, decoder_inputs.shape[1])
    step = step or model.decode_step
    out = []
    for i in range(decoder_inputs.shape[1]):
        logits, cache = step(decoder_inputs[:, i : i + 1], cache, ops.convert_to_tensor(i))
        out.append(ops.convert_to_numpy(logits))
    return np.stack(out, axis=1)


CASES = {
    "regular_1_head": dict(num_heads=1),
    "regular_4_heads": dict(num_heads=4),
    "area_width_2": dict(max_area_width=2),
    "area_width_3_mean_values": dict(max_area_width=3, area_value_mode="mean"),
    "unshared_three_layers": dict(
        shared_embedding_and_softmax_weights=False, num_hidden_layers=3
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_step_by_step_equals_teacher_forcing(name):
    model = small(**CASES[name])
    rng = np.random.default_rng(0)
    source, decoder_inputs, _ = batch(rng)
    full = ops.convert_to_numpy(model((source, decoder_inputs)))
    np.testing.assert_allclose(step_by_step(model, source, decoder_inputs), full, atol=1e-5)


def test_compiled_step_equals_teacher_forcing():
    model = small(max_area_width=2)
    rng = np.random.default_rng(1)
    source, decoder_inputs, _ = batch(rng)
    full = ops.convert_to_numpy(model((source, decoder_inputs)))
    step = jit(lambda ids, cache, index: model.decode_step(ids, cache, index))
    np.testing.assert_allclose(
        step_by_step(model, source, decoder_inputs, step), full, atol=1e-5
    )


def test_area_width_one_equals_regular_attention_with_the_same_weights():
    rng = np.random.default_rng(2)
    source, decoder_inputs, _ = batch(rng)
    regular = small()
    expected = ops.convert_to_numpy(regular((source, decoder_inputs)))
    area = small()
    # Same model, but its attention is the area layer with width-1 areas.
    area.attention = MultiHeadAreaAttention(
        num_heads=2, key_dim=8, use_bias=False, max_area_width=1, name="attention"
    )
    area((source, decoder_inputs))
    # Match weights by path (the replaced layer is tracked in another order).
    by_path = {w.path.split("/", 1)[1]: w for w in regular.weights}
    assert len(by_path) == len(area.weights)
    for w in area.weights:
        w.assign(by_path[w.path.split("/", 1)[1]])
    got = ops.convert_to_numpy(area((source, decoder_inputs)))
    np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.parametrize("width", [1, 3])
def test_padded_source_positions_get_no_attention(width):
    model = small(max_area_width=width)
    rng = np.random.default_rng(3)
    source, decoder_inputs, _ = batch(rng, b=2, s=5)
    source[:] = np.maximum(source, 2)
    padded = np.concatenate([source, np.zeros((2, 4), "int32")], axis=1)
    a = ops.convert_to_numpy(model((source, decoder_inputs)))
    b = ops.convert_to_numpy(model((padded, decoder_inputs)))
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_keras_round_trip(tmp_path):
    model = small(max_area_width=2)
    rng = np.random.default_rng(4)
    source, decoder_inputs, _ = batch(rng)
    expected = ops.convert_to_numpy(model((source, decoder_inputs)))
    path = str(tmp_path / "lstm.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded((source, decoder_inputs))), expected, atol=1e-6
    )
    assert loaded.get_config() == model.get_config()


def test_fit_lowers_the_loss_on_a_copy_task():
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(5)
    source = rng.integers(2, 10, size=(64, 5)).astype("int32")
    target = np.concatenate([source, np.ones((64, 1), "int32")], 1)
    decoder_inputs = np.concatenate([np.zeros((64, 1), "int32"), target[:, :-1]], 1)
    model = small(vocab_size=10, hidden_size=32, max_area_width=2)
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=PaddedCrossEntropy(label_smoothing=0.0), jit_compile=True)
    history = model.fit((source, decoder_inputs), target, batch_size=16, epochs=10,
                        verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < 0.7 * losses[0]


def test_hparams_sets_cover_the_paper_grid():
    for cells in (256, 512, 1024):
        for heads in (1, 4):
            hp = registry.get(f"lstm_seq2seq_{cells}_h{heads}_area")
            assert (hp.hidden_size, hp.num_heads, hp.max_area_width) == (cells, heads, 2)
            assert registry.get(f"lstm_seq2seq_{cells}_h{heads}").max_area_width == 1
            assert registry.get(f"lstm_seq2seq_{cells}_h{heads}_char").model_type == "lstm"
    base = registry.get("lstm_area_attention_base")
    assert (base.hidden_size, base.num_heads, base.dropout, base.max_area_width,
            base.num_hidden_layers) == (1024, 4, 0.2, 2, 2)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="max_area_width"):
        small(max_area_width=0)
    with pytest.raises(ValueError, match="num_heads"):
        small(num_heads=3)
