"""Region feature stores as the anchors' own code writes them.

Each format is read as its writer leaves it, and named by one string
(`FORMATS`; the recipes' `--features_format`):

* "bottom_up_npz": a folder of per-image `.npz`, `features`/`x` `[N, C]`
  and `boxes`/`bbox` (`image_features.FolderFeatures`, rows);
* "openvqa": OpenVQA's per-image `.npz` (`x` `[2048, N]`, channels-first,
  `bbox` `[N, 4]`, `num_bbox`, `image_h`, `image_w`), named
  `COCO_train2014_<id>.jpg.npz` (`FolderFeatures(layout="channels_first")`);
* "bottom_up_tsv": bottom-up-attention's `tools/generate_tsv.py` output,
  tab-separated `image_id, image_w, image_h, num_boxes, boxes, features`,
  the arrays base64 of float32 (`TsvFeatures`);
* "mmf_npy": mmf's per-image `<id>.npy` `[N, C]` beside `<id>_info.npy`, a
  pickled dict with `bbox`, `num_boxes`, `image_width`, `image_height`
  (`MmfFolderFeatures`);
* "mmf_lmdb": mmf's LMDB of pickled dicts (`features`, `bbox`,
  `image_width`, `image_height`, ...) keyed by the image id (or file name)
  as bytes (`LmdbFeatures`; needs the optional `lmdb` package);
* "butd_hdf5": bottom-up-attention-vqa's `<name>36.hdf5`
  (`image_features` `[I, 36, C]`, `image_bb` `[I, 36, 4]` pixels,
  `spatial_features` `[I, 36, 6]` whose first 4 are the normalised boxes)
  with `<name>36_imgid2idx.pkl` (image id -> row) beside it
  (`Hdf5RowFeatures`);
* "cocobu": self-critical.pytorch's `cocobu_att/<id>.npz` (`feat`
  `[N, C]`) with `cocobu_box/<id>.npy` (`[N, 4]` pixel boxes) beside it
  (`CocobuFeatures`; its pixel boxes need the images' sizes).

Where image ids are names, not ints (TextVQA's Open Images ids), the
`NAMED_FORMATS` take `name_ids=True`: each file's (or key's) name is its
image id, a str.

`detect_format(path)` names the format of a path from what is there,
and refuses to guess when two could fit. Every reader checks each image's
arrays against the layout it claims: a shape that cannot be that layout is
a `ValueError` naming the file (or key) and the image.

Pickled files (`_info.npy`, `imgid2idx.pkl`, LMDB values) are read with
`pickle`: they must be trusted local files, as the anchors' code trusts them.
"""

import base64
import os
import pickle

import numpy as np

from keras_structattn.data import image_features
from keras_structattn.data.image_features import FeatureStore
from keras_structattn.data.image_features import FolderFeatures

FORMATS = ("bottom_up_npz", "openvqa", "bottom_up_tsv", "mmf_npy", "mmf_lmdb", "butd_hdf5",
           "cocobu")
TSV_FIELDS = ("image_id", "image_w", "image_h", "num_boxes", "boxes", "features")
# The formats whose files or keys are named by image (`name_ids` reads the
# names as the ids); the others hold int ids (COCO's) in their data.
NAMED_FORMATS = ("bottom_up_npz", "openvqa", "mmf_npy", "mmf_lmdb")


def _id_of_name(name, name_ids):
    """The image id of a file or key name: the name itself with `name_ids`."""
    return name if name_ids else image_features._id_of_name(name)


def _load_pickle(path, what):
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, ValueError) as e:
        raise ValueError(f"{path}: not a readable {what} ({type(e).__name__}: {e}).") from None


