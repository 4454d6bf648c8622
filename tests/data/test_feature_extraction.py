"""`extract_grid_features` on tiny generated images with a small random backbone.

The written maps are compared with the backbone's own output on images read,
resized and scaled here (MobileNetV2's inputs are `x / 127.5 - 1`, Sandler
et al., 2018, arXiv:1801.04381); the EfficientNet check compares with Keras'
own ImageNet architecture (its extra input scaling, tensorflow#49930), built
from the same weights file by handing Keras the file instead of a download.
"""

import os
import shutil

import keras
import numpy as np
import pytest
from PIL import Image

from keras_structattn.data.feature_extraction import build_backbone
from keras_structattn.data.feature_extraction import extract_grid_features
from keras_structattn.data.image_features import grid_batch
from keras_structattn.data.image_features import open_features

SIZE = 64  # MobileNetV2 maps a 64-pixel image to 2x2
ALPHA = {"alpha": 0.35}


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """Three small images of different sizes and modes, plus a non-image file."""
    folder = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)).save(
        folder / "COCO_val2014_000000000042.png")
    Image.fromarray(rng.integers(0, 256, (30, 30), dtype=np.uint8), "L").save(
        folder / "COCO_val2014_000000000007.png")
    Image.fromarray(rng.integers(0, 256, (70, 48, 3), dtype=np.uint8)).save(
        folder / "COCO_val2014_000000000100.jpg", quality=95)
    (folder / "README.txt").write_text("not an image")
    return folder


@pytest.fixture(scope="module")
def mobilenet(tmp_path_factory):
    """A random MobileNetV2 (alpha 0.35) and its saved weights file."""
    model = keras.applications.MobileNetV2(
        include_top=False, weights=None, input_shape=(SIZE, SIZE, 3), **ALPHA
    )
    # At random initialisation the maps are ~1e-10 (glorot kernels through 50
    # layers): scaling the last batch norm's gamma brings them to ~1 (below
    # ReLU6's cap), so float16 files and tolerances mean something.
    probe = np.random.default_rng(1).uniform(-1, 1, (2, SIZE, SIZE, 3)).astype(np.float32)
    peak = float(np.abs(keras.ops.convert_to_numpy(model(probe, training=False))).max())
    last_bn = model.get_layer("Conv_1_bn")
    last_bn.gamma.assign(keras.ops.convert_to_numpy(last_bn.gamma) * (2.0 / peak))
    path = tmp_path_factory.mktemp("weights") / "mobilenet.weights.h5"
    model.save_weights(path)
    return model, str(path)


def read_rgb(path, size):
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB").resize((size, size), Image.BILINEAR), np.float32)


def image_names(folder):
    names = sorted(p for p in os.listdir(folder) if p.endswith((".png", ".jpg")))
    assert [n[-7:-4] for n in names] == ["007", "042", "100"]  # image ids 7, 42, 100
    return names


@pytest.fixture(scope="module")
def expected_maps(images, mobilenet):
    """The backbone's maps of the images, read and scaled here (rows: ids 7, 42, 100)."""
    model, _ = mobilenet
    pixels = np.stack([read_rgb(images / n, SIZE) for n in image_names(images)])
    want = keras.ops.convert_to_numpy(model(pixels / 127.5 - 1.0, training=False))
    assert 0.1 < np.abs(want).max() < 6  # O(1), under ReLU6's cap
    return want


@pytest.fixture(scope="module")
def extracted(images, mobilenet, tmp_path_factory):
    _, weights = mobilenet
    out = tmp_path_factory.mktemp("features")
    report = extract_grid_features(
        images, out, weights=weights, backbone="MobileNetV2", image_size=SIZE,
        batch_size=2, backbone_kwargs=ALPHA, progress_every=2,
    )
    return out, report


def test_written_maps_equal_the_model_output(images, extracted, expected_maps):
    out, report = extracted
    names = image_names(images)
    assert sorted(os.listdir(out)) == sorted(os.path.splitext(n)[0] + ".npy" for n in names)
    assert (report.images, report.written, report.skipped_existing) == (3, 3, 0)
    assert report.ignored_files == 1 and report.feature_shape == (2, 2, 1280)
    atol = 1e-5 * np.abs(expected_maps).max()
    for name, want in zip(names, expected_maps):
        got = np.load(out / (os.path.splitext(name)[0] + ".npy"))
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol)


def test_progress_and_float16_by_id(images, mobilenet, expected_maps, tmp_path, capfd):
    _, weights = mobilenet
    extract_grid_features(
        images, tmp_path, weights=weights, backbone="MobileNetV2", image_size=SIZE,
        batch_size=2, backbone_kwargs=ALPHA, progress_every=2, naming="id", dtype="float16",
    )
    err = capfd.readouterr().err
    assert "2/3 images written" in err and "3/3 images written" in err
    # Named by image id and stored in float16, the folder reads back as a grid store.
    store = open_features(tmp_path)
    assert store.image_ids() == [7, 42, 100] and np.load(tmp_path / "7.npy").dtype == np.float16
    np.testing.assert_allclose(
        grid_batch(store, [7, 42, 100]), expected_maps, rtol=2e-3, atol=1e-3
    )


