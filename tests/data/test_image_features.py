"""Feature stores and padded batches, against the arrays written and plain loops.

Every layout is written here (per-image .npy/.npz folders, HDF5 one dataset
per image or stacked, stacked .npz, Shapes world's `features_<split>.npz`),
then read back through `open_features`; the malformed ones check that the
error names the file or store and the image id.
"""

import collections

import numpy as np
import pytest

from keras_structattn.data import shapes_world as sw
from keras_structattn.data.image_features import ArrayFeatures
from keras_structattn.data.image_features import FolderFeatures
from keras_structattn.data.image_features import Hdf5ImageDatasets
from keras_structattn.data.image_features import check_shapes
from keras_structattn.data.image_features import fitted_max_regions
from keras_structattn.data.image_features import grid_batch
from keras_structattn.data.image_features import open_features
from keras_structattn.data.image_features import region_batch
from keras_structattn.data.image_features import select_images
from keras_structattn.tasks.captioning.coco_captions import ImageCaptions

h5py = pytest.importorskip("h5py")

GRID = (3, 2, 5)  # H, W, C: H != W so a transposed read would show
IDS = [7, 123, 40]


def grids(seed=0):
    rng = np.random.default_rng(seed)
    return {i: rng.normal(size=GRID).astype(np.float32) for i in IDS}


def region_items(seed=0, dim=6):
    """`{id: (features [N, C], pixel boxes [N, 4], (w, h))}`, N varying (0 included)."""
    rng = np.random.default_rng(seed)
    out = {}
    for i, n in zip(IDS, (4, 0, 9)):
        w, h = int(rng.integers(50, 90)), int(rng.integers(40, 80))
        xy = rng.uniform(0, 0.5, size=(n, 2)) * [w, h]
        wh = rng.uniform(0, 0.5, size=(n, 2)) * [w, h]
        boxes = np.concatenate([xy, xy + wh], axis=1)
        out[i] = (rng.normal(size=(n, dim)).astype(np.float32), boxes, (w, h))
    return out


def brute_force_regions(items, ids, r):
    """Padded arrays built entry by entry."""
    dim = next(iter(items.values()))[0].shape[1]
    features = np.zeros((len(ids), r, dim), np.float32)
    boxes = np.zeros((len(ids), r, 4), np.float32)
    mask = np.zeros((len(ids), r), bool)
    for b, image_id in enumerate(ids):
        f, pixel_boxes, (w, h) = items[image_id]
        for k in range(min(r, len(f))):
            features[b, k] = f[k]
            boxes[b, k] = [pixel_boxes[k][0] / w, pixel_boxes[k][1] / h,
                           pixel_boxes[k][2] / w, pixel_boxes[k][3] / h]
            mask[b, k] = True
    return features, boxes, mask


# --------------------------------------------------------------------------
# Folders of per-image files.


@pytest.mark.parametrize("ext", [".npy", ".npz"])
def test_folder_grid_by_id(tmp_path, ext):
    arrays = grids()
    for i, a in arrays.items():
        name = tmp_path / (f"{i:012d}" if i == 123 else str(i))  # zero-padded names too
        if ext == ".npy":
            np.save(f"{name}.npy", a.astype(np.float16 if i == 40 else np.float32))
        else:
            np.savez(f"{name}.npz", features=a)
    (tmp_path / "notes.txt").write_text("ignored")
    store = open_features(tmp_path)
    assert isinstance(store, FolderFeatures) and store.kind == "grid"
    assert store.image_ids() == sorted(IDS) and len(store) == 3 and 123 in store
    assert store.grid_shape == GRID[:2] and store.feature_dim == GRID[2]
    order = [40, 7, 123, 7]
    batch = grid_batch(store, order)
    assert batch.dtype == np.float32 and batch.shape == (4, *GRID)
    for b, i in enumerate(order):
        # Image 40's .npy is float16 (half the disk), read back as float32.
        want = arrays[i].astype(np.float16) if (i == 40 and ext == ".npy") else arrays[i]
        np.testing.assert_array_equal(batch[b], want.astype(np.float32))
    assert "3 images" in store.describe()