class TsvFeatures(FeatureStore):
    """bottom-up-attention's TSV (`tools/generate_tsv.py`): one image a line.

    The file is indexed once (each line's offset by its image id, the
    arrays left unread) and read one line per image.

    Args:
        path: the `.tsv` file.
    """

    kind = "regions"

    def __init__(self, path):
        self.path = os.fspath(path)
        self._offsets = {}
        with open(self.path, "rb") as f:
            offset = 0
            for number, line in enumerate(f, 1):
                head = line.split(b"\t", 1)[0]
                if not line.strip():
                    offset += len(line)
                    continue
                try:
                    image_id = int(head)
                except ValueError:
                    raise ValueError(
                        f"{self.path}, line {number}: expected the fields "
                        f"{', '.join(TSV_FIELDS)} tab-separated, the first an int image id; "
                        f"found {head[:40]!r}.") from None
                if image_id in self._offsets:
                    raise ValueError(f"{self.path}, line {number}: image id {image_id} is "
                                     f"also on line {self._offsets[image_id][1]}.")
                self._offsets[image_id] = (offset, number)
                offset += len(line)
        if not self._offsets:
            raise ValueError(f"{self.path}: no image in the file.")
        first = min(self._offsets)
        self.feature_dim = self._regions(first)[0].shape[1]
        self.shape_source = f"line {self._offsets[first][1]} (the first image) has"

    def _ids(self):
        return self._offsets

    def _regions(self, image_id):
        offset, number = self._offsets[image_id]
        where = f"{self.path}, line {number} (image id {image_id})"
        with open(self.path, "rb") as f:
            f.seek(offset)
            fields = f.readline().rstrip(b"\r\n").split(b"\t")
        if len(fields) != len(TSV_FIELDS):
            raise ValueError(f"{where}: {len(fields)} tab-separated fields; expected "
                             f"{len(TSV_FIELDS)}: {', '.join(TSV_FIELDS)}.")
        try:
            width, height = float(fields[1]), float(fields[2])
            count = int(fields[3])
            boxes = np.frombuffer(base64.b64decode(fields[4], validate=True), np.float32)
            features = np.frombuffer(base64.b64decode(fields[5], validate=True), np.float32)
        except ValueError as e:  # binascii.Error is one
            raise ValueError(f"{where}: unreadable field ({e}); image_w, image_h and "
                             "num_boxes are numbers, boxes and features base64 of float32.") \
                from None
        if count < 0 or boxes.size != 4 * count or (count and features.size % count):
            raise ValueError(f"{where}: num_boxes={count}, but boxes hold {boxes.size} floats "
                             f"(4 a box) and features {features.size}.")
        features = features.reshape(count, -1 if count else 0)
        return self._checked_regions(features, boxes.reshape(count, 4), (width, height), where)


class MmfFolderFeatures(FolderFeatures):
    """mmf's per-image features: `<name>.npy` `[N, C]` beside `<name>_info.npy`.

    `<name>` is the image id or COCO's file name stem. The info file is a
    pickled dict (written with `np.save(..., allow_pickle=True)`) with
    `bbox` `[N, 4]` pixels, and `image_width`, `image_height`, optionally
    `num_boxes`.

    Args:
        folder: the folder.
        name_ids: whether `<name>` is the image id as it is (a str:
            TextVQA's Open Images ids, `0054c91397f2fe05.npy`), not an int
            read from it.
    """

    def __init__(self, folder, name_ids=False):
        folder = os.fspath(folder)
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"No such feature folder: {folder!r}")
        self.path, self.layout, self._size = folder, "rows", lambda image_id: None
        files, unmatched = {}, []
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            stem, ext = os.path.splitext(entry.name)
            if ext != ".npy" or stem.endswith("_info") or stem.startswith("."):
                continue
            image_id = _id_of_name(stem, name_ids)
            if image_id is None or not os.path.exists(os.path.join(folder, f"{stem}_info.npy")):
                unmatched.append(entry.name)
                continue
            if image_id in files:
                raise ValueError(f"{folder}: image id {image_id} has two feature files: "
                                 f"{os.path.basename(files[image_id])} and {entry.name}.")
            files[image_id] = entry.path
        self.unmatched_files = unmatched
        if not files:
            raise ValueError(f"{folder}: no <image>.npy beside an <image>_info.npy (mmf's "
                             "per-image features).")
        self._files, self.kind = files, "regions"
        first = min(files)
        self.feature_dim = self._regions(first)[0].shape[1]
        self.shape_source = f"{os.path.basename(files[first])} (the first file) has"

    def _regions(self, image_id):
        path = self._files[image_id]
        info_path = path[:-len(".npy")] + "_info.npy"
        where = f"{path} (image id {image_id})"
        try:
            features = np.load(path, allow_pickle=False)
            info = np.load(info_path, allow_pickle=True)[()]
        except (OSError, ValueError, EOFError) as e:
            raise ValueError(f"{where}: not readable with its info file ({e}).") from None
        if not isinstance(info, dict) or "bbox" not in info:
            raise ValueError(f"{info_path}: mmf's info file is a dict with 'bbox', "
                             "'image_width', 'image_height'; found "
                             f"{sorted(info) if isinstance(info, dict) else type(info).__name__}.")
        return _mmf_regions(self, features, info, where)


