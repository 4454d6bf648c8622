"""Precomputed image features: the stores real captioning data comes in, and batches.

Two kinds of features, one interface:

* grid features, a CNN's last convolutional map `[H, W, C]` per image (Xu
  et al., 2015, "Show, Attend and Tell", arXiv:1502.03044; e.g. 8x8x1536
  from InceptionResNetV2 at 299 pixels, `feature_extraction`);
* region features, one `C`-vector and one box per detected region, a
  variable number of regions per image (Anderson et al., 2018, "Bottom-Up
  and Top-Down Attention", arXiv:1707.07998).

Every store has `kind` ("grid" or "regions"), `path`, `image_ids()`,
`feature_dim`, `grid_shape` (`(H, W)`, grid stores only; None otherwise),
`image_id in store`, and `grid(image_id)` -> float32 `[H, W, C]` or
`regions(image_id)` -> `(features float32 [N, C], boxes float32 [N, 4])`,
boxes normalised `(x1, y1, x2, y2)` in [0, 1].

Stores (`open_features` picks one from the path and its content):

* `FolderFeatures`: a folder of per-image `.npy` (grid) or `.npz` (grid, or
  regions with `features`/`x` and `boxes`/`bbox`, bottom-up-attention
  style, pixel boxes normalised by `image_w`/`image_h`) named by image id
  (`123.npy`, `000000000123.npy`) or by the stem of the image's file name
  (`COCO_val2014_000000000123.npy`, given the caption records' file names).
* `ArrayFeatures`: one `.h5`/`.hdf5` (h5py) or `.npz` file holding
  `image_ids [N]` + `features [N, H, W, C]` (grid) or `features [N, R, C]` +
  `boxes [N, R, 4]` (+ `num_boxes [N]`), or Shapes world's
  `features_<split>.npz` (`image_ids`, `grid_features`, `obj_features`,
  `obj_boxes`, `num_obj`; docs/shapes_world.md).
* `Hdf5ImageDatasets`: an HDF5 file of one grid dataset per image, keyed by
  the image id.

Every read is checked: an image whose array has the wrong shape or a
non-finite value is a `ValueError` naming the file (or store) and the image
id; an image without features is a `ValueError` naming the id and the store
(not a bare `KeyError`); `select_images` keeps the captioned images that have
features and counts the rest.

NumPy only; h5py is imported when an HDF5 file is opened.
"""

import operator
import os
import re
import zipfile

import numpy as np

from keras_structattn import checks

KINDS = ("grid", "regions")
# How a per-image region file holds its features: rows `[N, C]`, or
# channels-first `[C, N]` (OpenVQA's `x`).
REGION_LAYOUTS = ("rows", "channels_first")
MISSING = ("error", "skip")
# Normalised boxes may exceed [0, 1] by rounding (pixel boxes divided by the
# image size in float32); beyond this they are in pixels or wrong.
_BOX_TOLERANCE = 1e-3
_FEATURE_KEYS = ("features", "x")
_BOX_KEYS = ("boxes", "bbox")
_COUNT_KEYS = ("num_boxes", "num_bbox")
# COCO's image file names carry the image id (`COCO_val2014_000000000123`);
# feature files keep them, with (OpenVQA's `COCO_train2014_<id>.jpg.npz`)
# or without the image's extension.
_COCO_NAME = re.compile(r"(?:COCO_[A-Za-z]+\d{4}_)?(\d+)(?:\.(?:jpe?g|png))?", re.IGNORECASE)


def _image_id(value):
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise ValueError(f"An image id must be an int. Received: {value!r:.80}") from None


def _image_key(value):
    """An image id as a store looks it up: an int, or a non-empty str in the
    stores whose ids are names (`name_ids`)."""
    if isinstance(value, str) and value:
        return value
    return _image_id(value)