def test_folder_named_by_coco_file_names(tmp_path):
    # What `extract` writes for COCO's images, and what the docs show: the
    # id is read from the name, no caption records needed (caption decode).
    arrays = grids()
    for i, a in arrays.items():
        np.save(tmp_path / f"COCO_val2014_{i:012d}.npy", a)
    np.save(tmp_path / "COCO_val2014_000000999999.npy", arrays[7])  # no caption record
    np.save(tmp_path / "COCO_val2014_notanid.npy", arrays[7])
    store = open_features(tmp_path)
    assert store.image_ids() == sorted([*IDS, 999999])
    assert store.unmatched_files == ["COCO_val2014_notanid.npy"]
    np.testing.assert_array_equal(store.grid(123), arrays[123])
    np.testing.assert_array_equal(store.grid(999999), arrays[7])


def test_folder_named_by_file_name_stem(tmp_path):
    arrays = grids()
    records = [ImageCaptions(i, f"images/img_{i}_a.jpg", ["c"], [["c"]]) for i in IDS]
    for i, a in arrays.items():
        np.save(tmp_path / f"img_{i}_a.npy", a)
    np.save(tmp_path / "img_999_a.npy", arrays[7])  # no caption record
    with pytest.raises(ValueError, match=r"4 files.*match no image id: give the images' "
                                         r"file names"):
        open_features(tmp_path)
    store = open_features(tmp_path, file_names=records)
    assert store.image_ids() == sorted(IDS)
    assert store.unmatched_files == ["img_999_a.npy"]
    np.testing.assert_array_equal(store.grid(123), arrays[123])
    by_dict = open_features(tmp_path, file_names={r.image_id: r.file_name for r in records})
    np.testing.assert_array_equal(by_dict.grid(40), arrays[40])
    # A caption record's file name wins over the id a COCO name carries.
    np.save(tmp_path / "COCO_val2014_000000000005.npy", arrays[40])
    named = open_features(tmp_path, file_names={5: "x.jpg", 6: "COCO_val2014_000000000005.jpg"})
    np.testing.assert_array_equal(named.grid(6), arrays[40])
    assert 5 not in named


def test_folder_grid_errors_name_the_file(tmp_path):
    arrays = grids()
    for i, a in arrays.items():
        np.save(tmp_path / f"{i}.npy", a)
    np.save(tmp_path / "40.npy", np.zeros((3, 3, 5), np.float32))
    store = open_features(tmp_path)
    with pytest.raises(ValueError, match=rf"{tmp_path / '40.npy'} \(image id 40\): grid features "
                                         r"of shape \(3, 3, 5\).*\(3, 2, 5\)"):
        grid_batch(store, [7, 40])
    bad = arrays[123].copy()
    bad[1, 1, 1] = np.nan
    np.save(tmp_path / "123.npy", bad)
    with pytest.raises(ValueError, match=r"123.npy \(image id 123\): the features hold NaN"):
        store.grid(123)
    with pytest.raises(ValueError, match=rf"Image id 5 has no features in {tmp_path}"):
        store.grid(5)
    with pytest.raises(ValueError, match="is a grid feature store"):
        store.regions(7)
    np.save(tmp_path / "0007.npy", arrays[7])
    with pytest.raises(ValueError, match=r"image id 7 has two feature files: 0007.npy and 7.npy"):
        open_features(tmp_path)
    (tmp_path / "0007.npy").unlink()
    (tmp_path / "123.npy").write_bytes(b"not numpy")
    with pytest.raises(ValueError, match=r"123.npy: not a readable NumPy file"):
        open_features(tmp_path).grid(123)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=rf"{empty}: no .npy or .npz feature file"):
        open_features(empty)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        open_features(tmp_path / "nowhere")


