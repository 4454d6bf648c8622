"""The image features of TextVQA questions: where they come from
(`ImageFeatures`) and M4C's OCR token features (`ocr_features`).

Two layouts (docs/textvqa.md, "Data"):

* an imdb entry naming a `feature_path` (relative to the imdb's folder
  or its parent: Shapes world keeps `textvqa/imdb_<split>.npy` beside
  `features_<split>.npz`) and a `feature_index`: a stacked `.npz` with `obj_features [S, N, C]`,
  `obj_boxes [S, N, 4]`, `num_obj [S]`, `ocr_features [S, T, C]`,
  `num_ocr [S]` (Shapes world's `features_<split>.npz`);
* per-image object features in any region store of
  `keras_structattn.data.feature_formats` that names its images (mmf's
  `<image_id>.npy` + `<image_id>_info.npy`, the anchor's; per-image
  `.npz`; mmf's LMDB), opened with `name_ids=True`: TextVQA's image ids
  are names; and the OCR tokens' features, one row per OCR token of the
  imdb, in its order, in mmf's layouts or per-image `.npz`
  (`ocr_stores.OcrFeatures`).

Every read is checked; an error names the file and the image or question.
"""

import os
import zlib

import numpy as np

from keras_structattn.ops import relation_tables
from keras_structattn.ops import spatial_graph
from keras_structattn.tasks.textvqa import ocr_stores
from keras_structattn.tasks.textvqa.phoc import phoc


class FeatureError(ValueError):
    """A question whose features are missing or malformed."""


class ImageFeatures:
    """The object and OCR features of imdb records (`of(record)`).

    Args:
        imdb_path: the imdb (its folder anchors relative `feature_path`s).
        objects: the object features, a regions `FeatureStore` keyed by
            the image ids as str (`feature_formats.open_region_features(
            ..., name_ids=True)`), or None (the imdb's stacked
            `feature_path` files).
        ocr: the OCR features (with `objects`): an `ocr_stores.OcrFeatures`
            or the path of one (its layout detected).
    """

    def __init__(self, imdb_path, objects=None, ocr=None):
        self.folder = os.path.dirname(os.path.abspath(imdb_path))
        self.objects = objects
        self.ocr = ocr_stores.OcrFeatures(ocr) if isinstance(ocr, (str, os.PathLike)) else ocr
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

    def of(self, record):
        """The features of one question.

        Args:
            record: a `TextVQARecord`.

        Returns:
            `(object_features [n, Co], object_boxes [n, 4], ocr_features
            [len(record.ocr_tokens), Ct])`, float32.

        Raises:
            FeatureError: the features are missing or malformed.
        """
        if self.objects is None:
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
            key = str(record.image_id)
            if key not in self.objects:
                raise FeatureError(f"question {record.question_id}: no object features for "
                                   f"image {record.image_id} in {self.objects.path}")
            try:  # the store checks each image's arrays against its layout
                objects, boxes = self.objects.regions(key)
            except ValueError as error:
                raise FeatureError(str(error)) from None
            where = f"{self.objects.path}, image {record.image_id}"
            try:
                ocr, ocr_where = self.ocr.features(record.image_id, record.ocr_tokens)
            except ValueError as error:
                raise FeatureError(f"question {record.question_id}: {error}") from None
            where = f"{where} / {ocr_where}"
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

    def problem(self, record):
        """What is wrong with a record's features (the `FeatureError`'s
        text), or None when `of(record)` reads them."""
        try:
            self.of(record)
        except FeatureError as error:
            return str(error)
        return None



class OcrWordVectors:
    """The word vectors of OCR tokens from a FastText / word2vec text file,
    read once for the tokens asked for; other tokens get zeros.

    Args:
        path: the text file.
        tokens: the OCR tokens to look up.

    Attributes:
        dim: the vectors' width.
        rows: `{token: vector}` of the tokens the file has.
    """

    def __init__(self, path, tokens):
        from keras_structattn.data.word_vectors import read_word_vectors

        words = sorted(set(tokens)) or ["</s>"]
        matrix, found = read_word_vectors(path, words)
        self.dim = matrix.shape[1]
        self.rows = {w: matrix[k] for k, w in enumerate(words) if found[k]}

    def __call__(self, token):
        return self.rows.get(token, np.zeros(self.dim, np.float32))


def _unit(x):
    """Rows scaled to unit L2 norm (zero rows stay zero), as M4C's
    `F.normalize` of each OCR feature part."""
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.maximum(norm, 1e-12)).astype(np.float32)


