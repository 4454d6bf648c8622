"""The tensor2tensor-style Transformer: cached decoding equals the full pass,
hparams sets, serialisation, mixed precision and a short fit."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.training import hparams as hparams_lib
from keras_structattn.training.losses import PaddedAccuracy
from keras_structattn.training.losses import PaddedCrossEntropy
from models import registry
from models.translation.transformer import Transformer
from tests._backend import jit

VOCAB = 40


def tiny(**changes):
    values = dict(
        vocab_size=VOCAB, hidden_size=16, filter_size=32, num_hidden_layers=2,
        num_heads=2, seed=3,
    )
    values.update(changes)
    return Transformer(**values)


def batch(rng, b=3, s=7, t=6):
    source = rng.integers(2, VOCAB, size=(b, s)).astype("int32")
    source[1 % b, 4:] = 0  # padding
    source[2 % b, 6:] = 0
    target = rng.integers(2, VOCAB, size=(b, t)).astype("int32")
    decoder_inputs = np.concatenate([np.zeros((b, 1), "int32"), target[:, :-1]], 1)
    return source, decoder_inputs, target


def step_by_step(model, source, decoder_inputs, max_length):
    """The logits of `decode_step` run word by word over `decoder_inputs`,
    the step compiled once (eager JAX would compile each of its ops)."""
    encoder_outputs, mask = model.encode(source)
    cache = model.initial_cache(encoder_outputs, mask, max_length)
    decode_step = jit(model.decode_step)
    logits = []
    for i in range(decoder_inputs.shape[1]):
        step, cache = decode_step(
            decoder_inputs[:, i : i + 1], cache, ops.convert_to_tensor(i, "int32")
        )
        logits.append(ops.convert_to_numpy(step))
    return np.stack(logits, axis=1)


AREA_CASES = {
    "regular": dict(),
    "area_all_kinds": dict(num_area_layers=2, max_area_width=3),
    "area_first_layer_decoder_self": dict(
        num_area_layers=1, max_area_width=2, area_attention_kinds="decoder_self"
    ),
    "area_mean_values_encdec": dict(
        num_area_layers=2, max_area_width=4, area_value_mode="mean",
        area_attention_kinds="encdec",
    ),
    "unshared_embeddings": dict(shared_embedding_and_softmax_weights=False),
}


@pytest.mark.parametrize("name", list(AREA_CASES))
def test_cached_decoding_equals_full_pass(name):
    model = tiny(**AREA_CASES[name])
    rng = np.random.default_rng(0)
    source, decoder_inputs, _ = batch(rng)
    full = ops.convert_to_numpy(model((source, decoder_inputs)))
    # A cache longer than the decoded prefix: the unused tail is masked.
    cached = step_by_step(model, source, decoder_inputs, max_length=9)
    np.testing.assert_allclose(cached, full, atol=1e-5)


def test_cached_decoding_step_compiles():
    model = tiny(num_area_layers=2, max_area_width=3)
    rng = np.random.default_rng(1)
    source, decoder_inputs, _ = batch(rng)
    full = ops.convert_to_numpy(model((source, decoder_inputs)))
    encoder_outputs, mask = model.encode(source)
    cache = model.initial_cache(encoder_outputs, mask, 6)
    step = jit(lambda ids, cache, index: model.decode_step(ids, cache, index))
    for i in range(6):
        logits, cache = step(
            decoder_inputs[:, i : i + 1], cache, ops.convert_to_tensor(i, "int32")
        )
        np.testing.assert_allclose(ops.convert_to_numpy(logits), full[:, i], atol=1e-5)


def forward(model, inputs):
    """`model(inputs)` compiled (NumPy): eager JAX would compile each op of
    the pass one by one (10 s for the area attention models)."""
    if not model.built:  # built symbolically, outside the compiled function
        model(keras.tree.map_structure(lambda x: keras.KerasTensor(x.shape, str(x.dtype)),
                                       inputs))
    return ops.convert_to_numpy(jit(model)(inputs))


def test_padding_of_the_source_does_not_change_the_output():
    model = tiny(num_area_layers=2, max_area_width=3)
    rng = np.random.default_rng(2)
    source, decoder_inputs, _ = batch(rng, b=1, s=5)
    source[:] = np.maximum(source, 2)  # no padding in the unpadded copy
    padded = np.concatenate([source, np.zeros((1, 4), "int32")], axis=1)
    a = forward(model, (source, decoder_inputs))
    b = forward(model, (padded, decoder_inputs))
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_causality_future_targets_do_not_change_earlier_logits():
    model = tiny(num_area_layers=2, max_area_width=3)
    rng = np.random.default_rng(3)
    source, decoder_inputs, _ = batch(rng)
    changed = decoder_inputs.copy()
    changed[:, 4:] = (changed[:, 4:] + 5) % VOCAB
    a = forward(model, (source, decoder_inputs))
    b = forward(model, (source, changed))
    np.testing.assert_allclose(a[:, :4], b[:, :4], atol=1e-5)
    assert np.abs(a[:, 4:] - b[:, 4:]).max() > 1e-4


def test_keras_round_trip(tmp_path):
    model = tiny(num_area_layers=1, max_area_width=2)
    rng = np.random.default_rng(4)
    source, decoder_inputs, _ = batch(rng)
    expected = ops.convert_to_numpy(model((source, decoder_inputs)))
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    got = ops.convert_to_numpy(loaded((source, decoder_inputs)))
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert loaded.get_config() == model.get_config()


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_logits_are_float32_and_close(policy):
    rng = np.random.default_rng(5)
    source, decoder_inputs, _ = batch(rng)
    reference = tiny(num_area_layers=2, max_area_width=3)
    expected = ops.convert_to_numpy(reference((source, decoder_inputs)))
    keras.mixed_precision.set_global_policy(policy)
    try:
        model = tiny(num_area_layers=2, max_area_width=3)
        model((source, decoder_inputs))
        model.set_weights(reference.get_weights())
        logits = model((source, decoder_inputs))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    logits = ops.convert_to_numpy(logits)
    assert np.isfinite(logits).all()
    np.testing.assert_allclose(logits, expected, atol=0.1)


def test_fit_with_jit_lowers_the_loss_on_a_copy_task():
    """Learn to copy the source: the loss must fall well below its start."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(6)
    source = rng.integers(2, 12, size=(64, 6)).astype("int32")
    target = np.concatenate([source, np.ones((64, 1), "int32")], 1)  # + EOS
    decoder_inputs = np.concatenate([np.zeros((64, 1), "int32"), target[:, :-1]], 1)
    model = tiny(num_area_layers=1, max_area_width=2, vocab_size=12,
                 layer_prepostprocess_dropout=0.0, attention_dropout=0.0,
                 relu_dropout=0.0)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=PaddedCrossEntropy(label_smoothing=0.0),
        metrics=[PaddedAccuracy()],
        jit_compile=True,
    )
    history = model.fit(
        (source, decoder_inputs), target, batch_size=16, epochs=12, verbose=0
    )
    losses = history.history["loss"]
    assert np.isfinite(losses).all()
    assert losses[-1] < 0.7 * losses[0]


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="num_area_layers"):
        tiny(num_area_layers=3)
    with pytest.raises(ValueError, match="area_attention_kinds"):
        tiny(num_area_layers=1, area_attention_kinds="encoder_self,decoder")
    with pytest.raises(ValueError, match="vocab_size"):
        tiny(vocab_size=1)
    with pytest.raises(ValueError, match="hidden_size"):
        tiny(hidden_size=15)


