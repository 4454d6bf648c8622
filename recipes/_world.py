"""A recipe's embedded default data: Shapes world, generated once per run folder.

The world is generated from `--world_train/--world_val/--world_test` and
the run's seed (`keras_structattn.data.shapes_world`, deterministic) and
written under `DIR/shapes_world` in the real formats, so that the recipe
reads it back through the same loaders as real data. It is written to a
temporary folder and renamed into place, so a killed run never leaves half
a world; a later command reuses it when its sizes and seed match
(`recipe_world.json`).
"""

import json
import os
import shutil

from recipes import _cli
from recipes._run import RunFolder
from recipes._run import write_json

FOLDER = "shapes_world"
SETTINGS_FILE = "recipe_world.json"


def add_world_flags(group, train=2000, val=200, test=500):
    """Adds the `--world_*` flags to an argparse group (sizes left out:
    the cached world's, else these defaults)."""
    for split, size in (("train", train), ("val", val), ("test", test)):
        group.add_argument(f"--world_{split}", type=_cli.positive_int, default=None,
                           help=f"Shapes world: {split} images (default {size}, or the "
                           "run's world)")
    group.set_defaults(_world_sizes={"train": train, "val": val, "test": test})
    group.add_argument("--world_seed", type=int, default=None,
                       help="Shapes world: the generator's seed (default: the run's --seed)")
    group.add_argument("--world_bias", default=None,
                       metavar="SHAPE=COLOR[:STRENGTH][@SPLITS]",
                       help="Shapes world: a confounder, e.g. circle=red:0.9 (the shape takes "
                       "the colour with that probability in train and val; test stays "
                       "unbiased); see docs/shapes_world.md")


def canonical_bias(text):
    """The canonical text of a --world_bias value (one world, one string);
    raises `_cli.UsageError` naming the flag for a bad one."""
    from keras_structattn.data.shapes_world.config import Bias

    try:
        bias = Bias.parse(text)
    except ValueError as error:
        raise _cli.UsageError(f"--world_bias: {error}") from None
    return f"{bias.shape}={bias.color}:{bias.strength:g}@{','.join(bias.splits)}"


def folder_of(args):
    """The Shapes world folder of the run in `args.output_dir`."""
    return os.path.join(args.output_dir, FOLDER)


def features_path(folder, split):
    """The `.npz` features (images, regions, grid) of a split."""
    return os.path.join(folder, f"features_{split}.npz")


def _world_seed(args, default_seed):
    """The world's seed: --world_seed, else the run's (saved in run.json
    once the run exists), else --seed, else the recipe's default."""
    if args.world_seed is not None:
        return args.world_seed
    saved = RunFolder(args.output_dir).settings()
    if saved is not None:
        return saved["seed"]
    return default_seed if args.seed is None else args.seed