def _id_of_name(name, stems=None):
    """The int image id a file (or key) name carries: its digits, the id
    `stems` maps it to (`_file_name_ids`), or the id COCO's image name ends
    in (with or without the image's extension); None when it carries none."""
    if name.isascii() and name.isdigit():
        return int(name)
    if stems and name in stems:
        return stems[name]
    match = _COCO_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def _normalize_boxes(boxes, size, where):
    """Boxes `[N, 4]` (x1, y1, x2, y2) in [0, 1]: pixels divided by `size=(w, h)`.

    Boxes already within [0, 1] are kept when no size is known.
    """
    boxes = np.asarray(boxes, np.float64)
    if boxes.ndim != 2 or boxes.shape[-1] != 4:
        raise ValueError(f"{where}: boxes must have shape [N, 4]; found {boxes.shape}.")
    if not np.isfinite(boxes).all():
        raise ValueError(f"{where}: the boxes hold NaN or infinite values.")
    if size is not None:
        width, height = (float(s) for s in size)
        if not (width > 0 and height > 0):
            raise ValueError(f"{where}: the image size must be positive; found {size!r}.")
        boxes = boxes / np.array([width, height, width, height])
    if boxes.size and (boxes.min() < -_BOX_TOLERANCE or boxes.max() > 1 + _BOX_TOLERANCE):
        hint = (
            "" if size is not None else
            " (pixel boxes need the image's size: `image_w`/`image_h` with the boxes, or "
            "the sizes given to the reader)"
        )
        raise ValueError(
            f"{where}: boxes must lie in [0, 1] once normalised; found values in "
            f"[{boxes.min():.4g}, {boxes.max():.4g}]{hint}."
        )
    if boxes.size and ((boxes[:, 2] < boxes[:, 0]).any() or (boxes[:, 3] < boxes[:, 1]).any()):
        raise ValueError(f"{where}: boxes must be (x1, y1, x2, y2) with x2 >= x1, y2 >= y1.")
    return np.clip(boxes, 0.0, 1.0).astype(np.float32)


def _pixel_size(boxes, size):
    """A reader's `image_sizes` entry for one image's `boxes`: `size` when
    the boxes are pixels, None when they already lie in [0, 1] (normalised
    boxes are kept as they are; a box of pixels within [0, 1] would be a
    one-pixel image's). A size stored with the boxes themselves (`image_w`,
    `image_h`) is not this fallback and always applies."""
    if size is None:
        return None
    boxes = np.asarray(boxes, np.float64)
    if boxes.size and np.isfinite(boxes).all() and (
            boxes.min() >= -_BOX_TOLERANCE and boxes.max() <= 1 + _BOX_TOLERANCE):
        return None
    return size


def _finite_float32(array, where):
    array = np.asarray(array)
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"{where}: features must be numbers; found dtype {array.dtype}.")
    array = array.astype(np.float32)
    if not np.isfinite(array).all():
        raise ValueError(f"{where}: the features hold NaN or infinite values (in float32).")
    return array


def _size_lookup(image_sizes):
    """A function image id -> (w, h) or None, from a `(w, h)` pair or a mapping."""
    if image_sizes is None:
        return lambda image_id: None
    if isinstance(image_sizes, dict):
        sizes = {_image_key(k): tuple(v) for k, v in image_sizes.items()}
        return sizes.get
    size = tuple(image_sizes)
    if len(size) != 2:
        raise ValueError(
            "Argument `image_sizes` must be None, a (width, height) pair or a dict "
            f"{{image_id: (width, height)}}. Received: {image_sizes!r:.80}"
        )
    return lambda image_id: size


