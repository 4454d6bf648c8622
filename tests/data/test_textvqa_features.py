"""TextVQA image features (`ImageFeatures`, the two layouts and their
errors), M4C's OCR features, the random graph and `M4CBatches`."""

import pickle

import numpy as np
import pytest

from keras_structattn.data.feature_formats import open_region_features
from keras_structattn.ops import relation_tables
from keras_structattn.tasks.textvqa import batches
from keras_structattn.tasks.textvqa import features
from keras_structattn.tasks.textvqa import ocr_stores
from keras_structattn.tasks.textvqa.phoc import PHOC_DIM
from keras_structattn.tasks.textvqa.textvqa import AnswerWordVocab
from keras_structattn.tasks.textvqa.textvqa import TextVQARecord
from keras_structattn.training.hparams import HParams


def record(qid=1, ocr=("stop", "here"), path="features_train.npz", index=0, answers=()):
    return TextVQARecord(qid, 7, None, "what?", ["what"], list(ocr),
                         np.tile(np.array([[0.1, 0.1, 0.3, 0.2]], "float32"), (len(ocr), 1)),
                         list(answers), feature_path=path, feature_index=index)


@pytest.fixture
def stacked(tmp_path):
    np.savez(tmp_path / "features_train.npz", obj_features=np.ones((1, 3, 4), "float32"),
             obj_boxes=np.full((1, 3, 4), 0.5, "float32"), num_obj=np.array([2]),
             ocr_features=np.ones((1, 2, 5), "float32"), num_ocr=np.array([2]))
    (tmp_path / "textvqa").mkdir()
    return features.ImageFeatures(str(tmp_path / "textvqa" / "imdb_train.npy"))


def test_stacked_file_beside_the_imdb_folder(stacked):
    objects, boxes, ocr = stacked.of(record())
    assert objects.shape == (2, 4) and boxes.shape == (2, 4) and ocr.shape == (2, 5)
    assert stacked.problem(record()) is None
    assert "feature_index 3 is outside" in stacked.problem(record(index=3))
    assert "2 OCR feature rows for 1 OCR tokens" in stacked.problem(record(ocr=("a",)))
    assert "no feature file" in stacked.problem(record(path="missing.npz"))


def test_an_object_store_keyed_by_name_and_an_ocr_folder(tmp_path):
    """Object features from a region store opened with `name_ids` (the
    image ids are names: "7" as the file's name, not the int 7); its
    errors become the question's problem."""
    objects, ocr = tmp_path / "objects", tmp_path / "ocr"
    objects.mkdir()
    ocr.mkdir()
    np.savez(objects / "7.npz", features=np.ones((1, 4)), boxes=[[10, 20, 50, 40]],
             image_w=100, image_h=80)
    np.savez(objects / "8.npz", features=np.ones((1, 4)), boxes=[[10, 20, 50, 40]])
    np.savez(ocr / "7.npz", features=np.ones((2, 3)))
    store = features.ImageFeatures(
        str(tmp_path / "imdb.npy"),
        open_region_features(objects, "bottom_up_npz", name_ids=True), str(ocr))
    _, boxes, _ = store.of(record(path=None))
    np.testing.assert_allclose(boxes, [[0.1, 0.25, 0.5, 0.5]])
    unsized = record(path=None)._replace(image_id="8")
    assert "boxes must lie in [0, 1]" in store.problem(unsized)
    assert "no object features for image 9" in store.problem(unsized._replace(image_id=9))


def test_ocr_features_are_unit_parts():
    vectors = features.OcrWordVectors.__new__(features.OcrWordVectors)
    vectors.dim, vectors.rows = 2, {"stop": np.array([3.0, 4.0], "float32")}
    out = features.ocr_features(["stop", "zz"], np.full((2, 3), 2.0), vectors)
    assert out.shape == (2, 2 + PHOC_DIM + 3)
    np.testing.assert_allclose(out[:, :2], [[0.6, 0.8], [0.0, 0.0]])
    np.testing.assert_allclose(np.linalg.norm(out[:, 2:2 + PHOC_DIM], axis=1), 1.0, rtol=1e-5)


def test_ocr_order_vectors_are_one_hot_reading_positions():
    tokens, appearance = ["open", "late", "now"], np.full((3, 3), 2.0)
    plain = features.ocr_features(tokens, appearance)
    ordered = features.ocr_features(tokens, appearance, order_size=5)
    np.testing.assert_array_equal(ordered[:, :-5], plain)
    np.testing.assert_array_equal(ordered[:, -5:], [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0],
                                                    [0, 0, 1, 0, 0]])
    with pytest.raises(ValueError, match="order_size"):
        features.ocr_features(tokens, appearance, order_size=2)


def test_random_graph_keeps_the_implicit_and_blocked_edges():
    labels = np.array([[relation_tables.IMPLICIT, 3], [relation_tables.BLOCKED, 12]])
    drawn = features.random_graph(labels, [0, 1])
    assert drawn[0, 0] == relation_tables.IMPLICIT and drawn[1, 0] == relation_tables.BLOCKED
    assert np.all(drawn[:, 1] < relation_tables.NUM_SPATIAL_LABELS)
    np.testing.assert_array_equal(drawn, features.random_graph(labels, [0, 1]))


