"""The teacher-forced colour probe of `tasks.captioning.bias_probe`, against
log-probabilities worked out by hand from logits the test chooses."""

import numpy as np
import pytest

from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.decoding.tokens import PAD_ID
from keras_structattn.tasks.captioning import bias_probe
from keras_structattn.tasks.captioning.coco_captions import ImageCaptions

BIAS = ("circle", "red")
SCENES = [
    {"image_id": 1, "shapes": [{"shape": "circle", "color": "blue"},
                               {"shape": "square", "color": "red"}]},   # conflict
    {"image_id": 2, "shapes": [{"shape": "circle", "color": "red"}]},   # biased pair present
    {"image_id": 3, "shapes": [{"shape": "square", "color": "green"}]},  # no circle
    {"image_id": 4, "shapes": [{"shape": "circle", "color": "green"},
                               {"shape": "circle", "color": "blue"}]},  # conflict
]
CAPTIONS = {
    1: ["a small blue circle left of a red square", "one shape and a red square"],
    2: ["a red circle"],
    3: ["a green square"],
    4: ["two circles", "a green circle and a large blue circle"],
}


def test_conflict_images_and_probe_positions():
    assert bias_probe.conflict_images(SCENES, BIAS) == {1, 4}
    words = "a green circle and a large blue circle".split()
    assert bias_probe.probe_positions(words, BIAS) == [(1, "green"), (6, "blue")]
    # Plurals count; a colour before another shape does not.
    assert bias_probe.probe_positions("two green circles".split(), BIAS) == [(1, "green")]
    assert bias_probe.probe_positions("a red square".split(), BIAS) == []


def test_log_odds_are_those_of_the_logits_at_each_colour_word():
    records = [ImageCaptions(i, f"{i}.png", c, [t.split() for t in c])
               for i, c in CAPTIONS.items()]
    vocab = WordVocab.build([t for r in records for t in r.tokens], min_count=1)
    rng = np.random.default_rng(0)
    calls = []

    def logits_of(image_ids, decoder_inputs):
        calls.append((list(image_ids), decoder_inputs.copy()))
        return rng.normal(size=(*decoder_inputs.shape, vocab.vocab_size)).astype("float32")

    probe = bias_probe.colour_log_odds(logits_of, records, SCENES, BIAS, vocab, batch_images=1)
    # Images 1 and 4 (conflict images with a probed word), one call each.
    assert [ids for ids, _ in calls] == [[1], [4]] and probe["images"] == 2
    # Teacher forcing: PAD, then the words (image 1, caption 0).
    inputs = calls[0][1][0, 0]
    ids = vocab.encode(CAPTIONS[1][0].split())
    assert inputs[0] == PAD_ID and list(inputs[1:len(ids) + 1]) == ids
    assert EOS_ID not in inputs

    # By hand: replay the generator and read the chosen positions.
    rng = np.random.default_rng(0)
    margins, likelier = [], []
    for image, probes in ((1, [(0, 2, "blue")]), (4, [(1, 1, "green"), (1, 6, "blue")])):
        count = len(CAPTIONS[image])
        length = max(len(c.split()) for c in CAPTIONS[image]) + 1
        logits = rng.normal(size=(1, count, length, vocab.vocab_size))
        for k, position, word in probes:
            row = logits[0, k, position]
            log_p = row - np.log(np.exp(row).sum())
            true, red = log_p[vocab.encode([word])[0]], log_p[vocab.encode(["red"])[0]]
            margins.append(true - red)
            likelier.append(red > true)
    assert probe["positions"] == 3
    assert probe["log_odds"] == pytest.approx(np.mean(margins), abs=1e-5)
    assert probe["biased_preferred"] == pytest.approx(np.mean(likelier))


def test_cut_captions_and_no_positions():
    records = [ImageCaptions(4, "4.png", CAPTIONS[4], [t.split() for t in CAPTIONS[4]])]
    vocab = WordVocab.build(records[0].tokens, min_count=1)

    def logits_of(image_ids, decoder_inputs):
        return np.zeros((*decoder_inputs.shape, vocab.vocab_size), "float32")

    # Cut to 3 words, only "green" (position 1) is left; equal logits: log-odds 0.
    probe = bias_probe.colour_log_odds(logits_of, records, SCENES, BIAS, vocab, max_length=3)
    assert probe["positions"] == 1 and probe["log_odds"] == pytest.approx(0.0)
    assert probe["biased_preferred"] == 0.0
    empty = bias_probe.colour_log_odds(logits_of, records[:0], SCENES, BIAS, vocab)
    assert empty["positions"] == 0 and empty["log_odds"] is None