def _mmf_regions(store, features, info, where):
    """`(features, boxes)` of one mmf image (its info dict)."""
    boxes = np.asarray(info["bbox"])
    count = info.get("num_boxes")
    if count is not None:
        count = int(np.asarray(count).reshape(-1)[0])
        if not 0 <= count <= min(len(features), len(boxes)):
            raise ValueError(f"{where}: num_boxes={count}, but {len(features)} feature rows and "
                             f"{len(boxes)} boxes.")
        features, boxes = features[:count], boxes[:count]
    size = None
    if "image_width" in info and "image_height" in info:
        size = (float(info["image_width"]), float(info["image_height"]))
    return store._checked_regions(features, boxes, size, where)


def open_lmdb(path):
    """mmf's LMDB at `path` (a folder holding `data.mdb`, or the file),
    opened read-only as mmf's readers open it.

    Raises:
        ValueError: the `lmdb` package is missing, or `path` is no LMDB.
    """
    try:
        import lmdb
    except ImportError:
        raise ValueError("Reading an LMDB needs the lmdb package: pip install "
                         "'keras_structattn[lmdb]' (or pip install lmdb).") from None
    try:
        return lmdb.open(path, subdir=os.path.isdir(path), readonly=True, lock=False,
                         readahead=False, meminit=False)
    except lmdb.Error as e:
        raise ValueError(f"{path}: not a readable LMDB ({e}).") from None


class LmdbFeatures(FeatureStore):
    """mmf's LMDB of region features (needs the `lmdb` package).

    Each value is a pickled dict with `features` `[N, C]`, `bbox` `[N, 4]`
    pixels, `image_width`, `image_height` (and optionally `num_boxes`),
    keyed by the image id or COCO file name stem as bytes; mmf's own
    `b"keys"` entry (the list of keys) is not an image.

    Args:
        path: the LMDB folder (holding `data.mdb`) or file.
        name_ids: whether each key is the image id as it is (a str), not
            an int read from it.
    """

    kind = "regions"

    def __init__(self, path, name_ids=False):
        self.path = os.fspath(path)
        self._env = open_lmdb(self.path)
        self._keys, self.unmatched_keys = {}, []
        with self._env.begin() as txn:
            for key in txn.cursor().iternext(keys=True, values=False):
                if key == b"keys":
                    continue
                image_id = _id_of_name(key.decode("utf-8", "replace"), name_ids)
                if image_id is None:
                    self.unmatched_keys.append(key)
                    continue
                if image_id in self._keys:
                    raise ValueError(f"{self.path}: image id {image_id} has two keys: "
                                     f"{self._keys[image_id]!r} and {key!r}.")
                self._keys[image_id] = key
        if not self._keys:
            raise ValueError(f"{self.path}: no key named by an image id (found "
                             f"{len(self.unmatched_keys)} others).")
        first = min(self._keys)
        self.feature_dim = self._regions(first)[0].shape[1]
        self.shape_source = f"key {self._keys[first]!r} (the first image) has"

    def _ids(self):
        return self._keys

    def _regions(self, image_id):
        key = self._keys[image_id]
        where = f"{self.path}, key {key!r} (image id {image_id})"
        with self._env.begin() as txn:
            raw = txn.get(key)
        try:
            item = pickle.loads(raw)
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as e:
            raise ValueError(f"{where}: not a pickled dict ({e}).") from None
        if not isinstance(item, dict) or "features" not in item or "bbox" not in item:
            raise ValueError(f"{where}: expected a dict with 'features' and 'bbox' (mmf's); found "
                             f"{sorted(item) if isinstance(item, dict) else type(item).__name__}.")
        return _mmf_regions(self, np.asarray(item["features"]), item, where)

    def close(self):
        if self._env is not None:
            self._env.close()
            self._env = None


def imgid2idx_path(path):
    """bottom-up-attention-vqa's index beside `<name>.hdf5`: `<name>_imgid2idx.pkl`."""
    return os.path.splitext(os.fspath(path))[0] + "_imgid2idx.pkl"


