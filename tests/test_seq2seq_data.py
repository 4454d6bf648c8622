"""The captioning batches and the translation corpora and training batches
that the sequence-to-sequence recipes build on."""

import numpy as np

from keras_structattn.data import image_features
from keras_structattn.data.vocab import CharVocab
from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.tasks.captioning import batches
from keras_structattn.tasks.captioning.coco_captions import ImageCaptions
from keras_structattn.tasks.translation import batching
from keras_structattn.tasks.translation import tatoeba


def _store(tmp_path, kind):
    path = tmp_path / f"{kind}.npz"
    rng = np.random.default_rng(0)
    if kind == "grid":
        np.savez(path, image_ids=np.array([1, 2]), features=rng.random((2, 2, 3, 4)))
    else:
        np.savez(path, image_ids=np.array([1, 2]), features=rng.random((2, 3, 4)),
                 boxes=np.tile([0.1, 0.1, 0.5, 0.5], (2, 3, 1)), num_boxes=np.array([3, 1]))
    return image_features.open_features(path, kind)


def test_encoder_input_of_grids_and_padded_regions(tmp_path):
    grid = batches.encoder_input(_store(tmp_path, "grid"), [2, 1], "grid")
    assert grid.shape == (2, 2, 3, 4)
    regions = batches.encoder_input(_store(tmp_path, "regions"), [2], "regions", max_regions=5)
    assert regions["features"].shape == (1, 5, 4) and regions["boxes"].shape == (1, 5, 4)
    assert regions["mask"].tolist() == [[True, False, False, False, False]]
    zeros = batches.zero_encoder_input("regions", [4])
    assert zeros["features"].shape == (1, 2, 4) and zeros["mask"].all()
    assert batches.zero_encoder_input("grid", [2, 3, 4]).shape == (1, 2, 3, 4)


def test_image_captions_batch_cycles_each_images_captions():
    vocab = WordVocab.build([["a", "red", "square", "blue", "circle"]], min_count=1)
    records = [ImageCaptions(1, "1.png", ["a red square"], [["a", "red", "square"]]),
               ImageCaptions(2, "2.png", ["a blue circle", "a circle"],
                             [["a", "blue", "circle"], ["a", "circle"]])]
    features = np.zeros((2, 1, 1, 4), "float32")
    (given, decoder_inputs), targets = batches.image_captions_batch(
        records, features, vocab, max_length=3, captions_per_image=3)
    assert given is features and decoder_inputs.shape == targets.shape == (2, 3, 4)
    assert (targets[0, 0] == targets[0, 2]).all() and (targets[1, 0] == targets[1, 2]).all()
    assert (decoder_inputs[..., 1:] == targets[..., :-1]).all()
    inputs, words = batches.teacher_forced_input(vocab, "a blue circle")
    assert words == ["a", "blue", "circle", "<eos>"]
    assert inputs.tolist() == [[0, *vocab.encode(["a", "blue", "circle"])]]


def test_corpus_pairs_cleans_files_and_reads_the_embedded_split(tmp_path):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("Hi.\tHallo\u00a0du.\n\tleer\n", encoding="utf-8")
    pairs, report = tatoeba.corpus_pairs("train", tsv=tsv)
    assert pairs == [("Hi.", "Hallo du.")] and report.empty == 1
    pairs, _ = tatoeba.corpus_pairs("dev")
    assert len(pairs) == 969


def test_training_batches_read_the_same_batches_from_any_start():
    pairs = [("ab" * (i % 4 + 1), "cd" * (i % 3 + 1)) for i in range(40)]
    vocab = CharVocab.build([s for p in pairs for s in p])
    data = batching.TrainingBatches(pairs, pairs[:8], vocab, seed=3, batch_tokens=64,
                                    max_length=16, length_bucket_step=1.5)
    assert len(data.train_tokens) == 40 and len(data.dev_tokens) == 8
    assert data.validation_steps == sum(1 for _ in data.validation)
    first = [b[1].numpy().tolist() for b in data.train().take(3)]
    assert [b[1].numpy().tolist() for b in data.train(1).take(2)] == first[1:]
    none = batching.TrainingBatches(pairs, [], vocab, seed=3, max_length=16)
    assert none.validation is None and none.validation_steps is None
