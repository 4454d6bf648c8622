"""The training support the recipes use (`keras_structattn.training`): run
folder files written whole, `restarting` streams, the writers of process 0
the custom-step loop and its progress bar."""

import json
import os

import keras
import numpy as np
import pytest

from keras_structattn.training.callbacks import EpochCheckpoints
from keras_structattn.training.callbacks import fit_custom_steps
from keras_structattn.training.distribution import Replicas
from keras_structattn.training.distribution import chief_writers
from keras_structattn.training.distribution import restarting
from keras_structattn.training.run_folder import RunFolder
from keras_structattn.training.run_folder import write_atomically
from keras_structattn.training.run_folder import write_json


def test_written_files_get_the_users_permissions_not_0600(tmp_path):
    previous = os.umask(0o022)
    try:
        write_atomically(tmp_path / "scores.json", "{}\n")
        write_json(tmp_path / "vocab.json", {"words": []})
        assert (tmp_path / "scores.json").stat().st_mode & 0o777 == 0o644
        assert (tmp_path / "vocab.json").stat().st_mode & 0o777 == 0o644
        os.umask(0o077)
        write_atomically(tmp_path / "private.txt", "x")
        assert (tmp_path / "private.txt").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(previous)


def test_write_atomically_writes_text_bytes_and_callables(tmp_path):
    write_atomically(tmp_path / "a.txt", "é\n")
    write_atomically(tmp_path / "b.bin", b"\x00\x01")
    write_atomically(tmp_path / "c.weights.h5", lambda partial: open(partial, "w").close())
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "é\n"
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.bin", "c.weights.h5"]


def test_a_failed_write_leaves_the_old_file_and_no_partial(tmp_path):
    write_json(tmp_path / "x.json", {"b": 1, "a": [2]})
    assert (tmp_path / "x.json").read_text() == '{\n  "b": 1,\n  "a": [\n    2\n  ]\n}\n'

    def fails(partial):
        with open(partial, "w") as f:
            f.write("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(tmp_path / "x.json", fails)
    assert os.listdir(tmp_path) == ["x.json"]
    assert json.loads((tmp_path / "x.json").read_text()) == {"b": 1, "a": [2]}


def test_a_run_exists_once_committed(tmp_path):
    run = RunFolder(tmp_path / "run")
    assert not run.holds_run and run.settings() is None
    run.commit({"seed": 3}, {"hparams.json": "{}\n"})
    assert run.holds_run and run.settings() == {"seed": 3}
    assert os.path.exists(run.file("hparams.json"))


def test_averaged_weights_are_used_only_if_they_average_the_newest(tmp_path):
    run = RunFolder(tmp_path)
    assert run.averaged_weights("ckpt-0002.weights.h5") == (None, None)
    (tmp_path / "averaged.weights.h5").write_bytes(b"")
    run.save_average_list(["x/ckpt-0001.weights.h5", "x/ckpt-0002.weights.h5"])
    assert run.averaged_weights("x/ckpt-0002.weights.h5") == (run.file("averaged.weights.h5"),
                                                              None)
    path, note = run.averaged_weights("x/ckpt-0003.weights.h5")
    assert path is None and "older than the newest checkpoint ckpt-0003" in note


def test_restarting_reads_a_new_stream_for_each_iterator():
    made = []

    def make():
        made.append(1)
        return iter([{"x": np.full((2, 3), k, "float32")} for k in range(3)])

    dataset = restarting(make)
    assert [int(b["x"][0, 0]) for b in dataset.as_numpy_iterator()] == [0, 1, 2]
    assert [int(b["x"][0, 0]) for b in dataset.as_numpy_iterator()] == [0, 1, 2]
    # Short last batches, batched again to the first batch's rows.
    rows = restarting(lambda: iter([np.zeros((2, 1)), np.ones((1, 1))]), rebatch=True)
    assert [len(b) for b in rows.as_numpy_iterator()] == [2, 1]


def test_only_process_0_writes_the_run_files(tmp_path):
    assert chief_writers(Replicas(), lambda: ["writers"]) == ["writers"]
    other = chief_writers(Replicas(num_processes=2, process_id=1), lambda: ["writers"])
    assert len(other) == 1 and isinstance(other[0], EpochCheckpoints)
    assert "process-1-checkpoints-" in other[0].directory


def test_fit_custom_steps_averages_each_epochs_logs():
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    seen, epochs = [], []

    class Record(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            epochs.append((epoch, logs))

    def step(model, index):
        seen.append(index)
        return {"loss": float(index)}

    fit_custom_steps(model, step, [Record()], first_step=4, epochs=range(2, 4),
                     steps_per_epoch=2, verbose=0)
    assert seen == [4, 5, 6, 7]
    assert epochs == [(2, {"loss": 4.5}), (3, {"loss": 6.5})]


def test_a_resumed_progress_bar_times_its_own_steps():
    """A bar opened at step 50 of a resumed run: Keras' estimate would
    divide the time since it opened by 51 steps, not by the 1 it timed."""
    from keras_structattn.training.callbacks import _BarFrom

    bar = _BarFrom(100, first=50, verbose=0)
    bar._start = 0.0
    assert bar._estimate_step_duration(50, now=0.5) == 0
    assert bar._estimate_step_duration(51, now=2.0) == 2.0
    assert bar._estimate_step_duration(53, now=4.0) == 1.0  # the first step's time left out
