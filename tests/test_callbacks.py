"""Atomic epoch checkpoints and resuming from them."""

import os

import keras
import numpy as np
import pytest

from keras_structattn.training.callbacks import EpochCheckpoints
from keras_structattn.training.callbacks import list_checkpoints
from keras_structattn.training.callbacks import restore_latest
from keras_structattn.training.callbacks import save_weights_atomically


def make_model(seed=0):
    keras.utils.set_random_seed(seed)
    # Dropout, so that resuming must also restore the dropout seed stream.
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"),
                              keras.layers.Dropout(0.3, seed=seed), keras.layers.Dense(2)])
    model.compile(keras.optimizers.Adam(0.01), "mse")
    return model


def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(32, 3)).astype("float32"), rng.normal(size=(32, 2)).astype("float32")


def fit(model, epochs, directory, initial_epoch=0, keep=None):
    x, y = data()
    return model.fit(x, y, batch_size=8, epochs=epochs, initial_epoch=initial_epoch,
                     shuffle=False, verbose=0,
                     callbacks=[EpochCheckpoints(str(directory), keep=keep)])


def assert_same_state(a, b):
    # model.variables: the weights and the dropout seed states.
    for u, v in zip(a.variables, b.variables):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(u),
                                      keras.ops.convert_to_numpy(v))
    for u, v in zip(a.optimizer.variables, b.optimizer.variables):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(u),
                                      keras.ops.convert_to_numpy(v))


def test_one_checkpoint_per_epoch_newest_kept(tmp_path):
    model = make_model()
    fit(model, 5, tmp_path, keep=2)
    assert [epoch for epoch, _ in list_checkpoints(tmp_path)] == [4, 5]
    assert sorted(os.listdir(tmp_path)) == ["ckpt-0004.weights.h5", "ckpt-0005.weights.h5"]


def test_restore_gives_weights_optimizer_state_and_epoch(tmp_path):
    model = make_model()
    fit(model, 3, tmp_path)
    fresh = make_model(seed=1)
    assert restore_latest(fresh, tmp_path) == 3
    assert int(keras.ops.convert_to_numpy(fresh.optimizer.iterations)) == 3 * 4
    assert_same_state(fresh, model)


def test_plain_weights_files_still_restore(tmp_path):
    """A checkpoint without seed states (plain `save_weights`) loads; the
    dropout streams then start afresh."""
    model = make_model()
    fit(model, 1, tmp_path)
    model.save_weights(str(tmp_path / "ckpt-0002.weights.h5"))
    fresh = make_model(seed=1)
    assert restore_latest(fresh, tmp_path) == 2
    for u, v in zip(model.get_weights(), fresh.get_weights()):
        np.testing.assert_array_equal(u, v)


def test_no_checkpoint_means_epoch_zero(tmp_path):
    model = make_model()
    before = model.get_weights()
    assert restore_latest(model, tmp_path / "nothing") == 0
    for u, v in zip(before, model.get_weights()):
        np.testing.assert_array_equal(u, v)


def test_resumed_fit_equals_an_uninterrupted_one(tmp_path):
    straight = make_model()
    fit(straight, 4, tmp_path / "straight")

    first = make_model()
    fit(first, 2, tmp_path / "resumed")
    resumed = make_model(seed=1)  # a new process: different initial weights
    start = restore_latest(resumed, tmp_path / "resumed")
    history = fit(resumed, 4, tmp_path / "resumed", initial_epoch=start)
    assert start == 2 and len(history.history["loss"]) == 2
    assert_same_state(resumed, straight)


def test_truncated_newest_checkpoint_falls_back_to_the_one_before(tmp_path):
    model = make_model()
    fit(model, 2, tmp_path)
    at_two = [w.copy() for w in model.get_weights()]
    fit(model, 3, tmp_path, initial_epoch=2)
    newest = tmp_path / "ckpt-0003.weights.h5"
    # What an in-place writer leaves when it is killed: the start of a file.
    newest.write_bytes(newest.read_bytes()[:96])
    fresh = make_model(seed=1)
    with pytest.warns(UserWarning, match="ckpt-0003"):
        assert restore_latest(fresh, tmp_path) == 2
    for u, v in zip(at_two, fresh.get_weights()):
        np.testing.assert_array_equal(u, v)


def test_a_kill_during_a_save_leaves_the_checkpoints_intact(tmp_path, monkeypatch):
    model = make_model()
    fit(model, 1, tmp_path)
    target = tmp_path / "ckpt-0002.weights.h5"

    def killed_while_writing(path, overwrite=True):
        with open(path, "wb") as f:
            f.write(b"\x89HDF\r\n")  # half a file, then the process dies
        raise KeyboardInterrupt

    monkeypatch.setattr(model, "save_weights", killed_while_writing)
    with pytest.raises(KeyboardInterrupt):
        save_weights_atomically(model, str(target))
    assert not target.exists()
    assert [epoch for epoch, _ in list_checkpoints(tmp_path)] == [1]
    # The partial file is not a checkpoint, and the next save replaces it.
    assert restore_latest(make_model(seed=1), tmp_path) == 1
    monkeypatch.undo()
    save_weights_atomically(model, str(target))
    assert [epoch for epoch, _ in list_checkpoints(tmp_path)] == [1, 2]
    assert sorted(os.listdir(tmp_path)) == ["ckpt-0001.weights.h5", "ckpt-0002.weights.h5"]


@pytest.mark.parametrize("keep", [0, -1, 2.5, "5"])
def test_bad_keep_is_named(keep):
    with pytest.raises(ValueError, match="keep"):
        EpochCheckpoints("somewhere", keep=keep)


def test_bad_path_is_named(tmp_path):
    with pytest.raises(ValueError, match="weights.h5"):
        save_weights_atomically(make_model(), str(tmp_path / "model.h5"))


def test_unbuilt_model_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="built"):
        restore_latest(keras.Sequential([keras.layers.Dense(2)]), tmp_path)


def test_epoch_time_logs_wall_seconds_and_cpu_use():
    """`EpochTime` puts each epoch's wall seconds and CPU seconds per wall
    second into the logs (the history CSV's columns), with no batch hook."""
    from keras_structattn.training.callbacks import EpochTime

    model = make_model()
    x, y = data()
    timer = EpochTime()
    history = model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[timer])
    assert len(history.history["epoch_seconds"]) == 2
    assert all(s > 0 for s in history.history["epoch_seconds"])
    # Busy CPU per wall second: positive, and at most one per core (plus
    # rounding of the process clock).
    assert all(0 < c <= os.cpu_count() + 0.5 for c in history.history["cpu_per_wall"])
    assert type(timer).on_train_batch_end is keras.callbacks.Callback.on_train_batch_end