class Hdf5RowFeatures(FeatureStore):
    """bottom-up-attention-vqa's HDF5 (`tools/detection_features_converter.py`).

    `image_features` `[I, K, C]`, `image_bb` `[I, K, 4]` (pixels) and
    `spatial_features` `[I, K, 6]` (normalised x1, y1, x2, y2, w, h: the
    boxes are read from it, the images' sizes not being stored), one row an
    image, and `<name>_imgid2idx.pkl`, a pickled dict image id -> row.

    Args:
        path: the `.hdf5` file (kept open; `close()` it).
    """

    kind = "regions"

    def __init__(self, path):
        import h5py

        self.path = os.fspath(path)
        index_path = imgid2idx_path(self.path)
        if not os.path.exists(index_path):
            raise ValueError(f"{self.path}: bottom-up-attention-vqa's HDF5 needs its index "
                             f"{index_path} (image id -> row), which is absent.")
        index = _load_pickle(index_path, "pickled dict image id -> row")
        if not isinstance(index, dict):
            raise ValueError(f"{index_path}: expected a dict image id -> row; found a "
                             f"{type(index).__name__}.")
        try:
            self._file = h5py.File(self.path, "r")
        except OSError as e:
            raise ValueError(f"{self.path}: not a readable HDF5 file ({e}).") from None
        try:
            missing = [k for k in ("image_features", "spatial_features") if k not in self._file]
            if missing:
                raise ValueError(f"{self.path}: no {' or '.join(missing)} dataset (found "
                                 f"{sorted(self._file.keys())}).")
            features, spatial = self._file["image_features"], self._file["spatial_features"]
            rows = features.shape[0]
            if (len(features.shape) != 3 or len(spatial.shape) != 3
                    or tuple(spatial.shape[:2]) != tuple(features.shape[:2])
                    or spatial.shape[2] < 4):
                raise ValueError(
                    f"{self.path}: image_features {tuple(features.shape)} and spatial_features "
                    f"{tuple(spatial.shape)} must be [I, K, C] and [I, K, 6].")
            self._rows = {}
            for image_id, row in index.items():
                image_id, row = image_features._image_id(image_id), int(row)
                if not 0 <= row < rows:
                    raise ValueError(f"{index_path}: image {image_id} -> row {row}, but "
                                     f"{self.path} has {rows} rows.")
                self._rows[image_id] = row
            self.feature_dim = features.shape[2]
        except BaseException:
            self._file.close()
            raise

    def _ids(self):
        return self._rows

    def _regions(self, image_id):
        row = self._rows[image_id]
        where = f"{self.path} (image id {image_id}, row {row})"
        features = self._file["image_features"][row]
        boxes = self._file["spatial_features"][row][:, :4]
        return self._checked_regions(features, boxes, None, where)

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None


def cocobu_box_folder(att_folder):
    """self-critical's box folder beside `.../cocobu_att`: `.../cocobu_box`."""
    att_folder = os.path.normpath(os.fspath(att_folder))
    parent, name = os.path.split(att_folder)
    return os.path.join(parent, name[: -len("att")] + "box" if name.endswith("att") else
                        "cocobu_box")


class CocobuFeatures(FolderFeatures):
    """self-critical.pytorch's `cocobu_att/<id>.npz` (`feat` `[N, C]`) with
    `cocobu_box/<id>.npy` (`[N, 4]` pixel x1, y1, x2, y2) beside it.

    The boxes are in pixels and the files hold no image size (self-critical
    reads it from its `cocotalk.json`): `image_sizes` gives them.

    Args:
        folder: the `cocobu_att` folder.
        image_sizes: None, a `(width, height)` pair or a dict `{image_id:
            (width, height)}`.
    """

    def __init__(self, folder, image_sizes=None):
        self._box_folder = cocobu_box_folder(folder)
        if not os.path.isdir(self._box_folder):
            raise ValueError(f"{folder}: self-critical's region features need their boxes in "
                             f"{self._box_folder}, which is absent.")
        super().__init__(folder, "regions", image_sizes=image_sizes, layout="rows")

    @staticmethod
    def _kind_of(path, kind):
        return "regions"

    def _regions(self, image_id):
        path = self._files[image_id]
        where = f"{path} (image id {image_id})"
        arrays = image_features._read_file(path)
        if "feat" not in arrays:
            raise ValueError(f"{where}: self-critical's cocobu_att files hold 'feat'; found "
                             f"{sorted(arrays)}.")
        box_path = os.path.join(self._box_folder,
                                os.path.splitext(os.path.basename(path))[0] + ".npy")
        if not os.path.exists(box_path):
            raise ValueError(f"{where}: no boxes {box_path}.")
        boxes = image_features._read_file(box_path)["features"]
        size = self._size(image_id)
        if size is None:
            raise ValueError(f"{where}: {box_path} holds pixel boxes, and self-critical's "
                             "files hold no image size: give the images' sizes (the "
                             "recipes take them from COCO's captions or instances JSON).")
        return self._checked_regions(arrays["feat"], boxes, size, where)