def test_folder_regions_bottom_up_style(tmp_path):
    items = region_items()
    for i, (f, b, (w, h)) in items.items():
        # bottom-up-attention's keys: x, bbox, num_bbox, image_w, image_h.
        np.savez(tmp_path / f"{i}.npz", x=f, bbox=b, num_bbox=len(f), image_w=w, image_h=h)
    store = open_features(tmp_path)
    assert store.kind == "regions" and store.feature_dim == 6 and store.grid_shape is None
    features, boxes = store.regions(123)
    assert features.shape == (0, 6) and boxes.shape == (0, 4)
    order = [7, 123, 40]
    counts = collections.Counter()
    got = region_batch(store, order, counts=counts)
    want = brute_force_regions(items, order, 9)  # R = the most regions in the batch
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    assert counts == {"images": 3, "regions": 13, "truncated_images": 0, "dropped_regions": 0}
    got = region_batch(store, order, max_regions=3, counts=counts)
    want = brute_force_regions(items, order, 3)  # the first 3 regions kept
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    assert counts["truncated_images"] == 2 and counts["dropped_regions"] == 1 + 6
    features, boxes, mask = region_batch(store, [123])
    assert features.shape == (1, 1, 6) and not mask.any()  # R >= 1 even with no region


def test_folder_regions_box_normalisation(tmp_path):
    items = region_items()
    for i, (f, b, _) in items.items():
        np.savez(tmp_path / f"{i}.npz", features=f, boxes=b)  # pixels, no image size
    with pytest.raises(ValueError, match=r"7.npz \(image id 7\): boxes must lie in \[0, 1\].*"
                                         r"image_w./.image_h. with the boxes"):
        open_features(tmp_path)
    sizes = {i: size for i, (_, _, size) in items.items()}
    store = open_features(tmp_path, image_sizes=sizes)
    got = region_batch(store, IDS)
    want = brute_force_regions(items, IDS, 9)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-7)
    # Boxes already in [0, 1] are kept as they are.
    norm = tmp_path / "normalised"
    norm.mkdir()
    for i, (f, b, (w, h)) in items.items():
        np.savez(norm / f"{i}.npz", features=f, boxes=b / [w, h, w, h])
    np.testing.assert_allclose(region_batch(open_features(norm), IDS)[1], want[1], atol=1e-6)
    # ... also when sizes are given (grounding gives every store its refs'
    # image sizes): they are for pixel boxes, not a second division.
    np.testing.assert_allclose(region_batch(open_features(norm, image_sizes=sizes), IDS)[1],
                               want[1], atol=1e-6)
    stacked = tmp_path / "stacked.npz"
    np.savez(stacked, image_ids=[7], features=items[7][0][None],
             boxes=(items[7][1] / [*items[7][2], *items[7][2]])[None])
    np.testing.assert_allclose(
        open_features(stacked, image_sizes=sizes).regions(7)[1],
        open_features(stacked).regions(7)[1])
    np.testing.assert_allclose(
        open_features(stacked).regions(7)[1], items[7][1] / [*items[7][2], *items[7][2]],
        atol=1e-6)
    np.savez(norm / "7.npz", features=items[7][0], boxes=items[7][1][:2] / 100)
    with pytest.raises(ValueError, match=r"7.npz \(image id 7\): 4 regions need boxes of shape"):
        open_features(norm).regions(7)
    with pytest.raises(ValueError, match="holds regions features, but kind='grid'"):
        open_features(norm, kind="grid")


# --------------------------------------------------------------------------
# HDF5 and stacked .npz files.


def test_hdf5_one_dataset_per_image(tmp_path):
    arrays = grids()
    path = tmp_path / "features.h5"
    with h5py.File(path, "w") as f:
        for i, a in arrays.items():
            f[str(i)] = a
        f["attrs_note"] = np.zeros(3)
    with open_features(path) as store:
        assert isinstance(store, Hdf5ImageDatasets) and store.kind == "grid"
        assert store.image_ids() == sorted(IDS) and store.unmatched_keys == ["attrs_note"]
        batch = grid_batch(store, [123, 7])
        np.testing.assert_array_equal(batch, np.stack([arrays[123], arrays[7]]))