def ensure_world(args, *, tasks, default_seed, write_extras=None):
    """The Shapes world folder of the run, generated if absent.

    Args:
        args: the parsed flags (`output_dir`, `world_*`, `seed`).
        tasks: the Shapes world tasks to generate ("captions", "vqa", ...).
        default_seed: the recipe's default run seed.
        write_extras: optional `write_extras(world, folder)`, writing the
            recipe's own files (baselines) into the folder being made.

    Returns:
        The folder (`DIR/shapes_world`).

    Raises:
        UsageError: if the folder holds a world of other sizes or seed.
    """
    folder = folder_of(args)
    given = {split: getattr(args, f"world_{split}") for split in ("train", "val", "test")}
    wanted = {split: size if size is not None else args._world_sizes[split]
              for split, size in given.items()}
    wanted["seed"] = _world_seed(args, default_seed)
    bias = getattr(args, "world_bias", None)
    if bias is not None:
        bias = wanted["bias"] = canonical_bias(bias)
    settings_path = os.path.join(folder, SETTINGS_FILE)
    if os.path.exists(settings_path):
        with open(settings_path, encoding="utf-8") as f:
            saved = json.load(f)
        if args.world_seed is None:
            # A run trained with --world_seed: later commands reuse its world.
            wanted["seed"] = saved.get("seed")
        for split, size in given.items():
            if size is None:  # likewise for sizes left out
                wanted[split] = saved.get(split)
        if bias is None and "bias" in saved:
            # Likewise for a world made with --world_bias.
            wanted["bias"] = saved["bias"]
        if saved != wanted:
            differences = ", ".join(f"{k} {wanted[k]} (cached: {saved.get(k)})"
                                    for k in wanted if saved.get(k) != wanted[k])
            raise _cli.UsageError(
                f"{folder} holds a Shapes world of other sizes: {differences}; leave the "
                "--world_* flags out or use a new --output_dir")
        print(f"[data] Shapes world: reusing {folder}")
        return folder
    from keras_structattn.data import shapes_world

    world = shapes_world.generate(wanted["train"], wanted["val"], wanted["test"],
                                  tasks=tasks, seed=wanted["seed"], bias=bias)
    # One temporary folder per process: the processes of a multi-process
    # run on one host (docs/distributed.md) all make the same world.
    partial = f"{folder}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    shapes_world.write(world, partial)
    if write_extras is not None:
        write_extras(world, partial)
    write_json(os.path.join(partial, SETTINGS_FILE), wanted)
    if not os.path.exists(settings_path):
        shutil.rmtree(folder, ignore_errors=True)  # a folder without its settings
    try:
        os.replace(partial, folder)
    except OSError:
        if not os.path.exists(settings_path):
            raise
        # Another process put the same world (same flags, same seed) in place
        # first: keep that one, which it may be reading already.
        shutil.rmtree(partial, ignore_errors=True)
    sizes = ", ".join(f"{k} {v}" for k, v in wanted.items() if k not in ("seed", "bias"))
    print(f"[data] Shapes world generated in {world.seconds:.0f} s ({sizes} images, seed "
          f"{wanted['seed']}{', bias ' + bias if bias else ''}) -> {folder}")
    return folder


def world_bias(folder):
    """`(shape, colour)` of the bias of the world in `folder`, or None."""
    with open(os.path.join(folder, SETTINGS_FILE), encoding="utf-8") as f:
        text = json.load(f).get("bias")
    if text is None:
        return None
    shape, rest = text.split("=", 1)
    return shape, rest.split(":", 1)[0]


def scene_images(folder, split, image_ids):
    """The RGB images (uint8 `[H, W, 3]`) of `image_ids` from a split's
    features file."""
    import numpy as np

    with np.load(features_path(folder, split)) as data:
        index = {int(i): k for k, i in enumerate(data["image_ids"])}
        return [data["images"][index[i]] for i in image_ids]


def read_images(folder, file_names, image_ids):
    """RGB images read from `folder` by file name (real data's --images)."""
    import numpy as np
    from PIL import Image

    images = []
    for image_id, name in zip(image_ids, file_names):
        path = os.path.join(folder, os.path.basename(name))
        if not os.path.exists(path):
            raise FileNotFoundError(f"image {image_id}: no file {path}")
        with Image.open(path) as image:
            images.append(np.asarray(image.convert("RGB")))
    return images


def images_by_id(folder, image_ids):
    """RGB images of `image_ids` from a folder of image files named by id:
    the digits at the end of the file's stem (`COCO_val2014_000000000042.jpg`,
    `42.png`)."""
    import re

    index = {}
    for name in sorted(os.listdir(folder)):
        match = re.search(r"(\d+)$", os.path.splitext(name)[0])
        if match:
            index.setdefault(int(match.group(1)), name)
    missing = [i for i in image_ids if i not in index]
    if missing:
        raise FileNotFoundError(f"{folder}: no image file for image id {missing[0]} "
                                f"({len(missing)} missing)")
    return read_images(folder, [index[i] for i in image_ids], image_ids)
