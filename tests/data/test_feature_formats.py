"""The anchors' region feature stores, each written here the way the
anchor's own code writes it (bottom-up-attention's generate_tsv.py,
OpenVQA, mmf's extraction scripts and LMDB conversion,
bottom-up-attention-vqa's converter, self-critical.pytorch's
make_bu_data.py), read back against the arrays written: the features as
rows, the boxes divided by the image size by hand."""

import base64
import csv
import pickle

import numpy as np
import pytest

from keras_structattn.data import feature_formats
from keras_structattn.data.feature_formats import FORMATS
from keras_structattn.data.feature_formats import detect_format
from keras_structattn.data.feature_formats import image_sizes_from_coco
from keras_structattn.data.feature_formats import open_region_features
from keras_structattn.data.image_features import region_batch

C = 6
SIZES = {9: (640.0, 480.0), 25: (500.0, 375.0), 30: (320.0, 240.0)}
COUNTS = {9: 3, 25: 5, 30: 4}


def images(seed=0):
    """`{image_id: (features [N, C], pixel boxes [N, 4], (w, h))}`."""
    rng = np.random.default_rng(seed)
    out = {}
    for image_id, (w, h) in SIZES.items():
        n = COUNTS[image_id]
        x1, y1 = rng.uniform(0, w / 2, n), rng.uniform(0, h / 2, n)
        boxes = np.stack([x1, y1, x1 + rng.uniform(1, w / 2, n), y1 + rng.uniform(1, h / 2, n)],
                         -1).astype(np.float32)
        out[image_id] = (rng.normal(size=(n, C)).astype(np.float32), boxes, (w, h))
    return out


def assert_reads_back(store, written):
    assert store.kind == "regions" and store.feature_dim == C
    assert store.image_ids() == sorted(written)
    for image_id, (features, boxes, (w, h)) in written.items():
        got_features, got_boxes = store.regions(image_id)
        np.testing.assert_array_equal(got_features, features)
        np.testing.assert_allclose(got_boxes, boxes / np.array([w, h, w, h]), rtol=1e-6)


def test_the_recipes_flag_lists_the_formats():
    from recipes import _cli

    assert _cli.FEATURE_FORMATS == FORMATS


def test_bottom_up_tsv(tmp_path):
    """generate_tsv.py: csv.DictWriter, tab-separated, base64 of float32."""
    written = images()
    path = tmp_path / "trainval_resnet101_faster_rcnn_genome_36.tsv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, delimiter="\t", fieldnames=feature_formats.TSV_FIELDS)
        for image_id, (features, boxes, (w, h)) in written.items():
            writer.writerow({"image_id": image_id, "image_w": int(w), "image_h": int(h),
                             "num_boxes": len(boxes),
                             "boxes": base64.b64encode(boxes.tobytes()).decode("ascii"),
                             "features": base64.b64encode(features.tobytes()).decode("ascii")})
    assert detect_format(path) == "bottom_up_tsv"
    assert_reads_back(open_region_features(path), written)
    lines = path.read_text().splitlines()
    fields = lines[1].split("\t")
    fields[3] = "7"  # num_boxes that the arrays cannot hold
    path.write_text("\n".join([lines[0], "\t".join(fields), lines[2]]) + "\n")
    store = open_region_features(path, "bottom_up_tsv")
    with pytest.raises(ValueError, match=r"line 2 \(image id 25\): num_boxes=7, but boxes "
                                         r"hold 20 floats"):
        store.regions(25)


def write_openvqa(folder, written, transpose=True):
    folder.mkdir()
    for image_id, (features, boxes, (w, h)) in written.items():
        np.savez(folder / f"COCO_train2014_{image_id:012d}.jpg.npz",
                 x=features.T if transpose else features, bbox=boxes, num_bbox=len(boxes),
                 image_h=h, image_w=w)


