"""Recorded batches replay the `tf.data` pipeline exactly, without TensorFlow."""

import os
import subprocess
import sys

import numpy as np
import pytest

from keras_structattn.data import EOS_ID
from keras_structattn.tasks.translation import make_translation_dataset
from keras_structattn.tasks.translation.recorded import load_recording
from keras_structattn.tasks.translation.recorded import save_recording

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tokenised(pairs, vocab):
    return [(vocab.encode(s) + [EOS_ID], vocab.encode(t) + [EOS_ID]) for s, t in pairs]


@pytest.fixture
def stream(train_pairs, subword_vocab):
    """A new pipeline on each call: one iterator of a seeded pipeline gives
    the same batches as one iterator of another (a second iterator of the
    same pipeline reshuffles), which is what a recording captures."""

    def build():
        dataset, _ = make_translation_dataset(
            train_pairs, subword_vocab, subword_vocab, batch_tokens=512, max_length=24,
            shuffle=True, seed=3, repeat=True,
        )
        # Enough steps for several passes over the kept pairs (reshuffled each).
        return dataset.take(120)

    return build


def test_replay_equals_the_pipeline(stream, train_pairs, subword_vocab, tmp_path):
    path = tmp_path / "train.npz"
    assert save_recording(path, tokenised(train_pairs, subword_vocab),
                          stream().as_numpy_iterator()) == 120
    recording = load_recording(path)
    assert len(recording) == 120
    expected = list(stream().as_numpy_iterator())
    replayed = list(recording.iterate())
    assert len(replayed) == len(expected)
    for ((source, inputs), target), ((s, i), t) in zip(replayed, expected):
        for got, want in ((source, s), (inputs, i), (target, t)):
            assert got.dtype == np.int32 and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
    # Resuming part-way gives the rest of the stream; indexing gives one batch.
    rest = list(recording.iterate(start=100))
    assert len(rest) == 20
    np.testing.assert_array_equal(rest[0][1], expected[100][1])
    np.testing.assert_array_equal(recording[7][0][0], expected[7][0][0])
    # As a tf.data.Dataset (lengths vary between batches).
    for got, want in zip(recording.to_tf_dataset(start=5).as_numpy_iterator(), expected[5:]):
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[0][1], want[0][1])


def test_tokenized_pairs_record_as_lists_do(stream, train_pairs, subword_vocab, tmp_path):
    """The pipeline's own `TokenizedPairs` as the corpus: the same file as
    the Python-tokenised lists (no tie-break differs on these pairs)."""
    from keras_structattn.tasks.translation.batching import tokenize_pairs

    tokens = tokenize_pairs(train_pairs, subword_vocab, subword_vocab)
    save_recording(tmp_path / "a.npz", tokens, stream().take(20).as_numpy_iterator())
    save_recording(tmp_path / "b.npz", tokenised(train_pairs, subword_vocab),
                   stream().take(20).as_numpy_iterator())
    with np.load(tmp_path / "a.npz") as a, np.load(tmp_path / "b.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for name in a.files:
            assert a[name].dtype == b[name].dtype, name
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_rows_outside_the_corpus_are_an_error(stream, train_pairs, subword_vocab, tmp_path):
    corpus = tokenised(train_pairs, subword_vocab)[:10]
    with pytest.raises(ValueError, match="not a pair of `corpus`"):
        save_recording(tmp_path / "x.npz", corpus, stream().as_numpy_iterator())


def test_replay_needs_no_tensorflow(stream, train_pairs, subword_vocab, tmp_path):
    """In a process where `import tensorflow` fails: replay, and encode and
    decode with the vocabulary."""
    pytest.importorskip("jax")
    path = tmp_path / "train.npz"
    save_recording(path, tokenised(train_pairs, subword_vocab),
                   stream().take(3).as_numpy_iterator())
    subword_vocab.save(str(tmp_path / "vocab.model"))
    first = next(stream().as_numpy_iterator())[1]
    np.save(tmp_path / "first.npy", first)
    script = f"""
import sys
sys.modules["tensorflow"] = None  # any import of it now fails
import numpy as np
from keras_structattn.tasks.translation.recorded import load_recording
from keras_structattn.data.vocab import load_vocab
recording = load_recording({str(path)!r})
np.testing.assert_array_equal(recording.batch(0)[1], np.load({str(tmp_path / "first.npy")!r}))
vocab = load_vocab({str(tmp_path / "vocab.model")!r})
assert vocab.decode(vocab.encode("Tom is here.")) == "Tom is here."
try:
    vocab.tf_encode(["x"])
except ModuleNotFoundError as error:
    assert "TensorFlow is not installed" in str(error)
else:
    raise AssertionError("tf_encode ran without TensorFlow")
print("ok")
"""
    env = dict(os.environ, KERAS_BACKEND="jax")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")