def ocr_features(tokens, appearance, word_vectors=None, phoc_cache=None, order_size=0):
    """M4C's OCR token features: the word vectors (optional), the PHOC
    vectors and the appearance features, each part scaled to unit norm,
    then, with `order_size`, the tokens' order vectors.

    The order vectors are LoRRA's (Singh et al., 2019, arXiv:1904.08920):
    row n is one-hot at n, the token's place in the OCR system's reading
    order. mmf's TextVQA pipeline builds them (`use_order_vectors: true`);
    M4C (Hu et al., 2020) feeds them as zeros, so the `_base` sets leave
    them out (docs/textvqa.md, "OCR reading order").

    Args:
        tokens: the OCR tokens (a non-empty list of str).
        appearance: `[len(tokens), C]` appearance features.
        word_vectors: an `OcrWordVectors`, or None.
        phoc_cache: optional `{token: PHOC vector}` dict, filled as read.
        order_size: 0 (no order vectors) or their width, `>= len(tokens)`
            (the model's `max_ocr`).

    Returns:
        float32 `[len(tokens), (word dim) + PHOC_DIM + C + order_size]`.
    """
    cache = {} if phoc_cache is None else phoc_cache
    for t in tokens:
        if t not in cache:
            cache[t] = phoc(t)
    parts = [] if word_vectors is None else [np.stack([word_vectors(t) for t in tokens])]
    parts += [np.stack([cache[t] for t in tokens]), appearance]
    if order_size:
        if order_size < len(tokens):
            raise ValueError(f"Argument `order_size` ({order_size}) must be at least the "
                             f"number of tokens ({len(tokens)}).")
        parts.append(np.eye(len(tokens), order_size, dtype=np.float32))
    return np.concatenate([_unit(p) for p in parts], axis=1)


def random_graph(labels, seed):
    """SA-M4C's random-graph control of one question's relation labels.

    Args:
        labels: `[L, L]` int relation labels (`spatial_graph.
            textvqa_relations_numpy`).
        seed: anything `np.random.default_rng` accepts.

    Returns:
        int32 `[L, L]`: every spatial label (0..12) replaced by a uniform
        draw from 0..12 (`spatial_graph.random_relations`), the implicit and
        blocked edges kept.
    """
    spatial = labels < relation_tables.NUM_SPATIAL_LABELS
    drawn = spatial_graph.random_relations(labels.shape, seed=seed)
    return np.where(spatial, drawn, labels).astype(np.int32)


def detector_boxes(boxes, jitter, key):
    """Boxes as a detector would give them: each edge moved by Gaussian noise.

    A detector localises a box only approximately; this stands in for that
    error on data whose boxes are exact (Shapes world), so that the
    SA-M4C graph (Kant et al., 2020, arXiv:2007.12146, Sec. 4.1) and the
    box features of M4C (Hu et al., 2020, arXiv:1911.06258, Eqs. 1-2) are
    built from detected, not drawn, boxes. `x1` and `x2` move by
    `N(0, (jitter * width)^2)` each, `y1` and `y2` by `N(0, (jitter *
    height)^2)`, independently, cut at 3 standard deviations; the result is
    clipped to [0, 1] with `x1 <= x2`, `y1 <= y2`. The draw depends only
    on `key` (e.g. `("ocr", image_id)`): every question of an image, in
    every run and split, sees the same detected boxes, as one detector
    pass would give.

    Args:
        boxes: float `[N, 4]` normalised `(x1, y1, x2, y2)`.
        jitter: the noise's standard deviation as a fraction of the box's
            side, >= 0 (0: the boxes unchanged).
        key: a tuple of str and int: the draw's seed.

    Returns:
        float32 `[N, 4]`.
    """
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    if jitter < 0:
        raise ValueError(f"Argument `jitter` must be >= 0. Received: jitter={jitter}")
    if jitter == 0 or not len(boxes):
        return boxes
    # A stable seed from the key (Python's `hash` of a str changes per process).
    seed = zlib.crc32(repr(tuple(key)).encode("utf-8"))
    noise = np.clip(np.random.default_rng(seed).standard_normal(boxes.shape), -3.0, 3.0)
    sides = np.concatenate([boxes[:, 2:] - boxes[:, :2]] * 2, axis=1)
    moved = np.clip(boxes + jitter * sides * noise, 0.0, 1.0)
    low, high = np.minimum(moved[:, :2], moved[:, 2:]), np.maximum(moved[:, :2], moved[:, 2:])
    return np.concatenate([low, high], axis=1).astype(np.float32)