class FeatureStore:
    """The interface of every store (see the module docstring).

    Attributes:
        path: the folder or file.
        kind: "grid" or "regions".
        feature_dim: `C`.
        grid_shape: `(H, W)` for a grid store, None for a regions store.
    """

    path = None
    kind = None
    feature_dim = None
    grid_shape = None
    # Where the store's shape was read (its first image), for errors that
    # must not blame the image read now when the first one is the odd one.
    shape_source = "the store's images are"

    def image_ids(self):
        """The ids of the images with features, sorted."""
        return sorted(self._ids())

    def _ids(self):
        raise NotImplementedError

    def __contains__(self, image_id):
        return _image_key(image_id) in self._ids()

    def __len__(self):
        return len(self._ids())

    def _check_kind(self, kind, image_id):
        image_id = _image_key(image_id)
        if self.kind != kind:
            raise ValueError(
                f"{self.path} is a {self.kind} feature store; `{kind}(image_id)` needs "
                f"{kind} features (open it with kind={kind!r} if it holds both)."
            )
        if image_id not in self._ids():
            raise ValueError(f"Image id {image_id} has no features in {self.path}.")
        return image_id

    def grid(self, image_id):
        """The grid features of one image.

        Args:
            image_id: an int image id.

        Returns:
            float32 `[H, W, C]`.
        """
        return self._grid(self._check_kind("grid", image_id))

    def regions(self, image_id):
        """The region features of one image.

        Args:
            image_id: an int image id.

        Returns:
            `(features, boxes)`: float32 `[N, C]` and float32 `[N, 4]`
            (normalised x1, y1, x2, y2); N may be 0.
        """
        return self._regions(self._check_kind("regions", image_id))

    def _checked_grid(self, array, where):
        array = np.asarray(array)
        if array.ndim != 3:
            raise ValueError(
                f"{where}: grid features must have shape [H, W, C]; found {array.shape}."
            )
        if self.grid_shape is not None and array.shape != (*self.grid_shape, self.feature_dim):
            raise ValueError(
                f"{where}: grid features of shape {array.shape}, but {self.shape_source} "
                f"{(*self.grid_shape, self.feature_dim)}: all images must agree (one of "
                "the two is not like the others)."
            )
        return _finite_float32(array, where)

    def _checked_regions(self, features, boxes, size, where):
        features = np.asarray(features)
        if features.ndim != 2:
            raise ValueError(
                f"{where}: region features must have shape [N, C]; found {features.shape}."
            )
        if self.feature_dim is not None and features.shape[1] != self.feature_dim:
            raise ValueError(
                f"{where}: region features of size {features.shape[1]}, but {self.shape_source} "
                f"{self.feature_dim}: all images must agree (one of the two is not like the "
                "others)."
            )
        boxes = np.asarray(boxes)
        if boxes.shape != (features.shape[0], 4):
            raise ValueError(
                f"{where}: {features.shape[0]} regions need boxes of shape "
                f"[{features.shape[0]}, 4]; found {boxes.shape}."
            )
        return _finite_float32(features, where), _normalize_boxes(boxes, size, where)

    def describe(self):
        """One line: the path, kind, size and feature shape."""
        shape = (
            f"{self.grid_shape[0]}x{self.grid_shape[1]}x{self.feature_dim}"
            if self.kind == "grid" else f"[N, {self.feature_dim}]"
        )
        layout = getattr(self, "layout", None)
        shape += {"channels_first": " (stored channels-first, OpenVQA)"}.get(layout, "")
        return f"{type(self).__name__}({self.path}): {len(self)} images, {self.kind} {shape}"

    def close(self):
        """Releases open files (a no-op for stores that hold none)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return self.describe()


def _file_name_ids(file_names):
    """`{file-name stem: image id}` from a mapping or from caption records."""
    if file_names is None:
        return {}
    if isinstance(file_names, dict):
        pairs = list(file_names.items())
    else:
        try:
            pairs = [(r.image_id, r.file_name) for r in file_names]
        except AttributeError:
            raise ValueError(
                "Argument `file_names` must be a dict {image_id: file_name} or caption "
                f"records (with `image_id` and `file_name`). Received: {file_names!r:.80}"
            ) from None
    stems = {}
    for image_id, file_name in pairs:
        stem = os.path.splitext(os.path.basename(os.fspath(file_name)))[0]
        image_id = _image_id(image_id)
        if stems.get(stem, image_id) != image_id:
            raise ValueError(
                f"Argument `file_names`: images {stems[stem]} and {image_id} have the same "
                f"file name stem {stem!r}."
            )
        stems[stem] = image_id
    return stems


class FolderFeatures(FeatureStore):
    """A folder of per-image `.npy` / `.npz` feature files.

    Each file is named by its image id (`123.npy`, `000000000123.npz`), by
    COCO's image file name, which ends in the id (`COCO_val2014_000000000123.npy`,
    or OpenVQA's `COCO_train2014_000000000123.jpg.npz`), or by the stem of
    the image's file name when `file_names` maps ids to file names (that
    mapping wins over the id in a COCO name). Files no name matches are
    left out and listed in `unmatched_files`. With `name_ids`, a file's
    name (its stem) is its image id, a str: datasets whose ids are names,
    as TextVQA's Open Images ids (`0054c91397f2fe05.npz`).

    File contents:

    * grid: `.npy` `[H, W, C]`, or `.npz` with one `[H, W, C]` array
      (`features`, `grid`, or its only array); every image must have the
      same shape (checked when read, the error names the file);
    * regions (bottom-up-attention style, Anderson et al., 2018,
      arXiv:1707.07998): `.npz` with `features`/`x` `[N, C]` and
      `boxes`/`bbox` `[N, 4]` (x1, y1, x2, y2), and optionally `num_boxes`/
      `num_bbox` (rows kept) and `image_w`/`image_h` (pixel boxes are
      divided by them; otherwise by `image_sizes`; boxes already in [0, 1]
      are kept as they are). N varies per image.

    Args:
        folder: the folder.
        kind: "grid", "regions" or None (read from the first file).
        file_names: None, a dict `{image_id: file_name}`, or caption records
            (`ImageCaptions`), for files named by file-name stem.
        image_sizes: None, a `(width, height)` pair for every image, or a dict
            `{image_id: (width, height)}`, for pixel boxes without
            `image_w`/`image_h`.
        layout: how region files hold their features (`REGION_LAYOUTS`),
            or None (told from the first file that shows it).
        name_ids: whether image ids are the files' names (str), not ints
            read from them (then without `file_names`).
    """

    def __init__(self, folder, kind=None, *, file_names=None, image_sizes=None, layout=None,
                 name_ids=False):
        folder = os.fspath(folder)
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"No such feature folder: {folder!r}")
        if name_ids and file_names is not None:
            raise ValueError("Arguments `file_names` and `name_ids=True` exclude each other: "
                             "with `name_ids` a file's name is its image id.")
        if kind is not None:
            checks.one_of("kind", kind, KINDS)
        if layout is not None:
            checks.one_of("layout", layout, REGION_LAYOUTS)
        self.path = folder
        self.layout = layout
        self._size = _size_lookup(image_sizes)
        stems = _file_name_ids(file_names)
        files, unmatched = {}, []
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            stem, ext = os.path.splitext(entry.name)
            if ext not in (".npy", ".npz") or not entry.is_file() or stem.startswith("."):
                continue
            image_id = stem if name_ids else _id_of_name(stem, stems)
            if image_id is None:
                unmatched.append(entry.name)
                continue
            if image_id in files:
                raise ValueError(
                    f"{folder}: image id {image_id} has two feature files: "
                    f"{os.path.basename(files[image_id])} and {entry.name}."
                )
            files[image_id] = entry.path
        self.unmatched_files = unmatched
        if not files:
            hint = ""
            if unmatched:
                hint = f" ({len(unmatched)} files, e.g. {unmatched[0]!r}, match no image id"
                hint += ")" if stems else (": give the images' file names (the caption records'), "
                                           "or name the files by image id)")
            raise ValueError(f"{folder}: no .npy or .npz feature file named by an image id{hint}.")
        self._files = files
        first_id = min(files)
        self.kind = self._kind_of(files[first_id], kind)
        if self.kind == "grid":
            array = self._grid(first_id)
            self.grid_shape = array.shape[:2]
            self.feature_dim = array.shape[2]
        else:
            features, _ = self._regions(first_id)
            self.feature_dim = features.shape[1]
        self.shape_source = f"{os.path.basename(files[first_id])} (the first file) has"

    def _ids(self):
        return self._files

    @staticmethod
    def _kind_of(path, kind):
        arrays = _read_file(path)
        has_regions = _first_key(arrays, _FEATURE_KEYS) and _first_key(arrays, _BOX_KEYS)
        found = "regions" if has_regions else "grid"
        if kind is not None and kind != found:
            detail = ""
            if kind == "regions":
                detail = " (region files are .npz with features/x and boxes/bbox)"
            if "feat" in arrays:
                detail = (" (it looks like self-critical's cocobu_att, whose boxes are in "
                          "cocobu_box beside it: --features_format cocobu)")
            raise ValueError(
                f"{path}: holds {found} features, but kind={kind!r} was asked for{detail}."
            )
        return found

    def _grid(self, image_id):
        path = self._files[image_id]
        where = f"{path} (image id {image_id})"
        arrays = _read_file(path)
        key = _first_key(arrays, ("features", "grid"))
        if key is None and len(arrays) != 1:
            raise ValueError(
                f"{where}: a grid .npz file needs a 'features' or 'grid' array (or only one "
                f"array); found {sorted(arrays)}."
            )
        return self._checked_grid(arrays[key or next(iter(arrays))], where)

    def _regions(self, image_id):
        path = self._files[image_id]
        where = f"{path} (image id {image_id})"
        arrays = _read_file(path)
        feature_key = _first_key(arrays, _FEATURE_KEYS)
        box_key = _first_key(arrays, _BOX_KEYS)
        if feature_key is None or box_key is None:
            raise ValueError(
                f"{where}: region files are .npz with {' or '.join(_FEATURE_KEYS)} and "
                f"{' or '.join(_BOX_KEYS)} arrays; found {sorted(arrays)}."
            )
        features, boxes = arrays[feature_key], arrays[box_key]
        if feature_key == "x" or self.layout is not None:  # `features` arrays are rows
            features = self._oriented(features, len(boxes), where)
        count_key = _first_key(arrays, _COUNT_KEYS)
        if count_key is not None:
            count = int(arrays[count_key])
            if not 0 <= count <= len(features):
                raise ValueError(
                    f"{where}: {count_key}={count} but the file has {len(features)} regions."
                )
            features, boxes = features[:count], boxes[:count]
        size = _pixel_size(boxes, self._size(image_id))
        if "image_w" in arrays and "image_h" in arrays:
            size = (float(arrays["image_w"]), float(arrays["image_h"]))
        return self._checked_regions(features, boxes, size, where)


    def _oriented(self, features, regions, where):
        """`features` as `[N, C]`: OpenVQA's files hold `x` channels-first,
        `[C, N]`. The layout is the store's (`layout`), else the first
        file's, told by which axis has the boxes' count; a file that can
        only be the other layout, or a square one that could be either
        before the store knows, is an error, never a guess."""
        features = np.asarray(features)
        if features.ndim != 2:
            return features  # `_checked_regions` names the shape
        rows, columns = features.shape[0] == regions, features.shape[1] == regions
        if not (rows or columns):
            return features  # `_checked_regions` names the boxes' shape
        if self.layout is None:
            if rows and columns:
                raise ValueError(
                    f"{where}: features {features.shape} with {regions} boxes: rows [N, C] "
                    "(bottom-up-attention) or OpenVQA's channels-first [C, N] cannot be told "
                    "apart; name the layout (--features_format bottom_up_npz or openvqa).")
            self.layout = "rows" if rows else "channels_first"
        if self.layout == "channels_first":
            if not columns:
                raise ValueError(
                    f"{where}: features {features.shape} cannot be channels-first [C, N] "
                    f"(OpenVQA's layout, the store's) with {regions} boxes.")
            return features.T
        if not rows:
            raise ValueError(f"{where}: features {features.shape} cannot be rows [N, C] (the "
                             f"store's layout) with {regions} boxes.")
        return features


def _read_file(path):
    """`{key: array}` of a per-image file (`.npy`: the key "features"); errors name it."""
    try:
        if path.endswith(".npy"):
            return {"features": np.load(path, allow_pickle=False)}
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: not a readable NumPy file ({type(e).__name__}: {e}).") from None


def _first_key(arrays, keys):
    return next((k for k in keys if k in arrays), None)


class ArrayFeatures(FeatureStore):
    """Features of many images stacked in one `.npz` or HDF5 file.

    Layouts (`N` images):

    * grid: `image_ids [N]` + `features [N, H, W, C]` (or `grid_features`,
      as Shapes world writes it);
    * regions: `image_ids [N]` + `features [N, R, C]` + `boxes [N, R, 4]`
      (or Shapes world's `obj_features`, `obj_boxes`), optionally
      `num_boxes [N]` (or `num_obj`; rows past it are padding) and
      `image_w [N]`, `image_h [N]` for pixel boxes.

    An `.npz` is read into memory once; an HDF5 file is read one image at a
    time and kept open (close it with `close()` or a `with` block).

    Args:
        path: the `.npz`, `.h5` or `.hdf5` file.
        kind: "grid", "regions" or None (from the content; a file holding
            both, like Shapes world's, needs it).
        image_sizes: None, a `(width, height)` pair or a dict
            `{image_id: (width, height)}`, for pixel boxes (boxes already in
            [0, 1] are kept as they are).
    """

    def __init__(self, path, kind=None, *, image_sizes=None, _arrays=None):
        self.path = os.fspath(path)
        if kind is not None:
            checks.one_of("kind", kind, KINDS)
        self._file = None
        if _arrays is None:
            with np.load(self.path, allow_pickle=False) as z:
                _arrays = {k: z[k] for k in z.files}
        else:
            self._file = _arrays
        self._size = _size_lookup(image_sizes)
        keys = set(_arrays.keys())
        grid_key = next(
            (k for k in ("features", "grid_features")
             if k in keys and len(_arrays[k].shape) == 4), None
        )
        region_keys = None
        for features_key, boxes_key, counts_key in (
            ("features", "boxes", "num_boxes"), ("obj_features", "obj_boxes", "num_obj")
        ):
            if features_key in keys and boxes_key in keys and len(_arrays[features_key].shape) == 3:
                region_keys = (features_key, boxes_key, counts_key if counts_key in keys else None)
                break
        found = [k for k, v in (("grid", grid_key), ("regions", region_keys)) if v]
        if "image_ids" not in keys or not found:
            raise ValueError(
                f"{self.path}: expected 'image_ids' [N] with 'features' [N, H, W, C] (grid) "
                "or 'features' [N, R, C] + 'boxes' [N, R, 4] (regions), or Shapes world's "
                f"'grid_features' / 'obj_features' + 'obj_boxes'; found {sorted(keys)}."
            )
        if kind is None:
            if len(found) > 1:
                raise ValueError(
                    f"{self.path}: holds both grid and region features; pass kind='grid' or "
                    "kind='regions'."
                )
            kind = found[0]
        elif kind not in found:
            raise ValueError(f"{self.path}: holds no {kind} features (found {found[0]}).")
        self.kind = kind
        image_ids = np.asarray(_arrays["image_ids"][()])
        if image_ids.ndim != 1 or not np.issubdtype(image_ids.dtype, np.integer):
            raise ValueError(
                f"{self.path}: 'image_ids' must be a 1-D integer array; found "
                f"{image_ids.dtype} {image_ids.shape}."
            )
        self._rows = {}
        for row, image_id in enumerate(image_ids.tolist()):
            if image_id in self._rows:
                raise ValueError(
                    f"{self.path}: image id {image_id} is listed twice in 'image_ids' "
                    f"(rows {self._rows[image_id]} and {row})."
                )
            self._rows[image_id] = row
        n = len(image_ids)
        if kind == "grid":
            self._features = _arrays[grid_key]
            self._keys = (grid_key,)
            if self._features.shape[0] != n:
                raise ValueError(
                    f"{self.path}: '{grid_key}' has {self._features.shape[0]} rows but "
                    f"'image_ids' has {n}."
                )
            self.grid_shape = tuple(self._features.shape[1:3])
            self.feature_dim = self._features.shape[3]
            return
        features_key, boxes_key, counts_key = region_keys
        self._features, self._boxes = _arrays[features_key], _arrays[boxes_key]
        self._keys = region_keys
        r = self._features.shape[1]
        if self._features.shape[0] != n or tuple(self._boxes.shape) != (n, r, 4):
            raise ValueError(
                f"{self.path}: '{features_key}' {tuple(self._features.shape)} and "
                f"'{boxes_key}' {tuple(self._boxes.shape)} must be [N, R, C] and [N, R, 4] "
                f"with N={n} ('image_ids')."
            )
        counts = np.full((n,), r, np.int64)
        if counts_key is not None:
            counts = np.asarray(_arrays[counts_key][()])
            if counts.shape != (n,) or (counts < 0).any() or (counts > r).any():
                raise ValueError(
                    f"{self.path}: '{counts_key}' must be [N={n}] counts in [0, {r}]; found "
                    f"shape {counts.shape}, values in [{counts.min()}, {counts.max()}]."
                )
        self._counts = counts.astype(np.int64)
        self._image_wh = None
        if "image_w" in keys and "image_h" in keys:
            self._image_wh = tuple(np.asarray(_arrays[k][()]) for k in ("image_w", "image_h"))
            if any(a.shape != (n,) for a in self._image_wh):
                raise ValueError(
                    f"{self.path}: 'image_w' and 'image_h' must be [N={n}]; found "
                    f"{[a.shape for a in self._image_wh]}."
                )
        self.feature_dim = self._features.shape[2]

    def _ids(self):
        return self._rows

    def _grid(self, image_id):
        where = f"{self.path} (image id {image_id}, '{self._keys[0]}')"
        return self._checked_grid(self._features[self._rows[image_id]], where)

    def _regions(self, image_id):
        row = self._rows[image_id]
        count = int(self._counts[row])
        where = f"{self.path} (image id {image_id}, '{self._keys[0]}')"
        features = np.asarray(self._features[row])[:count]
        boxes = np.asarray(self._boxes[row])[:count]
        size = _pixel_size(boxes, self._size(image_id))
        if self._image_wh is not None:
            size = (float(self._image_wh[0][row]), float(self._image_wh[1][row]))
        return self._checked_regions(features, boxes, size, where)

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None


class Hdf5ImageDatasets(FeatureStore):
    """An HDF5 file of one grid dataset `[H, W, C]` per image, named by its id.

    Datasets whose name is not an id (digits) are left out and listed in
    `unmatched_keys`.

    Args:
        path: the `.h5` / `.hdf5` file (kept open; `close()` it).
        h5file: the open `h5py.File`.
    """

    kind = "grid"

    def __init__(self, path, h5file):
        import h5py

        self.path = os.fspath(path)
        self._file = h5file
        self._keys, self.unmatched_keys = {}, []
        for key, item in h5file.items():
            if isinstance(item, h5py.Dataset) and key.isascii() and key.isdigit():
                image_id = int(key)
                if image_id in self._keys:
                    raise ValueError(
                        f"{self.path}: image id {image_id} has two datasets: "
                        f"{self._keys[image_id]!r} and {key!r}."
                    )
                self._keys[image_id] = key
            else:
                self.unmatched_keys.append(key)
        if not self._keys:
            raise ValueError(
                f"{self.path}: expected 'image_ids' + 'features' datasets or one dataset per "
                f"image named by its id; found {sorted(h5file.keys())[:10]}."
            )
        first = min(self._keys)
        array = self._checked_grid(h5file[self._keys[first]][()], f"{self.path} (image id {first})")
        self.grid_shape = array.shape[:2]
        self.feature_dim = array.shape[2]

    def _ids(self):
        return self._keys

    def _grid(self, image_id):
        where = f"{self.path} (image id {image_id}, dataset {self._keys[image_id]!r})"
        return self._checked_grid(self._file[self._keys[image_id]][()], where)

    def _regions(self, image_id):  # never reached: kind is always "grid"
        raise NotImplementedError

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None


def _open_hdf5(path, kind, image_sizes):
    import h5py

    try:
        h5file = h5py.File(path, "r")
    except OSError as e:
        raise ValueError(f"{path}: not a readable HDF5 file ({e}).") from None
    try:
        if "image_ids" in h5file:
            return ArrayFeatures(path, kind, image_sizes=image_sizes, _arrays=h5file)
        if kind == "regions":
            raise ValueError(
                f"{path}: region features in HDF5 need 'image_ids', 'features' [N, R, C] and "
                "'boxes' [N, R, 4] datasets."
            )
        return Hdf5ImageDatasets(path, h5file)
    except BaseException:
        h5file.close()
        raise


def open_features(path, kind=None, *, file_names=None, image_sizes=None):
    """Opens a feature store, choosing the reader from the path and content.

    * a folder: `FolderFeatures` (per-image `.npy` / `.npz` files);
    * `.h5` / `.hdf5`: `ArrayFeatures` when it has `image_ids`, otherwise
      `Hdf5ImageDatasets` (one dataset per image id);
    * `.npz`: `ArrayFeatures` (stacked features, Shapes world's
      `features_<split>.npz` included).

    Args:
        path: the folder or file.
        kind: "grid", "regions" or None (from the content).
        file_names: for a folder of files named by image file name: a dict
            `{image_id: file_name}` or the caption records.
        image_sizes: None, a `(width, height)` pair or a dict `{image_id:
            (width, height)}`, to normalise pixel boxes of files that do not
            hold the image size.

    Returns:
        A `FeatureStore`.

    Raises:
        FileNotFoundError: if nothing is at `path`.
        ValueError: naming the path, for an unknown extension, a layout it
            does not recognise, or a file that holds both kinds without
            `kind`.
    """
    if kind is not None:
        checks.one_of("kind", kind, KINDS)
    name = os.fspath(path)
    if os.path.isdir(name):
        return FolderFeatures(name, kind, file_names=file_names, image_sizes=image_sizes)
    if not os.path.isfile(name):
        raise FileNotFoundError(f"No such feature file or folder: {name!r}")
    ext = os.path.splitext(name)[1].lower()
    if ext in (".h5", ".hdf5"):
        return _open_hdf5(name, kind, image_sizes)
    if ext == ".npz":
        try:
            return ArrayFeatures(name, kind, image_sizes=image_sizes)
        except (OSError, EOFError) as e:
            raise ValueError(f"{name}: not a readable .npz file ({e}).") from None
    raise ValueError(
        f"{name}: unknown feature file type {ext!r}; expected a folder of .npy/.npz files, "
        "an .npz, .h5 or .hdf5 file."
    )


def _stored_shape(path, keys):
    """The shape of the first of `keys` in a per-image file, from its header
    only (a `.npy`, or the member of an `.npz`); None if it has none of
    them (`.npz`: its only array stands for "features")."""
    try:
        if path.endswith(".npy"):
            return np.load(path, mmap_mode="r", allow_pickle=False).shape
        with zipfile.ZipFile(path) as z:
            names = [n[:-4] for n in z.namelist() if n.endswith(".npy")]
            key = _first_key(names, keys) or (names[0] if len(names) == 1 else None)
            if key is None:
                return None
            with z.open(f"{key}.npy") as member:
                version = np.lib.format.read_magic(member)
                read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                        else np.lib.format.read_array_header_2_0)
                return read(member)[0]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: not a readable NumPy file ({type(e).__name__}: {e}).") from None


def check_shapes(store, image_ids=None):
    """Checks that every image of a folder store has features of one shape.

    Reads only the files' headers (seconds for a folder of COCO's size),
    so that a run can refuse an odd file before it starts, not when a
    batch reaches it. The shape most files have is the reference: the
    error names the odd file, not the first one read. Stores of stacked
    arrays have one shape by construction and pass.

    Args:
        store: a `FeatureStore`.
        image_ids: the images to check (default: all).

    Raises:
        ValueError: naming a file whose shape differs from most, the two
            shapes and how many files have each.
    """
    if not isinstance(store, FolderFeatures):
        return
    keys = _FEATURE_KEYS if store.kind == "regions" else ("features", "grid")
    shapes = {}
    for image_id in store.image_ids() if image_ids is None else image_ids:
        path = store._files.get(_image_key(image_id))
        if path is None:
            continue
        shape = _stored_shape(path, keys)
        if shape is None:
            continue  # `regions()` names the missing array when it is read
        shape = tuple(shape) if store.kind == "grid" else (len(shape), shape[-1] if shape else 0)
        shapes.setdefault(shape, []).append(path)
    if len(shapes) <= 1:
        return
    ranked = sorted(shapes.items(), key=lambda item: -len(item[1]))
    (common, files), (odd, odd_files) = ranked[0], ranked[-1]
    what = "shape" if store.kind == "grid" else "(dimensions, width)"
    raise ValueError(
        f"{odd_files[0]}: features of {what} {odd}, but {len(files)} of the "
        f"{sum(len(f) for f in shapes.values())} files in {store.path} have {common} (e.g. "
        f"{os.path.basename(files[0])}); {len(odd_files)} have {odd}: all images must agree."
    )


def select_images(store, records, missing="error", skip_hint="missing='skip'"):
    """The caption records whose images have features in `store`.

    Args:
        store: a `FeatureStore`.
        records: `ImageCaptions` (anything with `image_id`).
        missing: "error" (default: any image without features is an error)
            or "skip" (those records are left out and counted).
        skip_hint: how the caller skips them, for the error (a recipe
            names its flag).

    Returns:
        `(kept_records, num_skipped)`: a list in the order of `records`, and
        the number of records left out.

    Raises:
        ValueError: with `missing="error"`, naming the first image id without
            features, how many lack them, and the store's path.
    """
    checks.one_of("missing", missing, MISSING)
    records = list(records)
    kept = [r for r in records if r.image_id in store]
    skipped = len(records) - len(kept)
    if skipped and missing == "error":
        first = next(r.image_id for r in records if r.image_id not in store)
        raise ValueError(
            f"Image id {first} has no features in {store.path} ({skipped} of {len(records)} "
            f"images have none; {skip_hint} leaves them out and counts them)."
        )
    return kept, skipped


def grid_batch(store, image_ids):
    """The grid features of a batch of images.

    Args:
        store: a grid `FeatureStore`.
        image_ids: B int image ids.

    Returns:
        float32 `[B, H, W, C]`.
    """
    image_ids = list(image_ids)
    if not image_ids:
        raise ValueError("Argument `image_ids` is empty: a batch needs at least one image.")
    out = np.empty((len(image_ids), *store.grid_shape, store.feature_dim), np.float32)
    for row, image_id in enumerate(image_ids):
        out[row] = store.grid(image_id)
    return out


def region_batch(store, image_ids, max_regions=None, *, counts=None):
    """The region features of a batch of images, padded to one length.

    Args:
        store: a regions `FeatureStore`.
        image_ids: B int image ids.
        max_regions: None (R = the most regions of an image of the batch,
            at least 1) or a positive int (R = `max_regions`, a static shape
            for every batch; an image with more keeps its first
            `max_regions`, as detectors list them by confidence).
        counts: optional `collections.Counter`, incremented with "images",
            "regions" (kept), "truncated_images" and "dropped_regions".

    Returns:
        `(features, boxes, mask)`: float32 `[B, R, C]`, float32 `[B, R, 4]`
        and bool `[B, R]` (True for a real region); padding rows are zero
        and False.
    """
    if max_regions is not None:
        checks.positive_int("max_regions", max_regions)
    image_ids = list(image_ids)
    if not image_ids:
        raise ValueError("Argument `image_ids` is empty: a batch needs at least one image.")
    items = [store.regions(image_id) for image_id in image_ids]
    longest = max(len(f) for f, _ in items)
    r = max(1, longest) if max_regions is None else max_regions
    features = np.zeros((len(items), r, store.feature_dim), np.float32)
    boxes = np.zeros((len(items), r, 4), np.float32)
    mask = np.zeros((len(items), r), bool)
    truncated = dropped = kept = 0
    for row, (f, b) in enumerate(items):
        n = min(len(f), r)
        features[row, :n], boxes[row, :n], mask[row, :n] = f[:n], b[:n], True
        kept += n
        if len(f) > r:
            truncated += 1
            dropped += len(f) - r
    if counts is not None:
        counts.update(
            {"images": len(items), "regions": kept, "truncated_images": truncated,
             "dropped_regions": dropped}
        )
    return features, boxes, mask


def fitted_max_regions(store, wanted):
    """A `max_regions` for `region_batch`: `wanted`, or fewer when less is needed.

    When every image of an in-memory store (`ArrayFeatures`) has fewer
    regions than `wanted` (e.g. Shapes world's 8), padding to `wanted`
    would only cost time. A folder of files is not read through for this.

    Args:
        store: a regions `FeatureStore`.
        wanted: the positive int wanted.

    Returns:
        `wanted`, or the most regions of an image of an in-memory store
        (at least 1) when that is fewer.
    """
    if not isinstance(store, ArrayFeatures):
        return wanted
    most = max((len(store.regions(i)[0]) for i in store.image_ids()), default=1)
    return max(1, min(wanted, most))
