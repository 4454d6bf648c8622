"""Listing and averaging weight checkpoints (`keras_structattn.training.checkpoints`)."""

import os

import keras
import numpy as np
import pytest

from keras_structattn.training.callbacks import save_weights_atomically
from keras_structattn.training.checkpoints import average_checkpoints
from keras_structattn.training.checkpoints import checkpoint_paths
from keras_structattn.training.checkpoints import latest_checkpoint


class Counter(keras.layers.Layer):
    """A dense layer with an integer weight, which averaging must not touch."""

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], 3), initializer="glorot_uniform")
        self.count = self.add_weight(shape=(), dtype="int32", initializer="zeros",
                                     trainable=False)

    def call(self, x):
        return x @ self.kernel


def make_model(compiled=False):
    inputs = keras.Input((4,))
    x = keras.layers.Dense(5, activation="relu")(inputs)
    outputs = Counter()(x)
    model = keras.Model(inputs, outputs)
    if compiled:  # as in training: checkpoints then hold optimizer state too
        model.compile(optimizer="adam", loss="mse")
    return model


@pytest.fixture
def run(tmp_path):
    """A folder of 4 checkpoints with different random weights, and the
    weights each holds."""
    folder = tmp_path / "checkpoints"
    model = make_model(compiled=True)
    model.optimizer.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    saved = []
    for epoch in (1, 2, 9, 10):  # 10 sorts after 9 by epoch, not by name
        weights = [
            rng.normal(size=w.shape).astype(w.dtype) if w.dtype.kind == "f"
            else np.full(w.shape, epoch, w.dtype)
            for w in model.get_weights()
        ]
        model.set_weights(weights)
        save_weights_atomically(model, str(folder / f"ckpt-{epoch:04d}.weights.h5"))
        saved.append(weights)
    return folder, saved


def test_paths_oldest_first_and_latest(run, tmp_path):
    folder, _ = run
    (folder / "notes.txt").write_text("not a checkpoint")
    names = [os.path.basename(p) for p in checkpoint_paths(folder)]
    assert names == ["ckpt-0001.weights.h5", "ckpt-0002.weights.h5",
                     "ckpt-0009.weights.h5", "ckpt-0010.weights.h5"]
    assert os.path.basename(latest_checkpoint(folder)) == "ckpt-0010.weights.h5"
    assert checkpoint_paths(tmp_path / "none") == []
    with pytest.raises(FileNotFoundError, match="none"):
        latest_checkpoint(tmp_path / "none")


@pytest.mark.parametrize("last", [1, 2, 4])
def test_average_is_the_numpy_mean(run, last):
    folder, saved = run
    model = make_model()
    averaged = average_checkpoints(model, checkpoint_paths(folder)[-last:])
    kept = saved[-last:]
    for i, (got, held) in enumerate(zip(averaged, model.get_weights())):
        np.testing.assert_array_equal(got, held)  # the model holds the average
        if got.dtype.kind == "f":
            want = np.mean(np.stack([w[i] for w in kept]).astype(np.float64), axis=0)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
            assert got.dtype == kept[0][i].dtype
        else:
            np.testing.assert_array_equal(got, kept[-1][i])  # the last one's counter
    if last > 1:  # an average differs from every single checkpoint
        assert not np.allclose(averaged[0], kept[-1][0])


def test_average_ignores_order(run):
    folder, _ = run
    paths = checkpoint_paths(folder)
    forward = average_checkpoints(make_model(), paths)
    backward = average_checkpoints(make_model(), paths[::-1])
    for a, b in zip(forward, backward):
        if a.dtype.kind == "f":
            np.testing.assert_array_equal(a, b)


def test_average_needs_paths_and_a_built_model(run):
    folder, _ = run
    with pytest.raises(ValueError, match="at least one"):
        average_checkpoints(make_model(), [])
    with pytest.raises(ValueError, match="built"):
        average_checkpoints(keras.Sequential([keras.layers.Dense(2)]), checkpoint_paths(folder))