def test_resume_skips_what_is_written(images, mobilenet, extracted, tmp_path):
    _, weights = mobilenet
    out = tmp_path / "features"
    shutil.copytree(extracted[0], out)
    kwargs = dict(weights=weights, backbone="MobileNetV2", image_size=SIZE,
                  backbone_kwargs=ALPHA)
    stamps = {p: os.stat(out / p).st_mtime_ns for p in os.listdir(out)}
    again = extract_grid_features(images, out, **kwargs)
    assert (again.written, again.skipped_existing) == (0, 3)
    gone = "COCO_val2014_000000000007.npy"
    before = np.load(out / gone)
    os.remove(out / gone)
    resumed = extract_grid_features(images, out, **kwargs)
    assert (resumed.written, resumed.skipped_existing) == (1, 2)
    np.testing.assert_allclose(np.load(out / gone), before, rtol=1e-5, atol=1e-6)
    for name, stamp in stamps.items():
        if name != gone:
            assert os.stat(out / name).st_mtime_ns == stamp
    assert sorted(os.listdir(out)) == sorted(stamps)  # no temporary file left


def test_errors(images, mobilenet, tmp_path):
    kwargs = dict(backbone="MobileNetV2", image_size=32, backbone_kwargs=ALPHA)
    with pytest.raises(ValueError, match="local weights file.*weights='imagenet'"):
        extract_grid_features(images, tmp_path / "a", weights="imagenet", **kwargs)
    missing = tmp_path / "missing.weights.h5"
    with pytest.raises(ValueError, match=f"no such file '{missing}'"):
        extract_grid_features(images, tmp_path / "a", weights=missing, **kwargs)
    with pytest.raises(ValueError, match="backbone"):
        extract_grid_features(images, tmp_path / "a", weights=None, backbone="VGG16")
    clash = tmp_path / "clash"
    clash.mkdir()
    Image.new("RGB", (8, 8)).save(clash / "a_1.png")
    Image.new("RGB", (8, 8)).save(clash / "b_001.png")
    with pytest.raises(ValueError, match=r"a_1.png and .*b_001.png would both be written to 1.npy"):
        extract_grid_features(clash, tmp_path / "a", weights=None, naming="id", **kwargs)
    with pytest.raises(ValueError, match="naming='id' needs an image id"):
        extract_grid_features([images / "README.txt"], tmp_path / "a", weights=None,
                              naming="id", **kwargs)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no image file"):
        extract_grid_features(tmp_path / "empty", tmp_path / "b", weights=None, **kwargs)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "a.png").write_bytes(b"\x89PNG not really")
    Image.new("RGB", (8, 8)).save(broken / "b.png")
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=rf"{broken / 'a.png'}: not a readable image"):
        extract_grid_features(broken, out, weights=None, batch_size=1, **kwargs)
    assert os.listdir(out) == []  # nothing half-written


def test_efficientnet_matches_keras_imagenet_architecture(images, tmp_path, monkeypatch):
    """With a weights file, the backbone equals Keras' weights="imagenet" model."""
    from keras.src.applications import efficientnet

    size = 32
    model = keras.applications.EfficientNetB0(
        include_top=False, weights=None, input_shape=(size, size, 3)
    )
    # The ImageNet statistics Keras' EfficientNet files hold (the std as variance).
    norm = next(layer for layer in model.layers if isinstance(layer, keras.layers.Normalization))
    norm.adapt_mean.assign(np.array([0.485, 0.456, 0.406], np.float32))
    norm.adapt_variance.assign(np.array([0.229, 0.224, 0.225], np.float32))
    norm.finalize_state()
    weights = str(tmp_path / "efficientnet.weights.h5")
    model.save_weights(weights)
    monkeypatch.setattr(efficientnet.file_utils, "get_file", lambda *args, **kwargs: weights)
    reference = keras.applications.EfficientNetB0(
        include_top=False, weights="imagenet", input_shape=(size, size, 3)
    )
    backbone, preprocess = build_backbone("EfficientNetB0", size, weights)
    pixels = np.stack([read_rgb(images / n, size) for n in image_names(images)])
    want = keras.ops.convert_to_numpy(reference(pixels, training=False))
    got = keras.ops.convert_to_numpy(backbone(preprocess(pixels), training=False))
    unscaled = keras.ops.convert_to_numpy(model(pixels, training=False))
    assert np.abs(want - unscaled).max() > 1e-3 * np.abs(want).max()  # the scaling matters
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
