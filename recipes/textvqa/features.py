"""Where a TextVQA question's image features come from.

Two layouts (docs/textvqa.md, "Data"):

* an imdb entry naming a `feature_path` (relative to the imdb's folder
  or its parent: Shapes world keeps `textvqa/imdb_<split>.npy` beside
  `features_<split>.npz`) and a `feature_index`: a stacked `.npz` with `obj_features [S, N, C]`,
  `obj_boxes [S, N, 4]`, `num_obj [S]`, `ocr_features [S, T, C]`,
  `num_ocr [S]` (Shapes world's `features_<split>.npz`);
* folders of per-image `.npz` named by the image id: objects `features
  [N, C]` and `boxes [N, 4]` (normalised, or pixels with `image_w` and
  `image_h`); OCR `features [T, C]`, one row per OCR token of the imdb, in
  its order.

Every read is checked; an error names the file and the image or question.
"""

import os

import numpy as np


class FeatureError(ValueError):
    """A question whose features are missing or malformed."""


def _normalised_boxes(boxes, data, where):
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    if boxes.size and boxes.max() > 1.0 + 1e-3:
        if "image_w" not in data or "image_h" not in data:
            raise FeatureError(f"{where}: pixel boxes need image_w and image_h")
        size = np.array([data["image_w"], data["image_h"]] * 2, np.float32).reshape(4)
        boxes = boxes / size
    if not np.all(np.isfinite(boxes)):
        raise FeatureError(f"{where}: non-finite boxes")
    return np.clip(boxes, 0.0, 1.0)


class ImageFeatures:
    """The object and OCR features of imdb records.

    Args:
        imdb_path: the imdb (its folder anchors relative `feature_path`s).
        object_folder, ocr_folder: the per-image folders, or None.
    """

    def __init__(self, imdb_path, object_folder=None, ocr_folder=None):
        self.folder = os.path.dirname(os.path.abspath(imdb_path))
        self.object_folder = object_folder
        self.ocr_folder = ocr_folder
        self._stacked = {}

    def _stacked_file(self, record):
        path = os.path.join(self.folder, record.feature_path)
        if not os.path.exists(path):
            path = os.path.join(os.path.dirname(self.folder), record.feature_path)
        if path not in self._stacked:
            if not os.path.exists(path):
                raise FeatureError(f"question {record.question_id}: no feature file {path}")
            with np.load(path) as data:
                self._stacked[path] = {k: data[k] for k in (
                    "obj_features", "obj_boxes", "num_obj", "ocr_features", "num_ocr")}
        return path, self._stacked[path]

    def _per_image(self, folder, record, what):
        path = os.path.join(folder, f"{record.image_id}.npz")
        if not os.path.exists(path):
            raise FeatureError(f"question {record.question_id}: no {what} features for "
                               f"image {record.image_id} ({path})")
        with np.load(path) as data:
            return path, {k: data[k] for k in data.files}

    def of(self, record):
        """`(object_features [n, Co], object_boxes [n, 4], ocr_features
        [len(ocr_tokens), Ct])` of a record (float32)."""
        if self.object_folder is None:
            if record.feature_path is None or record.feature_index is None:
                raise FeatureError(
                    f"question {record.question_id}: the imdb names no feature_path / "
                    "feature_index; give --object_features and --ocr_features")
            path, data = self._stacked_file(record)
            k = record.feature_index
            if not 0 <= k < len(data["num_obj"]):
                raise FeatureError(f"question {record.question_id}: feature_index {k} is "
                                   f"outside {path} ({len(data['num_obj'])} images)")
            n, t = int(data["num_obj"][k]), int(data["num_ocr"][k])
            objects, boxes = data["obj_features"][k, :n], data["obj_boxes"][k, :n]
            ocr = data["ocr_features"][k, :t]
            where = f"{path}, image {record.image_id}"
        else:
            path, data = self._per_image(self.object_folder, record, "object")
            where = f"{path}, image {record.image_id}"
            if "features" not in data or "boxes" not in data:
                raise FeatureError(f"{where}: needs `features` and `boxes`")
            objects, boxes = data["features"], _normalised_boxes(data["boxes"], data, where)
            ocr_path, ocr_data = self._per_image(self.ocr_folder, record, "OCR")
            if "features" not in ocr_data:
                raise FeatureError(f"{ocr_path}: needs `features` [T, C]")
            ocr = ocr_data["features"]
            where = f"{where} / {ocr_path}"
        objects = np.asarray(objects, np.float32).reshape(len(objects), -1)
        ocr = np.asarray(ocr, np.float32).reshape(len(ocr), -1)
        if len(objects) != len(boxes):
            raise FeatureError(f"{where}: {len(objects)} object features but "
                               f"{len(boxes)} boxes")
        if len(ocr) != len(record.ocr_tokens):
            raise FeatureError(f"{where}: {len(ocr)} OCR feature rows for "
                               f"{len(record.ocr_tokens)} OCR tokens of question "
                               f"{record.question_id}")
        if not (np.all(np.isfinite(objects)) and np.all(np.isfinite(ocr))):
            raise FeatureError(f"{where}: non-finite features")
        return objects, np.asarray(boxes, np.float32), ocr