def test_openvqa_channels_first_npz_named_by_coco_file(tmp_path):
    written = images()
    write_openvqa(tmp_path / "train2014", written)
    store = open_region_features(tmp_path / "train2014")  # detected from x and bbox
    assert store.layout == "channels_first" and "channels-first" in store.describe()
    assert_reads_back(store, written)
    assert_reads_back(open_region_features(tmp_path / "train2014", "openvqa"), written)
    with pytest.raises(ValueError, match=r"cannot be rows \[N, C\] \(the store's layout\) "
                                         r"with 3 boxes"):
        open_region_features(tmp_path / "train2014", "bottom_up_npz")
    # Rows (bottom-up-attention.pytorch's x) are read as rows.
    write_openvqa(tmp_path / "rows", written, transpose=False)
    assert open_region_features(tmp_path / "rows").layout == "rows"
    with pytest.raises(ValueError, match=r"cannot be channels-first \[C, N\]"):
        open_region_features(tmp_path / "rows", "openvqa")


def test_a_square_openvqa_file_is_refused_not_guessed(tmp_path):
    """12 regions of 12 channels: either layout fits; the store asks."""
    folder = tmp_path / "f"
    folder.mkdir()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 12)).astype(np.float32)
    boxes = np.tile(np.float32([[0, 0, 10, 10]]), (12, 1))
    np.savez(folder / "COCO_train2014_000000000009.jpg.npz", x=x, bbox=boxes, num_bbox=12,
             image_h=100, image_w=100)
    with pytest.raises(ValueError, match=r"\(12, 12\) with 12 boxes: rows .* cannot be told "
                                         r"apart; name the layout \(--features_format"):
        open_region_features(folder)
    np.testing.assert_array_equal(open_region_features(folder, "openvqa").regions(9)[0], x.T)


def test_mmf_npy_and_info(tmp_path):
    written = images()
    for image_id, (features, boxes, (w, h)) in written.items():
        np.save(tmp_path / f"{image_id}.npy", features)
        np.save(tmp_path / f"{image_id}_info.npy",
                {"image_id": image_id, "bbox": boxes, "num_boxes": len(boxes),
                 "image_width": w, "image_height": h, "objects": np.zeros(len(boxes)),
                 "cls_prob": np.zeros((len(boxes), 1601))}, allow_pickle=True)
    assert detect_format(tmp_path) == "mmf_npy"
    assert_reads_back(open_region_features(tmp_path), written)


def test_mmf_lmdb(tmp_path):
    lmdb = pytest.importorskip("lmdb")
    written = images()
    path = tmp_path / "coco_trainval2014.lmdb"
    env = lmdb.open(str(path), map_size=1 << 24)
    with env.begin(write=True) as txn:
        keys = []
        for image_id, (features, boxes, (w, h)) in written.items():
            key = f"COCO_train2014_{image_id:012d}".encode()
            keys.append(key)
            txn.put(key, pickle.dumps({"features": features, "bbox": boxes,
                                       "num_boxes": len(boxes), "image_width": w,
                                       "image_height": h, "image_id": image_id}))
        txn.put(b"keys", pickle.dumps(keys))
    env.close()
    assert detect_format(path) == "mmf_lmdb"
    store = open_region_features(path)
    assert_reads_back(store, written)
    features, boxes, mask = region_batch(store, [25, 9], max_regions=4)
    assert mask.sum(1).tolist() == [4, 3]
    store.close()


def test_bottom_up_attention_vqa_hdf5_and_imgid2idx(tmp_path):
    h5py = pytest.importorskip("h5py")
    written = images()
    k = max(COUNTS.values())
    path = tmp_path / "trainval36.hdf5"
    rows = {image_id: row for row, image_id in enumerate(reversed(sorted(written)))}
    # The converter stores a fixed K boxes an image; here every image has K.
    fixed = {i: (np.resize(f, (k, C)), np.resize(b, (k, 4)), s)
             for i, (f, b, s) in written.items()}
    with h5py.File(path, "w") as f:
        features = f.create_dataset("image_features", (len(rows), k, C), "f")
        bb = f.create_dataset("image_bb", (len(rows), k, 4), "f")
        spatial = f.create_dataset("spatial_features", (len(rows), k, 6), "f")
        for image_id, row in rows.items():
            feats, boxes, (w, h) = fixed[image_id]
            features[row], bb[row] = feats, boxes
            scaled = boxes / np.array([w, h, w, h])
            spatial[row] = np.concatenate(
                [scaled, scaled[:, 2:3] - scaled[:, 0:1], scaled[:, 3:4] - scaled[:, 1:2]], -1)
    with open(tmp_path / "trainval36_imgid2idx.pkl", "wb") as f:
        pickle.dump(rows, f)
    assert detect_format(path) == "butd_hdf5"
    store = open_region_features(path)
    assert_reads_back(store, fixed)
    store.close()


