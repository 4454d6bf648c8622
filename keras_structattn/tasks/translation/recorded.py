"""The batches of a `tf.data` pipeline, recorded once and replayed without TensorFlow.

JAX users on an accelerator machine without TensorFlow (or a cluster where
input pipelines run elsewhere) can still train on exactly the batches that
`make_translation_dataset` would feed: record them where TensorFlow is, and
replay them with NumPy alone. A recording is small because it holds the
tokenised corpus once plus, for each batch, its padded length and the
indices of its examples:

    corpus = tokenize_pairs(pairs, vocab, vocab)  # the ids the pipeline reads
    dataset, _ = make_tokenized_dataset(corpus, repeat=True, ...)
    save_recording("train.npz", corpus, dataset.take(steps))
    batches = load_recording("train.npz")         # no TensorFlow needed
    model.fit(batches.iterate(start=0), steps_per_epoch=..., ...)
"""

import os

import keras
import numpy as np

from keras_structattn.data._tensorflow import tf
from keras_structattn.decoding.tokens import PAD_ID
from keras_structattn.tasks.translation.batching import TokenizedPairs


def _key(ids):
    """A row without its padding, as a hashable key."""
    ids = np.asarray(ids)
    return tuple(ids[ids != PAD_ID].tolist())


def save_recording(path, corpus, batches):
    """Records `batches` of the translation pipeline as indices into `corpus`.

    The file is written under a temporary name and renamed into place: it
    is whole or absent.

    Args:
        path: the `.npz` file to write.
        corpus: the tokenised pairs the pipeline read: the
            `TokenizedPairs` it was made from (`tokenize_pairs`), or a list
            of `(source_ids, target_ids)` with EOS appended (as the
            pipeline appends it).
        batches: an iterable of the pipeline's elements,
            `((source, decoder_inputs), target)`, each `[batch, length]`.

    Returns:
        The number of batches recorded.

    Raises:
        ValueError: a row of a batch is not a pair of `corpus`.
    """
    if not isinstance(corpus, TokenizedPairs):
        corpus = TokenizedPairs.from_lists(corpus)
    index = {}
    for i in range(len(corpus)):
        source, target = corpus[i]
        # Identical pairs are interchangeable: any of their indices will do.
        index.setdefault((_key(source), _key(target)), i)
    lengths, rows, indices = [], [0], []
    for step, ((source, _), target) in enumerate(batches):
        source, target = np.asarray(source), np.asarray(target)
        for r in range(source.shape[0]):
            key = (_key(source[r]), _key(target[r]))
            if key not in index:
                raise ValueError(f"Row {r} of batch {step} is not a pair of `corpus`")
            indices.append(index[key])
        lengths.append((source.shape[1], target.shape[1]))
        rows.append(len(indices))
    path = os.fspath(path)
    path += "" if path.endswith(".npz") else ".npz"  # as `np.savez_compressed` names it
    folder, name = os.path.split(os.path.abspath(path))
    partial = os.path.join(folder, f".partial.{name}")
    try:
        np.savez_compressed(
            partial,
            source_tokens=corpus.source_tokens,
            source_offsets=corpus.source_offsets,
            target_tokens=corpus.target_tokens,
            target_offsets=corpus.target_offsets,
            lengths=np.asarray(lengths, np.int32).reshape(-1, 2),
            rows=np.asarray(rows, np.int64),
            indices=np.asarray(indices, np.int32),
        )
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    return len(lengths)


class Recording(keras.utils.PyDataset):
    """Recorded batches, rebuilt with NumPy (see `save_recording`).

    A `keras.utils.PyDataset`, so a recording of validation batches can be
    passed to `fit(validation_data=...)` as is; for training, `iterate`
    gives a generator that `fit` reads on across epochs.

    Args:
        arrays: the arrays of a recording file.
    """

    def __init__(self, arrays):
        super().__init__()
        self._arrays = {name: np.asarray(arrays[name]) for name in arrays}

    def __len__(self):
        return len(self._arrays["lengths"])

    def __getitem__(self, step):
        return self.batch(step)

    def _tokens(self, side, i):
        offsets = self._arrays[f"{side}_offsets"]
        return self._arrays[f"{side}_tokens"][offsets[i] : offsets[i + 1]]

    def batch(self, step):
        """Batch `step`: `((source, decoder_inputs), target)`, int32, as the
        pipeline gave it."""
        a = self._arrays
        members = a["indices"][a["rows"][step] : a["rows"][step + 1]]
        source_length, target_length = (int(n) for n in a["lengths"][step])
        source = np.full((len(members), source_length), PAD_ID, np.int32)
        target = np.full((len(members), target_length), PAD_ID, np.int32)
        for r, i in enumerate(members):
            s, t = self._tokens("source", i), self._tokens("target", i)
            source[r, : len(s)] = s
            target[r, : len(t)] = t
        # Teacher forcing: the targets shifted right by one, PAD first (the
        # pipeline's `to_model_io`).
        decoder_inputs = np.pad(target[:, :-1], ((0, 0), (1, 0)), constant_values=PAD_ID)
        return (source, decoder_inputs), target

    def iterate(self, start=0, stop=None):
        """Yields the batches `start`, `start + 1`, ... up to `stop` (default:
        all), e.g. to resume after `start` steps."""
        for step in range(start, len(self) if stop is None else stop):
            yield self.batch(step)

    def to_tf_dataset(self, start=0, stop=None):
        """`iterate` as a `tf.data.Dataset` (needs TensorFlow).

        On the TensorFlow backend, `fit` infers a Python generator's shapes
        from its first two batches and rejects later batches of another
        length; this spells the shapes out instead.
        """
        spec = tf.TensorSpec([None, None], tf.int32)
        return tf.data.Dataset.from_generator(
            lambda: self.iterate(start, stop), output_signature=((spec, spec), spec)
        )


def load_recording(path):
    """Reads a file written by `save_recording`.

    Args:
        path: the `.npz` file.

    Returns:
        A `Recording`.
    """
    with np.load(path) as arrays:
        return Recording(arrays)
