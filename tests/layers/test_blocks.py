"""Tests of the block kit (`keras_structattn.layers.blocks`).

`Residual` against NumPy references written from the two orders it
implements, pre-norm `x + F(LN(x))` (tensor2tensor's Transformer) and
post-norm `LN(x + F(x))` (the original Transformer, MCAN, MUAN, CATT), with
Keras's and the MCAN family's layer norm; its dropout touches the
sublayer's output only. `FeedForward` against `act(x W1 + b1) W2 + b2`.
Config and `.keras` round trips, mixed precision, `sub_seed`,
`clone_initializer` and `check_sizes`.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.layers.blocks import FeedForward
from keras_structattn.layers.blocks import Residual
from keras_structattn.layers.blocks import check_sizes
from keras_structattn.layers.blocks import clone_initializer
from keras_structattn.layers.blocks import layer_normalization
from keras_structattn.layers.blocks import sub_seed
from tests.layers.weights import to_np

D = 6


def layer_norm(x, gamma, beta, epsilon, kind):
    mean = x.mean(-1, keepdims=True)
    if kind == "keras":  # biased variance, epsilon inside the root
        return gamma * (x - mean) / np.sqrt(x.var(-1, keepdims=True) + epsilon) + beta
    return gamma * (x - mean) / (x.std(-1, ddof=1, keepdims=True) + epsilon) + beta


def sublayer(x):
    """A stand-in for an attention: any function of the sublayer's input."""
    return np.tanh(x[..., ::-1] * 1.5) + 0.25


def built_residual(normalize_first, kind="keras", epsilon=1e-6, weights_seed=0, **kwargs):
    residual = Residual(normalize_first, layer_norm=kind, epsilon=epsilon, **kwargs)
    residual.build((2, 5, D))
    rng = np.random.default_rng(weights_seed)
    residual.set_weights([rng.normal(size=w.shape).astype("float32")
                          for w in residual.get_weights()])
    return residual


def inputs(seed, shape=(2, 5, D)):
    return (np.random.default_rng(seed).normal(size=shape) * 2 + 0.5).astype("float32")


@pytest.mark.parametrize("kind", ["keras", "mcan"])
@pytest.mark.parametrize("normalize_first", [True, False])
def test_residual_matches_numpy(normalize_first, kind):
    residual = built_residual(normalize_first, kind, epsilon=1e-3)
    gamma, beta = (to_np(w) for w in residual.norm.weights)
    x = inputs(1)
    x64 = x.astype(np.float64)
    fed = to_np(residual.sublayer_input(x))
    out = to_np(residual(x, ops.convert_to_tensor(sublayer(fed), "float32")))
    if normalize_first:
        normed = layer_norm(x64, gamma, beta, 1e-3, kind)
        np.testing.assert_allclose(fed, normed, rtol=1e-5, atol=1e-5)
        expected = x64 + sublayer(normed)
    else:
        np.testing.assert_allclose(fed, x64)  # the sublayer reads x itself
        expected = layer_norm(x64 + sublayer(x64), gamma, beta, 1e-3, kind)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_the_two_orders_differ():
    """Not vacuous: with the same weights the orders give other outputs."""
    pre, post = built_residual(True), built_residual(False)
    x = inputs(2)
    y = sublayer(x).astype("float32")
    assert np.abs(to_np(pre(x, y)) - to_np(post(x, y))).max() > 0.1


def test_residual_dropout_is_on_the_sublayer_output_only():
    x = inputs(3)
    y = sublayer(x).astype("float32")
    pre = built_residual(True, dropout=0.5, seed=3)
    np.testing.assert_allclose(to_np(pre(x, y)), x + y.astype(np.float64), rtol=1e-6)
    kept = to_np(pre(x, y, training=True)) - x.astype(np.float64)
    # Inverted dropout: each sublayer output is dropped or scaled by 2; x is kept.
    dropped = np.isclose(kept, 0.0, atol=1e-6)
    scaled = np.isclose(kept, 2 * y, rtol=1e-5, atol=1e-5)
    assert (dropped | scaled).all()
    assert dropped.any() and scaled.any()
    # Post-norm: the norm of the same sum (an equally seeded dropout draws the
    # same mask at its first call).
    post = built_residual(False, dropout=0.5, seed=3)
    gamma, beta = (to_np(w) for w in post.norm.weights)
    same_sum = to_np(built_residual(True, dropout=0.5, seed=3)(x, y, training=True))
    np.testing.assert_allclose(to_np(post(x, y, training=True)),
                               layer_norm(same_sum, gamma, beta, 1e-6, "keras"),
                               rtol=1e-4, atol=1e-4)


def test_residual_seeded_dropout_is_reproducible():
    x = inputs(4)
    y = sublayer(x).astype("float32")
    a = to_np(Residual(True, dropout=0.3, seed=7)(x, y, training=True))
    b = to_np(Residual(True, dropout=0.3, seed=7)(x, y, training=True))
    c = to_np(Residual(True, dropout=0.3, seed=8)(x, y, training=True))
    np.testing.assert_allclose(a, b)
    assert np.abs(a - c).max() > 1e-3


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_feed_forward_matches_numpy(activation):
    ffn = FeedForward(D, 10, activation=activation, dropout=0.4, seed=1)
    x = inputs(5)
    ffn(x)
    rng = np.random.default_rng(6)
    ffn.set_weights([rng.normal(size=w.shape).astype("float32") for w in ffn.get_weights()])
    w1, b1, w2, b2 = (to_np(w) for w in ffn.get_weights())
    act = (lambda t: np.maximum(t, 0.0)) if activation == "relu" else np.tanh
    expected = act(x.astype(np.float64) @ w1 + b1) @ w2 + b2
    np.testing.assert_allclose(to_np(ffn(x)), expected, rtol=1e-5, atol=1e-4)
    # Dropout (training only) acts on the hidden layer, before the output Dense.
    assert np.abs(to_np(ffn(x, training=True)) - expected).max() > 1e-3
    assert [w.path.split("/", 1)[1] for w in ffn.weights] == [
        "hidden/kernel", "hidden/bias", "output/kernel", "output/bias"]