# ----------------------------------------------------------------- hparams


def test_registered_sets_have_the_paper_sizes():
    expected = {
        "tiny": (2, 128, 512, 4),
        "small": (2, 256, 1024, 4),
        "base": (6, 512, 2048, 8),
        "big": (6, 1024, 4096, 16),
    }
    for size, (layers, hidden, filters, heads) in expected.items():
        for suffix, area_layers, width in (("", 0, 1), ("_area", 2, 3)):
            hp = registry.get(f"transformer_{size}{suffix}")
            assert (hp.num_hidden_layers, hp.hidden_size, hp.filter_size,
                    hp.num_heads) == (layers, hidden, filters, heads)
            assert (hp.num_area_layers, hp.max_area_width) == (area_layers, width)
            assert hp.label_smoothing == 0.1


def test_hparams_overrides_and_errors(tmp_path):
    hp = registry.resolve(
        "transformer_tiny", "num_hidden_layers=3, label_smoothing=0.2,"
        "area_key_mode=max,shared_embedding_and_softmax_weights=false"
    )
    assert hp.num_hidden_layers == 3 and hp.label_smoothing == 0.2
    assert hp.area_key_mode == "max"
    assert hp.shared_embedding_and_softmax_weights is False
    path = str(tmp_path / "run" / "hparams.json")
    hp.save(path)
    assert hparams_lib.HParams.load(path) == hp
    with pytest.raises(ValueError, match="Unknown hparams set 'transformer_huge'"):
        registry.get("transformer_huge")
    with pytest.raises(ValueError, match="Unknown hyper-parameter 'hiden_size'"):
        registry.resolve("transformer_tiny", "hiden_size=3")
    with pytest.raises(ValueError, match="'num_heads' is an int"):
        registry.resolve("transformer_tiny", "num_heads=two")
    with pytest.raises(ValueError, match="name=value"):
        registry.resolve("transformer_tiny", "num_heads")
    with pytest.raises(FileNotFoundError, match="nowhere.json"):
        hparams_lib.HParams.load(str(tmp_path / "nowhere.json"))


def test_from_hparams_builds_the_set():
    hp = registry.resolve("transformer_tiny_area", "num_hidden_layers=3")
    model = Transformer.from_hparams(hp, vocab_size=VOCAB)
    # Built symbolically: eager JAX would compile each op of the pass.
    model((keras.KerasTensor((1, 4), "int32"), keras.KerasTensor((1, 3), "int32")))
    assert len(model.encoder_blocks) == 3
    assert model.encoder_blocks[1].area == dict(
        max_area_width=3, max_area_height=1, memory_height=1,
        area_key_mode="mean", area_value_mode="sum",
    )
    assert model.encoder_blocks[2].area is None
