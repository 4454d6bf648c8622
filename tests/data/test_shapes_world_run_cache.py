"""A run's cached Shapes world (`keras_structattn.data.shapes_world.run_cache`)
and the image readers of `keras_structattn.data.feature_extraction`."""

import os

import numpy as np
import pytest

from keras_structattn.data.feature_extraction import images_by_id
from keras_structattn.data.feature_extraction import read_images
from keras_structattn.data.shapes_world import run_cache
from keras_structattn.data.shapes_world.writers import features_path

SETTINGS = {"train": 3, "val": 2, "test": 2, "seed": 5}


def test_a_world_is_written_whole_with_its_settings(tmp_path):
    folder = str(tmp_path / "shapes_world")
    os.makedirs(folder)
    (tmp_path / "shapes_world" / "stale.txt").write_text("half a world")
    assert run_cache.read_settings(folder) is None
    world = run_cache.write_world(folder, dict(SETTINGS, bias="circle=red:0.9@train,val"),
                                  "refs")
    assert world.seconds >= 0
    assert sorted(os.listdir(tmp_path)) == ["shapes_world"]  # no temporary folder
    assert not os.path.exists(os.path.join(folder, "stale.txt"))
    assert run_cache.read_settings(folder)["seed"] == 5
    assert run_cache.world_bias(folder) == ("circle", "red")
    assert os.path.exists(features_path(folder, "val"))
    ids = [int(i) for i in np.load(features_path(folder, "val"))["image_ids"]]
    images = run_cache.scene_images(folder, "val", ids[::-1])
    assert len(images) == 2 and images[0].dtype == np.uint8 and images[0].shape[-1] == 3


def test_an_unbiased_world_has_no_bias(tmp_path):
    folder = str(tmp_path / "w")
    run_cache.write_world(folder, SETTINGS, "refs")
    assert run_cache.read_settings(folder) == SETTINGS
    assert run_cache.world_bias(folder) is None


def test_images_are_read_by_file_name_and_by_id(tmp_path):
    from PIL import Image

    for name, value in (("COCO_val2014_000000000042.jpg", 10), ("7.png", 200)):
        Image.fromarray(np.full((4, 5), value, np.uint8)).save(tmp_path / name)
    first, second = images_by_id(str(tmp_path), [7, 42])
    assert first.shape == (4, 5, 3) and int(first[0, 0, 0]) == 200
    assert abs(int(second[0, 0, 0]) - 10) <= 2  # JPEG
    (image,) = read_images(str(tmp_path), ["sub/7.png"], [7])
    assert int(image[0, 0, 1]) == 200
    with pytest.raises(FileNotFoundError, match="no image file for image id 3"):
        images_by_id(str(tmp_path), [3])
    with pytest.raises(FileNotFoundError, match="image 9: no file"):
        read_images(str(tmp_path), ["9.png"], [9])