def image_sizes_from_coco(path):
    """`{image_id: (width, height)}` of a COCO JSON's `images` (instances,
    captions: each entry's `id`, `width`, `height`).

    Raises:
        ValueError: naming the file and the entry, for an entry without an
            int id or positive sizes.
    """
    from keras_structattn.data.json_files import load_json
    from keras_structattn.data.json_files import top_list

    name = os.fspath(path)
    sizes = {}
    for index, entry in enumerate(top_list(name, load_json(name, "COCO JSON"), "images",
                                           "COCO JSON")):
        try:
            image_id = image_features._image_id(entry["id"])
            size = (float(entry["width"]), float(entry["height"]))
            if not (size[0] > 0 and size[1] > 0):
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{name}, images[{index}]: expected an int 'id' and positive "
                             f"'width' and 'height'; found {entry!r:.120}.") from None
        sizes[image_id] = size
    return sizes


def detect_format(path):
    """The format (`FORMATS`) of the region features at `path`, from what is
    there, or None when it is none of the anchors' (the generic readers of
    `image_features.open_features` then apply).

    A folder of per-image `.npz` is "bottom_up_npz" or "openvqa" by the
    first file's `x` and boxes, which `FolderFeatures` tells apart (or
    refuses when a file could be either); this names neither.

    Raises:
        ValueError: when two formats could fit (naming both).
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        entries = os.listdir(name)
        if "data.mdb" in entries:
            return "mmf_lmdb"
        if any(e.endswith("_info.npy") for e in entries):
            return "mmf_npy"
        if os.path.basename(os.path.normpath(name)).endswith("att") and os.path.isdir(
                cocobu_box_folder(name)):
            return "cocobu"
        return None
    ext = os.path.splitext(name)[1].lower()
    if ext == ".tsv":
        return "bottom_up_tsv"
    if ext in (".lmdb", ".mdb"):
        return "mmf_lmdb"
    if ext in (".h5", ".hdf5") and os.path.exists(imgid2idx_path(name)):
        return "butd_hdf5"
    return None


def open_region_features(path, features_format=None, *, file_names=None, image_sizes=None,
                         name_ids=False):
    """Opens region features in the named format, or the detected one.

    Args:
        path: the folder or file.
        features_format: one of `FORMATS`, or None (`detect_format`, else
            `image_features.open_features`).
        file_names: as `image_features.open_features`'s.
        image_sizes: as `image_features.open_features`'s (self-critical's
            pixel boxes need them).
        name_ids: whether the image ids are the files' (or keys') names,
            str, as TextVQA's: only the `NAMED_FORMATS` (or a folder of
            per-image files) name their images.

    Returns:
        A regions `FeatureStore`.
    """
    if features_format is not None and features_format not in FORMATS:
        raise ValueError(f"Argument `features_format` must be one of {list(FORMATS)}. "
                         f"Received: {features_format!r}")
    found = features_format or detect_format(path)
    name = os.fspath(path)
    folder_formats = ("bottom_up_npz", "openvqa", "mmf_npy", "cocobu")
    if found in folder_formats and not os.path.isdir(name):
        raise ValueError(f"{name}: --features_format {found} is a folder of per-image files.")
    if found in ("bottom_up_tsv", "butd_hdf5") and not os.path.isfile(name):
        raise ValueError(f"{name}: --features_format {found} is one file.")
    if name_ids and not (found in NAMED_FORMATS or (found is None and os.path.isdir(name))):
        what = f"--features_format {found}" if found else "a feature file"
        raise ValueError(f"{name}: {what} keys its images by int ids (COCO's), and these image "
                         "ids are names: use a format that names its images "
                         f"({', '.join(NAMED_FORMATS)}).")
    if found in ("openvqa", "bottom_up_npz") or (found is None and name_ids):
        layout = {"openvqa": "channels_first", "bottom_up_npz": "rows"}.get(found)
        return FolderFeatures(name, "regions", file_names=file_names, image_sizes=image_sizes,
                              layout=layout, name_ids=name_ids)
    if found in ("mmf_npy", "mmf_lmdb"):
        return {"mmf_npy": MmfFolderFeatures, "mmf_lmdb": LmdbFeatures}[found](
            name, name_ids=name_ids)
    if found == "bottom_up_tsv":
        return TsvFeatures(name)
    if found == "butd_hdf5":
        return Hdf5RowFeatures(name)
    if found == "cocobu":
        return CocobuFeatures(name, image_sizes=image_sizes)
    return image_features.open_features(name, "regions", file_names=file_names,
                                        image_sizes=image_sizes)