def test_m4c_batches(stacked):
    hparams = HParams(max_objects=3, max_ocr=4, max_question_length=2, object_feature_dim=4,
                      ocr_feature_dim=PHOC_DIM + 5, num_steps=3, distance_threshold=0.5)
    vocab = AnswerWordVocab.from_answers([["stop"]])
    records = [record(answers=["stop"] * 10)]
    data = batches.M4CBatches(records, stacked, np.array([[5, 0]]), vocab, hparams,
                              spatial=True, seed=1)
    inputs, scores, mask = data.batch(np.array([0]))
    assert inputs["object_mask"].tolist() == [[True, True, False]]
    assert inputs["ocr_mask"].tolist() == [[True, True, False, False]]
    assert inputs["relations"].shape == (1, 12, 12) and inputs["previous"].shape == (1, 3)
    assert scores.shape == (1, 3, vocab.size + 4) and mask.shape == (1, 3)
    assert data.coverage() == 1.0
    dummy = batches.dummy_inputs(hparams, spatial=True)
    assert {k: v.shape[1:] for k, v in dummy.items()} == {k: v.shape[1:]
                                                          for k, v in inputs.items()}


def test_detector_boxes_move_each_edge_by_the_jitter_times_the_side():
    rng = np.random.default_rng(0)
    corner = rng.uniform(0.2, 0.5, (4000, 2))
    side = rng.uniform(0.05, 0.3, (4000, 2))
    boxes = np.concatenate([corner, corner + side], axis=1).astype("float32")
    moved = features.detector_boxes(boxes, 0.05, ("ocr", 7))
    # The shift of each edge over its box's side (width for x, height for y):
    # standard normal times 0.05, nothing clipped here (boxes far from 0 and 1).
    sides = np.concatenate([side, side], axis=1)
    ratio = (moved.astype("float64") - boxes) / sides
    assert abs(ratio.std() - 0.05) < 0.003 and abs(ratio.mean()) < 0.003
    assert np.abs(ratio).max() <= 0.15 + 1e-5  # cut at 3 standard deviations
    # Edges move independently: x1's shift says nothing about x2's.
    assert abs(np.corrcoef(ratio[:, 0], ratio[:, 2])[0, 1]) < 0.05
    # Mean IoU with the drawn box: a well-localised detection.
    inter = np.prod(np.clip(np.minimum(moved[:, 2:], boxes[:, 2:])
                            - np.maximum(moved[:, :2], boxes[:, :2]), 0, None), axis=1)
    areas = [np.prod(b[:, 2:] - b[:, :2], axis=1) for b in (moved, boxes)]
    iou = inter / (areas[0] + areas[1] - inter)
    assert 0.8 < iou.mean() < 0.95


def test_detector_boxes_are_one_detection_per_key_and_stay_boxes():
    boxes = np.array([[0.0, 0.0, 0.01, 1.0], [0.5, 0.5, 0.5, 0.5], [0.9, 0.2, 1.0, 0.3]],
                     "float32")
    a = features.detector_boxes(boxes, 0.5, ("ocr", "img7"))
    np.testing.assert_array_equal(a, features.detector_boxes(boxes, 0.5, ("ocr", "img7")))
    assert not np.array_equal(a, features.detector_boxes(boxes, 0.5, ("ocr", "img8")))
    assert np.all((a >= 0) & (a <= 1)) and np.all(a[:, 2:] >= a[:, :2])
    np.testing.assert_array_equal(a[1], boxes[1])  # a point has no side to err by
    np.testing.assert_array_equal(features.detector_boxes(boxes, 0.0, ("ocr", 1)), boxes)
    with pytest.raises(ValueError, match="jitter"):
        features.detector_boxes(boxes, -0.1, ("ocr", 1))


def test_m4c_and_sa_m4c_batches_have_the_same_targets_and_detected_boxes(stacked):
    hparams = HParams(max_objects=3, max_ocr=4, max_question_length=2, object_feature_dim=4,
                      ocr_feature_dim=PHOC_DIM + 5, num_steps=3, distance_threshold=0.5,
                      box_jitter=0.05)
    # "stop here": both words in the vocabulary and among the OCR tokens, so
    # that M4C's own targets (one sampled index per step) would differ.
    vocab = AnswerWordVocab.from_answers([["stop here"]])
    records = [record(qid=q, answers=["stop here"] * 10) for q in (1, 2)]
    made = {spatial: batches.M4CBatches(records, stacked, np.array([[5, 0], [5, 0]]), vocab,
                                        hparams, spatial=spatial, seed=1).batch(np.arange(2))
            for spatial in (False, True)}
    (plain, plain_scores, plain_mask), (sa, sa_scores, sa_mask) = made[False], made[True]
    np.testing.assert_array_equal(plain_scores, sa_scores)
    np.testing.assert_array_equal(plain_mask, sa_mask)
    np.testing.assert_array_equal(plain["previous"], sa["previous"])
    # Step 1 ("here") has every index that writes it on: the vocabulary's and the copy's.
    here = vocab.index("here")
    assert here > 2 and plain_scores[0, 1, [here, vocab.size + 1]].tolist() == [1, 1]
    for key in ("object_boxes", "ocr_boxes"):
        np.testing.assert_array_equal(plain[key], sa[key])
        # Both questions are of image 7: one detection, not the drawn boxes.
        np.testing.assert_array_equal(plain[key][0], plain[key][1])
    np.testing.assert_array_equal(
        plain["ocr_boxes"][0, :2],
        features.detector_boxes(records[0].ocr_boxes, 0.05, ("ocr", 7)))
    assert not np.allclose(plain["ocr_boxes"][0, :2], records[0].ocr_boxes)