def test_feed_forward_output_width_and_initializers():
    init = keras.initializers.RandomNormal(stddev=0.5)
    ffn = FeedForward(4, 7, kernel_initializer=init, bias_initializer="ones")
    out = ffn(inputs(6, shape=(3, D)))
    assert out.shape == (3, 4)
    hidden_kernel = to_np(ffn.hidden_dense.kernel)
    assert hidden_kernel.shape == (D, 7) and (to_np(ffn.hidden_dense.bias) == 1).all()
    # Each Dense gets its own clone: the two kernels are not the same draw.
    output_kernel = to_np(ffn.output_dense.kernel)
    assert not np.allclose(hidden_kernel[:4, :4], output_kernel[:4, :4])


def test_config_round_trips():
    ffn = FeedForward(D, 9, activation="gelu", dropout=0.2, seed=3,
                      kernel_initializer=keras.initializers.HeNormal(seed=1))
    residual = Residual(False, dropout=0.1, layer_norm="mcan", epsilon=1e-5, seed=4)
    for layer in (ffn, residual):
        config = layer.get_config()
        clone = type(layer).from_config(config)
        assert clone.get_config() == config
        restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
        assert type(restored) is type(layer) and restored.get_config() == config


def test_keras_file_round_trip(tmp_path):
    x_in = keras.Input((5, D))
    residual = Residual(True, dropout=0.1, seed=2)
    ffn = FeedForward(D, 8, seed=3)
    y = ffn(residual.sublayer_input(x_in))
    out = Residual(False, layer_norm="mcan")(residual(x_in, y), y)
    assert out.shape == (None, 5, D)
    model = keras.Model(x_in, out)
    rng = np.random.default_rng(8)
    model.set_weights([rng.normal(size=w.shape).astype("float32") for w in model.get_weights()])
    x = inputs(9)
    expected = to_np(model(x))
    path = tmp_path / "kit.keras"
    model.save(path)
    np.testing.assert_allclose(to_np(keras.models.load_model(path)(x)), expected, atol=1e-6)


def test_mixed_precision():
    x = inputs(10)
    for normalize_first in (True, False):
        residual = Residual(normalize_first, dtype="mixed_float16")
        y = residual(x, sublayer(x).astype("float16"))
        assert keras.backend.standardize_dtype(y.dtype) == "float16"
        assert keras.backend.standardize_dtype(residual.norm.gamma.dtype) == "float32"
        reference = Residual(normalize_first)(x, sublayer(x).astype("float32"))
        np.testing.assert_allclose(to_np(y), to_np(reference), atol=2e-2, rtol=2e-2)
    out = FeedForward(D, 8, dtype="mixed_float16")(x)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"


def test_layer_normalization_kinds():
    x = inputs(11).astype(np.float64)
    for kind in ("keras", "mcan"):
        norm = layer_normalization(kind, 1e-6)
        np.testing.assert_allclose(to_np(norm(x.astype("float32"))),
                                   layer_norm(x, 1.0, 0.0, 1e-6, kind), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="layer_norm"):
        layer_normalization("torch")


# ------------------------------------------------------------ seeds, inits


def test_sub_seed_rule():
    assert sub_seed(None, 3) is None
    assert sub_seed(5, 0) == 505 and sub_seed(5, 7) == 512  # seed * 101 + index
    seeds = {sub_seed(seed, index) for seed in range(50) for index in range(101)}
    assert len(seeds) == 50 * 101  # one-to-one
    large = sub_seed(2**40, 3)
    assert 0 <= large < 2**31 - 1  # stays a valid int32 seed
    for index in (-1, 101, 1.0, True):
        with pytest.raises(ValueError, match="index"):
            sub_seed(1, index)


def test_clone_initializer():
    unseeded = keras.initializers.GlorotUniform()
    clone = clone_initializer(unseeded)
    assert clone is not unseeded and clone.get_config() == unseeded.get_config()
    # One instance repeats its draw; a clone draws anew (why layers get clones).
    np.testing.assert_allclose(to_np(unseeded((4, 4))), to_np(unseeded((4, 4))))
    assert np.abs(to_np(clone((4, 4))) - to_np(unseeded((4, 4)))).max() > 1e-3
    seeded = keras.initializers.RandomNormal(seed=3)
    np.testing.assert_allclose(to_np(clone_initializer(seeded)((3,))), to_np(seeded((3,))))
    assert clone_initializer("zeros") == "zeros"


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((10, 4), {}, "divisible"),
        ((0, 1), {}, "hidden_size"),
        ((8, 0), {}, "num_heads"),
        ((8, 2, 0), {}, "filter_size"),
        ((8, 2), dict(layer_dropout=1.0), "layer_dropout"),
    ],
)
def test_check_sizes(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        check_sizes(*args, **kwargs)
    assert check_sizes(8, 2, 16, relu_dropout=0) == {"relu_dropout": 0.0}
