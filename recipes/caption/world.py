"""The captioning recipe's embedded default: Shapes world, generated once.

The world is generated from `--world_train/--world_val/--world_test` and the
run's seed (`keras_structattn.data.shapes_world`, deterministic) and
written under `DIR/shapes_world` in the real formats (COCO captions JSON
and `.npz` features, read back by the same loaders as real COCO), with the
"describe the biggest shape" captions of every split in the COCO results
format: the trivial baseline a captioner must beat. It is written to a
temporary folder and renamed into place, so a killed run never leaves half
a world; a later command reuses it when its sizes and seed match.
"""

import json
import os
import shutil

from recipes import _cli
from recipes._run import write_json

FOLDER = "shapes_world"
SETTINGS_FILE = "recipe_world.json"
BASELINE_NAME = 'the "describe the biggest shape" caption ("a <size> <colour> <shape>")'


def folder_of(args):
    return os.path.join(args.output_dir, FOLDER)


def _wanted(args):
    return {"train": args.world_train, "val": args.world_val, "test": args.world_test,
            "seed": _world_seed(args)}


def _world_seed(args):
    """The world's seed: --world_seed, else the run's (saved in run.json
    once the run exists)."""
    from recipes._run import RunFolder

    if args.world_seed is not None:
        return args.world_seed
    saved = RunFolder(args.output_dir).settings()
    if saved is not None:
        return saved["seed"]
    from recipes.caption import RUN_DEFAULTS

    return RUN_DEFAULTS["seed"] if args.seed is None else args.seed


def ensure_world(args):
    """The Shapes world folder of the run, generated if absent.

    Returns:
        The folder (`DIR/shapes_world`).

    Raises:
        UsageError: if the folder holds a world of other sizes or seed.
    """
    folder = folder_of(args)
    wanted = _wanted(args)
    settings_path = os.path.join(folder, SETTINGS_FILE)
    if os.path.exists(settings_path):
        with open(settings_path, encoding="utf-8") as f:
            saved = json.load(f)
        if args.world_seed is None:
            # A run trained with --world_seed: later commands reuse its world.
            wanted["seed"] = saved.get("seed")
        if saved != wanted:
            differences = ", ".join(f"{k} {wanted[k]} (cached: {saved.get(k)})"
                                    for k in wanted if saved.get(k) != wanted[k])
            raise _cli.UsageError(
                f"{folder} holds a Shapes world of other sizes: {differences}; leave the "
                "--world_* flags out or use a new --output_dir")
        print(f"[data] Shapes world: reusing {folder}")
        return folder
    from keras_structattn.data import shapes_world
    from keras_structattn.data.shapes_world.baselines import biggest_caption

    world = shapes_world.generate(wanted["train"], wanted["val"], wanted["test"],
                                  tasks="captions", seed=wanted["seed"])
    partial = folder + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    shapes_world.write(world, partial)
    for name, split in world.splits.items():
        write_json(os.path.join(partial, f"baseline_{name}.json"), [
            {"image_id": scene.image_id, "caption": biggest_caption(scene)}
            for scene in split.scenes
        ])
    write_json(os.path.join(partial, SETTINGS_FILE), wanted)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(partial, folder)
    sizes = ", ".join(f"{k} {v}" for k, v in wanted.items() if k != "seed")
    print(f"[data] Shapes world generated in {world.seconds:.0f} s ({sizes} images, seed "
          f"{wanted['seed']}) -> {folder}")
    return folder


def captions_path(folder, split):
    return os.path.join(folder, "captions", f"captions_{split}.json")


def features_path(folder, split):
    return os.path.join(folder, f"features_{split}.npz")


def baseline_path(args, split):
    """The baseline results of a split, or None when the run uses real data."""
    from recipes.caption import data_flags_given

    if data_flags_given(args):
        return None
    return os.path.join(folder_of(args), f"baseline_{split}.json")


def images_of(args, split, records):
    """The RGB images (uint8 `[H, W, 3]`) of `records`: from the Shapes world
    features file, or read from --images by file name."""
    import numpy as np

    from recipes.caption import data_flags_given

    if not data_flags_given(args):
        with np.load(features_path(folder_of(args), split.name)) as data:
            index = {int(i): k for k, i in enumerate(data["image_ids"])}
            return [data["images"][index[r.image_id]] for r in records]
    if not args.images:
        raise _cli.UsageError("visualize needs --images, the folder of the split's images")
    from PIL import Image

    images = []
    for record in records:
        path = os.path.join(args.images, os.path.basename(record.file_name))
        if not os.path.exists(path):
            raise FileNotFoundError(f"image {record.image_id}: no file {path}")
        with Image.open(path) as image:
            images.append(np.asarray(image.convert("RGB")))
    return images
