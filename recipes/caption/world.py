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

import os

from recipes import _cli
from recipes import _world
from recipes._run import write_json
from recipes._world import features_path  # noqa: F401  (the recipe reads it from here)
from recipes._world import folder_of

BASELINE_NAME = 'the "describe the biggest shape" caption ("a <size> <colour> <shape>")'


def ensure_world(args):
    """The run's Shapes world (captions), generated if absent, with the
    baseline captions of every split (`baseline_<split>.json`)."""
    from recipes.caption import RUN_DEFAULTS

    def write_baselines(world, folder):
        from keras_structattn.data.shapes_world.baselines import biggest_caption

        for name, split in world.splits.items():
            write_json(os.path.join(folder, f"baseline_{name}.json"), [
                {"image_id": scene.image_id, "caption": biggest_caption(scene)}
                for scene in split.scenes
            ])

    return _world.ensure_world(args, tasks="captions", default_seed=RUN_DEFAULTS["seed"],
                               write_extras=write_baselines)


def captions_path(folder, split):
    return os.path.join(folder, "captions", f"captions_{split}.json")


def baseline_path(args, split):
    """The baseline results of a split, or None when the run uses real data."""
    from recipes.caption import data_flags_given

    if data_flags_given(args):
        return None
    return os.path.join(folder_of(args), f"baseline_{split}.json")


def images_of(args, split, records):
    """The RGB images (uint8 `[H, W, 3]`) of `records`: from the Shapes world
    features file, or read from --images by file name."""
    from recipes.caption import data_flags_given

    image_ids = [r.image_id for r in records]
    if not data_flags_given(args):
        return _world.scene_images(folder_of(args), split.name, image_ids)
    if not args.images:
        raise _cli.UsageError("visualize needs --images, the folder of the split's images")
    return _world.read_images(args.images, [r.file_name for r in records], image_ids)


def hallucination_of(args, split, outputs):
    """CHAIR-style colour-shape hallucination rates of captions of a Shapes
    world split (`keras_structattn.data.shapes_world.hallucination`), with
    the world's bias if it has one.

    Args:
        args: the flags.
        split: the split name.
        outputs: `{column: COCO results}` (the model's, the baseline's).

    Returns:
        `{column: rates}`; empty for real data.
    """
    from recipes.caption import data_flags_given

    if data_flags_given(args):
        return {}
    from keras_structattn.data.shapes_world import hallucination

    folder = folder_of(args)
    pairs = hallucination.scene_pairs(os.path.join(folder, f"scenes_{split}.json"))
    bias = _world.world_bias(folder)
    if bias is not None:
        print(f"[eval] hallucination: colour-shape claims absent from the scene; the bias "
              f"{bias[1]} {bias[0]} (biased@cf: over the {bias[0]}s of other colours only)")
    return {name: hallucination.hallucination_rates(results, pairs, bias)
            for name, results in outputs.items()}
