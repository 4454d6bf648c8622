"""A Shapes world generated once for a training run and reused.

A recipe without data flags trains on a world written in its run folder
(`write_world`), whose settings (sizes, seed, bias, layout, region
geometry) are saved beside it in
`recipe_world.json`: a later command reuses the world when it asks for the
same settings (`read_settings`). The world is written to a temporary folder
and renamed into place, so a killed run never leaves half a world, and the
processes of a multi-process run on one host may all make it at once.
"""

import json
import os
import shutil

import numpy as np

from keras_structattn.data.json_files import atomic_open
from keras_structattn.data.shapes_world.writers import features_path

SETTINGS_FILE = "recipe_world.json"


def read_settings(folder):
    """The settings of the world cached in `folder`.

    Args:
        folder: the world's folder.

    Returns:
        The dict `write_world` saved, or None if the folder holds no world
        (a folder without its settings is not one).
    """
    path = os.path.join(folder, SETTINGS_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_world(folder, settings, tasks, write_extras=None):
    """Generates a world and puts it in place at `folder`, whole.

    A folder there without settings (half a world) is replaced. If another
    process puts the same world in place first, that one is kept (it may
    be reading it already) and this one's temporary folder is removed.

    Args:
        folder: where the world goes.
        settings: `train`, `val`, `test` (the splits' sizes), `seed` and
            optionally `bias` (`Bias.parse`'s text), `layout` (a
            `layouts.LAYOUTS` name, default "default") and `region_geometry`
            (default True); saved with the world.
        tasks: the tasks to generate (`generate`'s `tasks`).
        write_extras: optional `write_extras(world, temporary_folder)`,
            writing more files (baselines) into the folder being made.

    Returns:
        The generated `ShapesWorld`.
    """
    from keras_structattn.data import shapes_world

    world = shapes_world.generate(settings["train"], settings["val"], settings["test"],
                                  tasks=tasks, seed=settings["seed"], bias=settings.get("bias"),
                                  layout=settings.get("layout", "default"),
                                  region_geometry=settings.get("region_geometry", True))
    # One temporary folder per process: the processes of a multi-process
    # run on one host all make the same world.
    partial = f"{folder}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    shapes_world.write(world, partial)
    if write_extras is not None:
        write_extras(world, partial)
    with atomic_open(os.path.join(partial, SETTINGS_FILE)) as f:
        f.write(json.dumps(settings, indent=2) + "\n")
    if read_settings(folder) is None:
        shutil.rmtree(folder, ignore_errors=True)
    try:
        os.replace(partial, folder)
    except OSError:
        if read_settings(folder) is None:
            raise
        shutil.rmtree(partial, ignore_errors=True)
    return world


def world_bias(folder):
    """The bias of the world cached in `folder`.

    Args:
        folder: the world's folder.

    Returns:
        `(shape, colour)`, or None for an unbiased world.
    """
    text = read_settings(folder).get("bias")
    if text is None:
        return None
    shape, rest = text.split("=", 1)
    return shape, rest.split(":", 1)[0]


def scene_images(folder, split, image_ids):
    """The images of scenes of a written world.

    Args:
        folder: the world's folder.
        split: the split's name.
        image_ids: the scenes' image ids.

    Returns:
        A list of RGB images, uint8 `[H, W, 3]`.
    """
    with np.load(features_path(folder, split)) as data:
        index = {int(i): k for k, i in enumerate(data["image_ids"])}
        return [data["images"][index[i]] for i in image_ids]
