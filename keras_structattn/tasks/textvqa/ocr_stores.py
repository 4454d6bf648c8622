"""The OCR tokens' appearance features of TextVQA, as users hold them
(`open_ocr_features`; the recipe's `--ocr_features`).

M4C (Hu et al., 2020, arXiv:1911.06258, Sec. 3.1) gives each OCR token
the Faster R-CNN `fc6` feature of its box. mmf's
`projects/m4c/scripts/extract_ocr_frcn_feature.py` writes them per image
as `<image_id>.npy` `[T, 2048]` (zero rows where an image has no OCR
token) beside `<image_id>_info.npy`, a pickled dict with `ocr_boxes`
`[T, 4]` (pixels) and `ocr_tokens`, in the imdb's OCR order; mmf's
`tools/scripts/features/lmdb_conversion.py` packs such a folder into an
LMDB keyed by each file's path without `.npy`, values pickled dicts with
`features`. Three layouts, detected from what is there:

* "mmf_npy": the folder mmf's script writes (the info files optional);
* "mmf_lmdb": mmf's LMDB of it (needs the optional `lmdb` package);
* "npz": a folder of `<image_id>.npz` with `features` `[T, C]`.

A row count that is not the question's OCR token count, or an info file
whose `ocr_tokens` are not the imdb's (features extracted for another OCR
system's tokens), is an error naming the file and the image.
"""

import os
import pickle

import numpy as np

from keras_structattn.data.feature_formats import open_lmdb

OCR_FORMATS = ("mmf_npy", "mmf_lmdb", "npz")


def detect_ocr_format(path):
    """The layout (`OCR_FORMATS`) of the OCR features at `path`.

    Raises:
        ValueError: when the path holds none of them, or two.
    """
    name = os.fspath(path)
    if not os.path.isdir(name):
        if os.path.splitext(name)[1].lower() in (".lmdb", ".mdb"):
            return "mmf_lmdb"
        raise ValueError(f"{name}: OCR features are a folder of per-image .npy (mmf's) or "
                         ".npz files, or mmf's LMDB (.lmdb).")
    entries = os.listdir(name)
    if "data.mdb" in entries:
        return "mmf_lmdb"
    found = {ext for ext in (".npy", ".npz") if any(e.endswith(ext) for e in entries)}
    if len(found) == 2:
        raise ValueError(f"{name}: holds both per-image .npy (mmf's) and .npz OCR features; "
                         "keep one layout in the folder.")
    if not found:
        raise ValueError(f"{name}: no per-image .npy (mmf's <image_id>.npy + _info.npy) or "
                         ".npz OCR features.")
    return "mmf_npy" if ".npy" in found else "npz"


class OcrFeatures:
    """Per-image OCR appearance features keyed by the image id (a str).

    Args:
        path: the folder or LMDB.
        ocr_format: one of `OCR_FORMATS`, or None (`detect_ocr_format`).

    Attributes:
        path: as given.
        ocr_format: the layout read.
    """

    def __init__(self, path, ocr_format=None):
        self.path = os.fspath(path)
        self.ocr_format = ocr_format or detect_ocr_format(self.path)
        if self.ocr_format not in OCR_FORMATS:
            raise ValueError(f"OCR features format must be one of {list(OCR_FORMATS)}. "
                             f"Received: {self.ocr_format!r}")
        self._env = None
        if self.ocr_format == "mmf_lmdb":
            self._keys = self._lmdb_keys()
        else:
            ext = ".npy" if self.ocr_format == "mmf_npy" else ".npz"
            self._keys = {e.name[:-len(ext)]: e.path for e in os.scandir(self.path)
                          if e.name.endswith(ext) and not e.name.endswith("_info.npy")}

    def _lmdb_keys(self):
        self._env = open_lmdb(self.path)
        keys = {}
        with self._env.begin() as txn:
            for key in txn.cursor().iternext(keys=True, values=False):
                if key != b"keys":  # mmf's own list of the keys
                    # mmf keys a file by its path in the folder: the image id is its name.
                    keys[os.path.basename(key.decode("utf-8", "replace"))] = key
        return keys

    def __contains__(self, image_id):
        return str(image_id) in self._keys

    def __len__(self):
        return len(self._keys)

    def describe(self):
        return f"OcrFeatures({self.path}, {self.ocr_format}): {len(self)} images"

    def features(self, image_id, tokens):
        """The `[len(tokens), C]` features of one image's OCR tokens.

        Args:
            image_id: the image id.
            tokens: the imdb's OCR tokens of the image, in its order.

        Returns:
            `(features, where)`: float32 rows, and the file (or key) read.

        Raises:
            ValueError: missing, unreadable, or not these tokens' features.
        """
        key = self._keys.get(str(image_id))
        if key is None:
            raise ValueError(f"{self.path}: no OCR features for image {image_id}")
        info = None
        if self.ocr_format == "mmf_lmdb":
            where = f"{self.path}, key {key!r}"
            with self._env.begin() as txn:
                try:
                    item = pickle.loads(txn.get(key))
                except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as e:
                    raise ValueError(f"{where}: not a pickled dict ({e})") from None
            if not isinstance(item, dict) or "features" not in item:
                raise ValueError(f"{where}: expected a dict with 'features' (mmf's)")
            rows, info = item["features"], item
        elif self.ocr_format == "npz":
            where = key
            with np.load(key) as data:
                if "features" not in data.files:
                    raise ValueError(f"{where}: needs `features` [T, C]")
                rows = data["features"]
        else:
            where = key
            try:
                rows = np.load(key, allow_pickle=False)
                info_path = key[:-len(".npy")] + "_info.npy"
                if os.path.exists(info_path):
                    info = np.load(info_path, allow_pickle=True)[()]
            except (OSError, ValueError, EOFError) as e:
                raise ValueError(f"{where}: not readable ({e})") from None
        rows = np.asarray(rows, np.float32)
        if rows.ndim != 2:
            raise ValueError(f"{where}: OCR features are [T, C] (one row per OCR token); "
                             f"found shape {rows.shape}")
        saved = info.get("ocr_tokens") if isinstance(info, dict) else None
        if saved is not None and list(saved) != list(tokens):
            raise ValueError(f"{where}: its ocr_tokens {list(saved)[:5]} are not the imdb's "
                             f"{list(tokens)[:5]} for image {image_id} (features of another "
                             "OCR system's tokens)")
        return rows, where

    def close(self):
        if self._env is not None:
            self._env.close()
            self._env = None