@pytest.mark.parametrize("ext", [".h5", ".npz"])
def test_stacked_grid_and_regions(tmp_path, ext):
    arrays = grids()
    stacked = {"image_ids": np.array(IDS, np.int64), "features": np.stack([arrays[i] for i in IDS])}
    items = region_items(seed=1)
    r = 10
    regions = {
        "image_ids": np.array(IDS, np.int64),
        "features": np.zeros((3, r, 6), np.float32),
        "boxes": np.zeros((3, r, 4), np.float32),
        "num_boxes": np.array([len(items[i][0]) for i in IDS]),
        "image_w": np.array([items[i][2][0] for i in IDS], np.float32),
        "image_h": np.array([items[i][2][1] for i in IDS], np.float32),
    }
    for row, i in enumerate(IDS):
        n = len(items[i][0])
        regions["features"][row, :n] = items[i][0]
        regions["boxes"][row, :n] = items[i][1]
        regions["boxes"][row, n:] = 1e4  # padding rows past num_boxes are never read
    for name, data in (("grid", stacked), ("regions", regions)):
        path = tmp_path / f"{name}{ext}"
        if ext == ".h5":
            with h5py.File(path, "w") as f:
                for k, v in data.items():
                    f[k] = v
        else:
            np.savez(path, **data)
    with open_features(tmp_path / f"grid{ext}") as store:
        assert isinstance(store, ArrayFeatures) and store.kind == "grid"
        np.testing.assert_array_equal(grid_batch(store, [40, 7]), np.stack([arrays[40], arrays[7]]))
    with open_features(tmp_path / f"regions{ext}") as store:
        assert store.kind == "regions"
        got = region_batch(store, [40, 123, 7])
        want = brute_force_regions(items, [40, 123, 7], 9)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_stacked_errors_name_the_path(tmp_path):
    path = tmp_path / "dup.npz"
    np.savez(path, image_ids=np.array([1, 2, 1]), features=np.zeros((3, 2, 2, 4), np.float32))
    with pytest.raises(ValueError, match=rf"{path}: image id 1 is listed twice.*rows 0 and 2"):
        open_features(path)
    np.savez(path, image_ids=np.array([1, 2]), features=np.zeros((3, 2, 2, 4), np.float32))
    with pytest.raises(ValueError, match=rf"{path}: 'features' has 3 rows but 'image_ids' has 2"):
        open_features(path)
    np.savez(path, ids=np.array([1]), features=np.zeros((1, 2, 2, 4), np.float32))
    with pytest.raises(ValueError, match=rf"{path}: expected 'image_ids'"):
        open_features(path)
    np.savez(path, image_ids=np.array([1, 2]), features=np.zeros((2, 3, 4)),
             boxes=np.zeros((2, 3, 4)), num_boxes=np.array([1, 4]))
    with pytest.raises(ValueError, match=rf"{path}: 'num_boxes' must be \[N=2\] counts in"):
        open_features(path)
    other = tmp_path / "features.pt"
    other.write_bytes(b"x")
    with pytest.raises(ValueError, match=rf"{other}: unknown feature file type '.pt'"):
        open_features(other)
    bad_h5 = tmp_path / "bad.h5"
    bad_h5.write_bytes(b"not hdf5")
    with pytest.raises(ValueError, match=rf"{bad_h5}: not a readable HDF5 file"):
        open_features(bad_h5)


# --------------------------------------------------------------------------
# Shapes world's features file, and choosing the captioned images.


@pytest.fixture(scope="module")
def shapes_world_features(tmp_path_factory):
    world = sw.generate(train=5, val=0, test=0, tasks="captions", seed=2)
    features = world.splits["train"].features
    path = tmp_path_factory.mktemp("sw") / "features_train.npz"
    np.savez_compressed(path, **features)
    return path, features


