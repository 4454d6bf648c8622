"""The captioning helpers of `keras_structattn.tasks.captioning` (score and
hallucination tables, COCO annotations and results, batched decoding,
attention pictures) and `self_critical.self_critical_batch`."""

import numpy as np
import pytest

from keras_structattn.metrics import CaptionScores
from keras_structattn.tasks.captioning import coco_captions
from keras_structattn.tasks.captioning import decode
from keras_structattn.tasks.captioning import pictures
from keras_structattn.tasks.captioning import report
from keras_structattn.training import self_critical


def test_score_table_aligns_columns_and_reports_what_was_not_computed():
    model = CaptionScores({"Bleu_1": 0.5, "CIDEr": 1.25}, {}, {"SPICE": "needs Java"}, [])
    baseline = CaptionScores({"CIDEr": 0.125}, {}, {}, [])
    lines = report.score_table({"model": model, "baseline": baseline})
    assert lines[0].split() == ["metric", "model", "baseline"]
    assert lines[1].split() == ["Bleu_1", "0.5000", "-"]
    assert lines[2].split() == ["CIDEr", "1.2500", "0.1250"]
    assert lines[3] == "SPICE      needs Java"
    assert len({len(line) for line in lines[:3]}) == 1


def test_hallucination_table_in_percent_under_the_score_columns():
    rates = {"model": {"chair_i": 0.25, "chair_s": 0.5}, "baseline": {"chair_i": 0.0}}
    lines = report.hallucination_table(rates, ["model", "cross-entropy", "baseline"])
    assert [line.split() for line in lines] == [["CHAIR_i", "25.00%", "-", "0.00%"],
                                                ["CHAIR_s", "50.00%", "-", "-"]]
    assert report.hallucination_table({}, ["model"]) == []


def test_coco_annotations_and_results():
    records = [coco_captions.ImageCaptions(7, "a.png", ["a b", "c"], [["a", "b"], ["c"]]),
               coco_captions.ImageCaptions(9, "b.png", ["d"], [["d"]])]
    annotations = coco_captions.coco_annotations(records)
    assert annotations["images"] == [{"id": 7, "file_name": "a.png"},
                                     {"id": 9, "file_name": "b.png"}]
    assert [(a["id"], a["image_id"], a["caption"]) for a in annotations["annotations"]] == [
        (0, 7, "a b"), (1, 7, "c"), (2, 9, "d")]
    assert coco_captions.coco_results([3, "42", "x1"], ["p", "q", "r"]) == [
        {"image_id": 3, "caption": "p"}, {"image_id": 42, "caption": "q"},
        {"image_id": "x1", "caption": "r"}]


class _Vocab:
    def decode(self, ids):
        return " ".join(str(i) for i in ids)


def test_caption_images_pads_the_last_batch_and_keeps_the_order():
    shapes = []

    def generate(features):
        shapes.append(features.shape)
        return features[:, None] * np.ones((1, 2), int), None

    captions = decode.caption_images(generate, _Vocab(), [1, 2, 3, 4, 5],
                                     lambda ids: np.array(ids), batch_size=2)
    assert captions == ["1 1", "2 2", "3 3", "4 4", "5 5"]
    assert shapes == [(2,), (2,), (2,)]


def test_drawn_words_are_colours_and_shapes_first():
    assert pictures.drawn_positions("a big red circle left of a blue square".split()) == [
        2, 3, 7, 8]
    assert pictures.drawn_positions(["a", "thing", "<eos>"]) == [0, 1, 2]


def test_streams_picture_has_one_row_per_drawn_word():
    pytest.importorskip("PIL")
    image = np.zeros((32, 32, 3), np.uint8)
    boxes = np.array([[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1], [0, 0, 0, 0]], np.float32)
    mask = np.array([True, True, False])
    words = ["a", "red", "circle", "<eos>"]
    weights = np.random.default_rng(0).random((2, 4, 3))  # [heads, T, R]
    alone = pictures.draw_caption_streams(image, words, boxes, mask, weights)
    both = pictures.draw_caption_streams(image, words, boxes, mask, weights, weights[0])
    bars = pictures.draw_caption_streams(image, words, boxes, mask, weights[0],
                                         np.ones((4, 8)) / 8, cs_over="dictionary")
    assert both.width > alone.width and bars.width > alone.width
    assert both.height == alone.height  # two rows: "red", "circle"


def test_self_critical_batch_rewards_samples_against_the_baseline():
    samples, length = 2, 4
    ids = np.array([[5, 1, 0, 0], [6, 6, 1, 0], [5, 1, 0, 0], [7, 1, 0, 0]], np.int32)

    def draw(features, uniforms):
        assert uniforms.shape == (2 * samples, length)
        return ids

    def reward(image_ids, tokens):
        return np.array([len(t) + 10 * i for i, t in zip(image_ids, tokens)], float)

    words = {5: "a", 6: "b", 7: "c"}.get
    uniforms = self_critical.draw_uniforms(1, 0, 2 * samples, length)
    (decoder_inputs, targets, weight), rewards = self_critical.self_critical_batch(
        draw, None, [0, 1], reward, uniforms, words)
    np.testing.assert_array_equal(rewards, [[1, 2], [11, 11]])
    assert targets.shape == decoder_inputs.shape == weight.shape == (2, samples, length)
    np.testing.assert_array_equal(targets.reshape(-1, length), ids)
    # Mean baseline: each sample's reward minus the other sample's.
    np.testing.assert_allclose(weight[0, :, 0], [-1, 1])
    np.testing.assert_allclose(weight[1, :, 0], [0, 0])

    def greedy(features):
        return np.array([[5, 5, 5, 1], [7, 1, 0, 0]]), None

    (_, _, weight), _ = self_critical.self_critical_batch(draw, None, [0, 1], reward,
                                                         uniforms, words, greedy=greedy)
    np.testing.assert_allclose(weight[:, :, 0], [[1 - 3, 2 - 3], [11 - 11, 11 - 11]])
