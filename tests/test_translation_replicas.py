"""Recorded and `tf.data` token batches split over data-parallel replicas
(`keras_structattn.tasks.translation.replicas`), and recordings written
whole or not at all."""

import os

import keras
import numpy as np

from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.tasks.translation.recorded import load_recording
from keras_structattn.tasks.translation.recorded import save_recording
from keras_structattn.tasks.translation.replicas import ReplicaRows
from keras_structattn.tasks.translation.replicas import replica_recording
from keras_structattn.tasks.translation.replicas import replica_validation
from keras_structattn.training.distribution import Replicas

CORPUS = [([3, 4, EOS_ID], [5, EOS_ID]), ([6, EOS_ID], [7, 8, EOS_ID]), ([9, EOS_ID], [EOS_ID])]


def _batch(members, length=4):
    source = np.zeros((len(members), length), "int32")
    target = np.zeros((len(members), length), "int32")
    for row, i in enumerate(members):
        s, t = CORPUS[i]
        source[row, : len(s)], target[row, : len(t)] = s, t
    return (source, np.pad(target[:, :-1], ((0, 0), (1, 0)))), target


def _recording(tmp_path):
    name = str(tmp_path / "train")  # NumPy's rule: `.npz` is added
    assert save_recording(name, CORPUS, [_batch([0, 1, 2]), _batch([2, 0])]) == 2
    assert sorted(os.listdir(tmp_path)) == ["train.npz"]  # no temporary file left
    return load_recording(name + ".npz")


def test_recorded_batches_are_padded_to_the_replicas_and_split(tmp_path):
    recording = _recording(tmp_path)
    for process, expected in ((0, [[3, 4], [6, EOS_ID]]), (1, [[9, EOS_ID], [0, 0]])):
        replicas = Replicas(num_replicas=4, num_processes=2, process_id=process)
        # tf.data on the TensorFlow backend, a generator on the others.
        batches = replica_recording(recording, replicas, start=0)
        (source, _), target = keras.tree.map_structure(np.asarray, next(iter(batches)))
        np.testing.assert_array_equal(source[:, :2], expected)
        assert target.shape == (2, 4)
    rows = ReplicaRows(recording, Replicas(num_replicas=2))
    assert len(rows) == 2
    assert [len(rows[step][1]) for step in range(2)] == [4, 2]


def test_validation_batches_keep_their_kind():
    import tensorflow as tf

    assert replica_validation(None, Replicas()) is None
    dataset = tf.data.Dataset.from_tensors(_batch([0, 1, 2]))
    fed = replica_validation(dataset, Replicas(num_replicas=2))
    (source, _), target = next(fed.as_numpy_iterator())
    assert source.shape == target.shape == (4, 4) and not target[3].any()