# ------------------------------------------- OCR features (`ocr_stores`)


def write_mmf_ocr(folder, image_id, tokens, dim=3, value=1.0):
    """One image as mmf's `extract_ocr_frcn_feature.py` saves it: the
    features `<id>.npy`, then `<id>_info.npy` = {ocr_boxes, ocr_tokens}."""
    folder.mkdir(exist_ok=True)
    np.save(folder / f"{image_id}_info.npy",
            {"ocr_boxes": np.zeros((len(tokens), 4)), "ocr_tokens": list(tokens)})
    np.save(folder / f"{image_id}.npy", np.full((len(tokens), dim), value, np.float32))


def test_mmf_ocr_folder_is_detected_and_read_in_the_imdbs_order(tmp_path):
    ocr = tmp_path / "ocr_en_frcn_features"
    write_mmf_ocr(ocr, "7", ["stop", "here"], value=2.0)
    write_mmf_ocr(ocr, "8", [])  # mmf writes [0, 2048] for an image without OCR
    store = ocr_stores.OcrFeatures(ocr)
    assert store.ocr_format == "mmf_npy" and len(store) == 2 and "7" in store
    rows, where = store.features("7", ["stop", "here"])
    np.testing.assert_array_equal(rows, np.full((2, 3), 2.0))
    assert where.endswith("7.npy")
    assert store.features("8", [])[0].shape == (0, 3)
    with pytest.raises(ValueError, match="not the imdb's"):
        store.features("7", ["here", "stop"])  # another OCR system's tokens
    with pytest.raises(ValueError, match="no OCR features for image 9"):
        store.features("9", ["a"])


def test_mmf_ocr_lmdb_keyed_by_the_files_path(tmp_path):
    """As mmf's `lmdb_conversion.py` packs the folder: keys are the files'
    paths in it without `.npy`, values dicts with `features` (and its
    object-feature fields, None here), plus mmf's own `b"keys"`."""
    lmdb = pytest.importorskip("lmdb")
    path = tmp_path / "ocr_en_frcn_features.lmdb"
    env = lmdb.open(str(path), map_size=1 << 22)
    with env.begin(write=True) as txn:
        item = {"feature_path": "train_images/7", "features": np.ones((2, 3), np.float32),
                "bbox": None, "num_boxes": None, "image_width": None, "image_height": None}
        txn.put(b"train_images/7", pickle.dumps(item))
        txn.put(b"keys", pickle.dumps([b"train_images/7"]))
    env.close()
    store = ocr_stores.OcrFeatures(path)
    assert store.ocr_format == "mmf_lmdb" and len(store) == 1
    assert store.features("7", ["stop", "here"])[0].shape == (2, 3)
    store.close()


def test_ocr_layouts_are_never_guessed(tmp_path):
    both = tmp_path / "both"
    write_mmf_ocr(both, "7", ["a"])
    np.savez(both / "8.npz", features=np.ones((1, 3)))
    with pytest.raises(ValueError, match="both per-image .npy"):
        ocr_stores.OcrFeatures(both)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no per-image .npy"):
        ocr_stores.OcrFeatures(tmp_path / "empty")
    flat = tmp_path / "flat"
    flat.mkdir()
    np.save(flat / "7.npy", np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"\[T, C\]"):
        ocr_stores.OcrFeatures(flat).features("7", ["a", "b", "c"])


def test_image_features_pair_mmf_objects_with_mmf_ocr(tmp_path):
    """The recipe's real-data path: the row-count check and the token
    check become the question's problem, naming the file."""
    objects = tmp_path / "objects"
    objects.mkdir()
    np.savez(objects / "7.npz", features=np.ones((1, 4)), boxes=[[0.1, 0.2, 0.5, 0.4]])
    write_mmf_ocr(tmp_path / "ocr", "7", ["stop", "here"])
    store = features.ImageFeatures(
        str(tmp_path / "imdb.npy"),
        open_region_features(objects, "bottom_up_npz", name_ids=True), str(tmp_path / "ocr"))
    good = record(path=None)._replace(image_id="7")
    assert store.problem(good) is None
    assert store.of(good)[2].shape == (2, 3)
    problem = store.problem(good._replace(ocr_tokens=["stop", "here", "now"]))
    assert "question 1" in problem and "not the imdb's" in problem and "7.npy" in problem