def test_shapes_world_grid_and_regions(shapes_world_features):
    path, features = shapes_world_features
    with pytest.raises(ValueError, match="holds both grid and region features; pass kind="):
        open_features(path)
    ids = features["image_ids"].tolist()
    grid = open_features(path, kind="grid")
    assert grid.image_ids() == sorted(ids) and grid.feature_dim == 36
    np.testing.assert_array_equal(grid_batch(grid, ids[::-1]), features["grid_features"][::-1])
    regions = open_features(path, kind="regions")
    assert regions.feature_dim == sw.REGION_FEATURE_DIM
    got_features, got_boxes, mask = region_batch(regions, ids, max_regions=8)
    for row in range(len(ids)):
        n = features["num_obj"][row]
        assert mask[row].tolist() == [True] * n + [False] * (8 - n)
        np.testing.assert_array_equal(got_features[row, :n], features["obj_features"][row, :n])
        np.testing.assert_array_equal(got_boxes[row, :n], features["obj_boxes"][row, :n])
        assert not got_features[row, n:].any() and not got_boxes[row, n:].any()


def test_select_images(shapes_world_features):
    path, features = shapes_world_features
    store = open_features(path, kind="grid")
    ids = features["image_ids"].tolist()
    records = [ImageCaptions(i, f"{i}.png", ["c"], [["c"]]) for i in [ids[2], 99, ids[0], 98]]
    with pytest.raises(ValueError, match=rf"Image id 99 has no features in {path} \(2 of 4"):
        select_images(store, records)
    kept, skipped = select_images(store, records, missing="skip")
    assert [r.image_id for r in kept] == [ids[2], ids[0]] and skipped == 2
    kept, skipped = select_images(store, records[::2])
    assert len(kept) == 2 and skipped == 0
    with pytest.raises(ValueError, match="missing"):
        select_images(store, records, missing="drop")


def test_fitted_max_regions_reads_only_in_memory_stores(tmp_path):
    items = region_items()
    for i, (f, b, (w, h)) in items.items():
        np.savez(tmp_path / f"{i}.npz", features=f, boxes=b, image_w=w, image_h=h)
    assert fitted_max_regions(open_features(tmp_path), 100) == 100  # a folder: not read
    ids = list(items)
    np.savez(tmp_path / "stacked.npz", image_ids=np.array(ids),
             features=np.zeros((3, 9, 6), np.float32), boxes=np.zeros((3, 9, 4), np.float32),
             num_boxes=np.array([len(items[i][0]) for i in ids]),
             image_w=np.full(3, 100.0), image_h=np.full(3, 100.0))
    with open_features(tmp_path / "stacked.npz") as store:
        assert [fitted_max_regions(store, n) for n in (100, 5)] == [9, 5]


@pytest.mark.parametrize("ext", [".npy", ".npz"])
def test_check_shapes_names_the_odd_file_not_the_first(tmp_path, ext):
    # The odd file is the first one read (the smallest id): the store takes
    # its shape, and every other image would be blamed when read.
    arrays = {i: np.zeros(GRID, np.float32) for i in (10, 11, 12, 13)}
    arrays[1] = np.zeros((2, 3, 5), np.float32)
    for i, a in arrays.items():
        if ext == ".npy":
            np.save(tmp_path / f"{i}.npy", a)
        else:
            np.savez(tmp_path / f"{i}.npz", features=a)
    store = open_features(tmp_path)
    with pytest.raises(ValueError, match=rf"1{ext}: features of shape \(2, 3, 5\), but 4 of "
                                         r"the 5 files .* have \(3, 2, 5\) \(e.g. 10"):
        check_shapes(store)
    check_shapes(store, [10, 11, 12])  # only the images a split uses
    # A read of a good image names where the store's shape came from.
    with pytest.raises(ValueError, match=rf"10{ext} \(image id 10\).*but 1{ext} \(the first "
                                         r"file\) has \(2, 3, 5\)"):
        store.grid(10)


def test_check_shapes_of_region_files(tmp_path):
    for i, width in ((1, 6), (2, 6), (3, 7)):
        np.savez(tmp_path / f"{i}.npz", x=np.zeros((i + 1, width), np.float32),
                 bbox=np.tile([0.1, 0.1, 0.5, 0.5], (i + 1, 1)))
    store = open_features(tmp_path, "regions")
    with pytest.raises(ValueError, match=r"3.npz: features of \(dimensions, width\) \(2, 7\), "
                                         r"but 2 of the 3 files"):
        check_shapes(store)
    check_shapes(store, [1, 2])  # region counts may differ; widths may not
