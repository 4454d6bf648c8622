"""A recipe's embedded default data: Shapes world, generated once per run folder.

The world is generated from `--world_train/--world_val/--world_test` and
the run's seed (`keras_structattn.data.shapes_world`, deterministic) and
written under `DIR/shapes_world` in the real formats, so that the recipe
reads it back through the same loaders as real data; a later command reuses
it when its sizes and seed match (`keras_structattn.data.shapes_world.run_cache`).
Light at import: the recipes' flags use it before TensorFlow loads.
"""

import os

from recipes import _cli

FOLDER = "shapes_world"
# `keras_structattn.data.shapes_world.layouts.LAYOUTS` (checked by a test;
# not imported: the flags are parsed before Keras loads).
WORLD_LAYOUTS = ("default", "large_objects")
# World settings added after the first worlds were cached, with the value a
# world saved without them has; left out of a new world's settings when
# they hold it, so that such worlds keep their settings file.
OPTIONAL_DEFAULTS = {"layout": "default", "region_geometry": True}


def add_world_flags(group, train=2000, val=200, test=500, region_geometry=None):
    """Adds the `--world_*` flags (sizes left out: the cached world's, else
    these; `region_geometry` "on"/"off": the recipe's default, else the
    cached world's, else on)."""
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
    group.add_argument("--world_region_geometry", choices=("on", "off"),
                       default=region_geometry,
                       help="Shapes world: whether region features end with the box and "
                       f"its area (default {region_geometry or 'on'}; off: appearance only, "
                       "the boxes given apart, as MCAN vs MCAN+PA needs; docs/vqa.md)")
    group.add_argument("--world_layout", choices=WORLD_LAYOUTS, default=None,
                       help="Shapes world: default, or large_objects (2-4 shapes, large ones "
                       "3-5 grid cells wide, captions of sizes, shapes and relations: the "
                       "area-attention comparison's world; docs/shapes_world.md)")


def canonical_bias(text):
    """The canonical text of a --world_bias value (one world, one string)."""
    from keras_structattn.data.shapes_world.config import Bias

    try:
        bias = Bias.parse(text)
    except ValueError as error:
        raise _cli.UsageError(f"--world_bias: {error}") from None
    return f"{bias.shape}={bias.color}:{bias.strength:g}@{','.join(bias.splits)}"


def folder_of(args):
    """The Shapes world folder of the run in `args.output_dir`."""
    return os.path.join(args.output_dir, FOLDER)


def _world_seed(args, default_seed):
    """The run's seed (run.json), else --seed, else the recipe's default."""
    from keras_structattn.training.run_folder import RunFolder

    saved = RunFolder(args.output_dir).settings()
    if saved is not None:
        return saved["seed"]
    return default_seed if args.seed is None else args.seed


def check_not_real(settings, folder, output_dir):
    """A `UsageError` if the run `settings` (None: no run yet) was trained
    on real data: a world generated into it would be data the run never
    saw, and fail later with an unrelated message. (A run made now keeps
    its data flags, `_cli.remember_data`: a command on it names its data
    whenever the run was trained on real data, and never comes here.)"""
    if settings is not None and "data" not in settings and not os.path.isdir(folder):
        raise _cli.UsageError(
            f"{output_dir} holds a run without a Shapes world ({folder} is absent): it was "
            "trained on real data; give its data flags (runs made now remember them)")


def ensure_world(args, *, tasks, default_seed, write_extras=None):
    """The run's Shapes world folder, generated with `tasks` ("captions",
    "vqa"...) if absent; `write_extras(world, folder)` may add the recipe's
    files (baselines). A flag left out takes the cached world's value; a
    `UsageError` refuses a world of other sizes or seed."""
    from keras_structattn.data.shapes_world import run_cache
    from keras_structattn.training.run_folder import RunFolder

    folder = folder_of(args)
    check_not_real(RunFolder(args.output_dir).settings(), folder, args.output_dir)
    bias = getattr(args, "world_bias", None)
    given = {split: getattr(args, f"world_{split}") for split in ("train", "val", "test")}
    geometry = getattr(args, "world_region_geometry", None)
    given.update(seed=args.world_seed, bias=None if bias is None else canonical_bias(bias),
                 layout=getattr(args, "world_layout", None),
                 region_geometry=None if geometry is None else geometry == "on")
    given = {key: value for key, value in given.items() if value is not None}
    saved = run_cache.read_settings(folder)
    if saved is not None:
        # Worlds saved before these settings existed have the defaults.
        saved = {**OPTIONAL_DEFAULTS, **saved}
        wanted = {**saved, **given}
        if saved != wanted:
            differences = ", ".join(f"{k} {wanted[k]} (cached: {saved.get(k)})"
                                    for k in wanted if saved.get(k) != wanted[k])
            raise _cli.UsageError(
                f"{folder} holds a Shapes world of other sizes: {differences}; leave the "
                "--world_* flags out or use a new --output_dir")
        print(f"[data] Shapes world: reusing {folder}")
        return folder
    wanted = {**args._world_sizes, "seed": _world_seed(args, default_seed), **given}
    for key, value in OPTIONAL_DEFAULTS.items():  # saved as worlds of before they were
        if wanted.get(key) == value:
            del wanted[key]
    world = run_cache.write_world(folder, wanted, tasks, write_extras)
    sizes = ", ".join(f"{k} {v}" for k, v in wanted.items() if k in ("train", "val", "test"))
    bias, layout = wanted.get("bias"), wanted.get("layout")
    print(f"[data] Shapes world generated in {world.seconds:.0f} s ({sizes} images, seed "
          f"{wanted['seed']}{', bias ' + bias if bias else ''}"
          f"{', layout ' + layout if layout else ''}"
          f"{', regions without geometry' if 'region_geometry' in wanted else ''}) -> {folder}")
    return folder