def test_self_critical_cocobu_att_and_box(tmp_path):
    written = images()
    (tmp_path / "cocobu_att").mkdir()
    (tmp_path / "cocobu_box").mkdir()
    for image_id, (features, boxes, _) in written.items():
        np.savez_compressed(tmp_path / "cocobu_att" / f"{image_id}.npz", feat=features)
        np.save(tmp_path / "cocobu_box" / f"{image_id}.npy", boxes)
    folder = tmp_path / "cocobu_att"
    assert detect_format(folder) == "cocobu"
    store = open_region_features(folder, image_sizes=SIZES)
    assert_reads_back(store, written)
    with pytest.raises(ValueError, match=r"holds pixel boxes, and self-critical's files hold "
                                         r"no image size"):
        open_region_features(folder)
    # Alone, a cocobu_att folder is named for what it is, not "grid features".
    (tmp_path / "cocobu_box").rename(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match=r"looks like self-critical's cocobu_att.*"
                                         r"--features_format cocobu"):
        open_region_features(folder)


def test_image_sizes_from_a_coco_json(tmp_path):
    import json

    path = tmp_path / "captions_train2014.json"
    path.write_text(json.dumps({"images": [{"id": i, "width": w, "height": h}
                                           for i, (w, h) in SIZES.items()]}))
    assert image_sizes_from_coco(path) == SIZES
    path.write_text(json.dumps({"images": [{"id": 1, "width": 0, "height": 3}]}))
    with pytest.raises(ValueError, match=r"images\[0\]: expected an int 'id' and positive"):
        image_sizes_from_coco(path)


NAMES = {9: "0054c91397f2fe05", 25: "1234567890123456", 30: "ffa1d3e0b4c2a901"}


def test_image_ids_that_are_names(tmp_path):
    """TextVQA's Open Images ids (`name_ids`): each file's or key's name is
    the id, a str, all-digit names included; formats that hold int ids in
    their data are refused, not misread."""
    lmdb = pytest.importorskip("lmdb")
    written = images()
    named = {NAMES[image_id]: arrays for image_id, arrays in written.items()}
    mmf = tmp_path / "mmf"
    mmf.mkdir()
    env = lmdb.open(str(tmp_path / "textvqa.lmdb"), map_size=1 << 24)
    with env.begin(write=True) as txn:
        for name, (features, boxes, (w, h)) in named.items():
            info = {"bbox": boxes, "num_boxes": len(boxes), "image_width": w, "image_height": h}
            np.save(mmf / f"{name}.npy", features)
            np.save(mmf / f"{name}_info.npy", info, allow_pickle=True)
            txn.put(name.encode(), pickle.dumps({"features": features, **info}))
    env.close()
    for path in (mmf, tmp_path / "textvqa.lmdb"):
        store = open_region_features(path, name_ids=True)
        assert_reads_back(store, named)
        assert 1234567890123456 not in store
        store.close()
    # Read as int ids, the hex names are no image and the digits one is the int.
    assert open_region_features(mmf).image_ids() == [1234567890123456]
    tsv = tmp_path / "objects.tsv"
    tsv.write_text("1\t640\t480\t0\t\t\n")
    with pytest.raises(ValueError, match=r"--features_format bottom_up_tsv keys its images by "
                                         r"int ids"):
        open_region_features(tsv, name_ids=True)
    with pytest.raises(ValueError, match=r"`file_names` and `name_ids=True` exclude"):
        open_region_features(mmf, "bottom_up_npz", name_ids=True, file_names={1: "a.jpg"})
