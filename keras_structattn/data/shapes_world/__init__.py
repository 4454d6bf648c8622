"""Shapes world: a generated vision-and-language dataset family.

Small scenes of flat coloured shapes and text signs, rendered with NumPy,
with captions, VQA questions, referring expressions and TextVQA questions
whose every stated relation, count and attribute is checked against the
scene, written in the real formats (COCO captions, VQA v2, an mmf TextVQA
imdb, RefCOCO refs + COCO instances) plus `.npz` features. It is the
embedded default data of the captioning, VQA, grounding and TextVQA
recipes: it runs on a small CPU in minutes and needs what each mechanism
adds (spatial relations, counting, positions, scene text tied to shapes,
and, with `bias`, a train-only shape/colour correlation).

Modules:
    config: `Config`, `Bias`, argument checks, image ids.
    layouts: the scene and caption layouts (`default`, `large_objects`).
    scenes: shapes, signs, placement and rendering (`Scene`).
    relations: the stated relations, defined by `spatial_relations_numpy`.
    features: fixed region and grid features.
    describe: words, filters, uniqueness and the *facts* each text states.
    answers: ten annotator answers with noise.
    captions, vqa, refs, textvqa: the four tasks.
    writers: the files (`write`), their layout and the PNG writer.
    baselines: VQA accuracy and the trivial baselines.
    report: sizes, counters and answer distributions.
    run_cache: a world generated once for a training run and reused.

Usage:
    world = generate(train=2000, val=500, test=500, seed=0)
    write(world, "data/shapes_world")

Its modules use NumPy and the standard library only; the spatial op
(`keras_structattn.ops.spatial_graph`, which imports Keras) is imported on
first use. (Importing any `keras_structattn` module still runs the top
package's `__init__`, which imports Keras.) pycocoevalcap is used by the
caption baseline only, when installed.
"""

import collections
import dataclasses
import time

import numpy as np

from keras_structattn.data.shapes_world.baselines import trivial_baselines
from keras_structattn.data.shapes_world.baselines import vqa_accuracy
from keras_structattn.data.shapes_world.captions import make_captions
from keras_structattn.data.shapes_world.config import SPLITS
from keras_structattn.data.shapes_world.config import TASKS
from keras_structattn.data.shapes_world.config import Bias
from keras_structattn.data.shapes_world.config import Config
from keras_structattn.data.shapes_world.config import check_sizes
from keras_structattn.data.shapes_world.config import image_id
from keras_structattn.data.shapes_world.config import parse_tasks
from keras_structattn.data.shapes_world.features import REGION_FEATURE_DIM
from keras_structattn.data.shapes_world.features import grid_feature_dim
from keras_structattn.data.shapes_world.features import grid_features
from keras_structattn.data.shapes_world.features import region_feature_dim
from keras_structattn.data.shapes_world.features import region_features
from keras_structattn.data.shapes_world.layouts import get_layout
from keras_structattn.data.shapes_world.refs import make_refs
from keras_structattn.data.shapes_world.report import format_report
from keras_structattn.data.shapes_world.report import summarize
from keras_structattn.data.shapes_world.scenes import COLOR_NAMES
from keras_structattn.data.shapes_world.scenes import SHAPES
from keras_structattn.data.shapes_world.scenes import SIZES
from keras_structattn.data.shapes_world.scenes import Scene
from keras_structattn.data.shapes_world.scenes import sample_scene
from keras_structattn.data.shapes_world.textvqa import make_textvqa
from keras_structattn.data.shapes_world.vqa import make_vqa
from keras_structattn.data.shapes_world.writers import write
from keras_structattn.data.shapes_world.writers import write_png

# Each task draws from its own stream `[seed, split, scene, stream]`, so
# choosing fewer tasks never changes another task's data.
_TASK_STREAMS = {"captions": 1, "vqa": 2, "refs": 3, "textvqa": 4}
_MAKERS = {
    "captions": lambda scene, rng, config, counters: make_captions(
        scene, rng, counters, get_layout(config.layout)),
    "vqa": make_vqa,
    "refs": make_refs,
    "textvqa": make_textvqa,
}
MAX_TOKENS_PER_SIGN = 3


@dataclasses.dataclass
class Split:
    """One generated split.

    Attributes:
        name: "train", "val" or "test".
        scenes: list of `Scene`.
        tasks: `{task: [list of records per scene]}` for the generated tasks
            (records as returned by `make_captions`, `make_vqa`, ...).
        features: dict of arrays (see `split_features`).
        counters: `Counter` of retries, fallbacks and skipped items.
        seconds: generation time.
    """

    name: str
    scenes: list
    tasks: dict
    features: dict
    counters: collections.Counter
    seconds: float


@dataclasses.dataclass
class ShapesWorld:
    """A generated dataset: its config, tasks and splits (`{name: Split}`)."""

    config: Config
    tasks: tuple
    splits: dict
    seconds: float


def split_features(scenes, config):
    """Image and feature arrays of a split (the `features_<split>.npz`).

    Shape rows are padded to `config.max_objects`, OCR rows to
    `config.max_signs * 3`; padding rows are zero.

    Args:
        scenes: the split's `Scene`s.
        config: the world's `Config`.

    Returns:
        A dict of NumPy arrays, S scenes, C canvas, N max shapes, T max
        tokens, G grid size:

        - `images` uint8 [S, C, C, 3], `image_ids` int64 [S];
        - `num_obj` int32 [S], `obj_boxes` float32 [S, N, 4] (normalised
          x1, y1, x2, y2), `obj_features` float32 [S, N, F] (F = 30, or
          25 without `region_geometry`), `obj_attributes` int32 [S, N, 3]
          (indices into SHAPES, COLOR_NAMES, SIZES; -1 padding; for
          probes, not for models);
        - `num_ocr` int32 [S], `ocr_boxes` float32 [S, T, 4],
          `ocr_features` float32 [S, T, F];
        - `grid_features` float32 [S, G, G, 36].
    """
    s, c = len(scenes), config.canvas_size
    n, t, g = config.max_objects, max(1, config.max_signs * MAX_TOKENS_PER_SIGN), config.grid_size
    geometry, dim = config.region_geometry, region_feature_dim(config.region_geometry)
    out = {
        "images": np.zeros((s, c, c, 3), np.uint8),
        "image_ids": np.zeros((s,), np.int64),
        "num_obj": np.zeros((s,), np.int32),
        "obj_boxes": np.zeros((s, n, 4), np.float32),
        "obj_features": np.zeros((s, n, dim), np.float32),
        "obj_attributes": np.full((s, n, 3), -1, np.int32),
        "num_ocr": np.zeros((s,), np.int32),
        "ocr_boxes": np.zeros((s, t, 4), np.float32),
        "ocr_features": np.zeros((s, t, dim), np.float32),
        "grid_features": np.zeros((s, g, g, grid_feature_dim()), np.float32),
    }
    for k, scene in enumerate(scenes):
        out["images"][k] = scene.image
        out["image_ids"][k] = scene.image_id
        boxes = [o.box for o in scene.shapes]
        out["num_obj"][k] = len(boxes)
        out["obj_boxes"][k, : len(boxes)] = scene.normalized_boxes("o")
        out["obj_features"][k, : len(boxes)] = region_features(scene.palette_map, boxes,
                                                               geometry)
        out["obj_attributes"][k, : len(boxes)] = [
            (SHAPES.index(o.shape), COLOR_NAMES.index(o.color), SIZES.index(o.size))
            for o in scene.shapes
        ]
        tokens = [b for sign in scene.signs for b in sign.token_boxes]
        out["num_ocr"][k] = len(tokens)
        if tokens:
            out["ocr_boxes"][k, : len(tokens)] = scene.normalized_boxes("t")
            out["ocr_features"][k, : len(tokens)] = region_features(scene.palette_map, tokens,
                                                                    geometry)
        out["grid_features"][k] = grid_features(scene.palette_map, g)
    return out


def generate_split(name, size, config, tasks=TASKS):
    """Generates one split; see `generate`.

    Args:
        name: "train", "val" or "test".
        size: the number of scenes.
        config: a `Config`.
        tasks: the tasks to generate (`TASKS` by default: all).

    Returns:
        A `Split`.
    """
    start = time.perf_counter()
    counters = collections.Counter()
    split_index = SPLITS.index(name)
    scenes = []
    records = {task: [] for task in tasks}
    for index in range(size):
        rng = np.random.default_rng([config.seed, split_index, index])
        scene = sample_scene(rng, config, name, index, image_id(name, index), counters)
        scenes.append(scene)
        for task in tasks:
            task_rng = np.random.default_rng([config.seed, split_index, index, _TASK_STREAMS[task]])
            records[task].append(_MAKERS[task](scene, task_rng, config, counters))
    features = split_features(scenes, config)
    return Split(name, scenes, records, features, counters, time.perf_counter() - start)


def generate(train=2000, val=500, test=500, *, tasks="all", seed=0, canvas_size=64,
             min_objects=None, max_objects=None, max_signs=None, grid_size=8,
             answer_noise=0.15, ocr_noise=0.0, bias=None, layout="default",
             region_geometry=True):
    """Generates Shapes world scenes and tasks, deterministically.

    Args:
        train, val, test: number of scenes per split (ints >= 0, not all 0).
        tasks: "all", one of "captions", "vqa", "refs", "textvqa", or a list.
        seed: int >= 0. Scene i of split s draws from
            `np.random.default_rng([seed, s, i])` (s = 0, 1, 2 for train,
            val, test), and each task from `[seed, s, i, task stream]`, so
            neither the split sizes nor the task choice changes any scene.
        canvas_size: image side in pixels, >= 32 (64 gives boxes that are
            exact binary fractions).
        min_objects, max_objects: shapes per scene, 1 <= min <= max <= 10
            (default: the layout's; 2 and 8 for `default`).
        max_signs: most text signs per scene, 0..4 (default: the layout's;
            3 for `default`).
        grid_size: grid feature cells per side.
        answer_noise: per-annotator noise probability in [0, 0.4].
        ocr_noise: per-token OCR error probability in [0, 1).
        bias: None, a `Bias`, or its string form "circle=red:0.9[@train,val]".
        layout: the scenes' and captions' layout, a name of
            `layouts.LAYOUTS` ("default" or "large_objects").
        region_geometry: whether region and OCR features end with their
            box and area (dims 25-29), or hold appearance only (25 dims).

    Returns:
        A `ShapesWorld`.

    Raises:
        ValueError: on a bad argument, naming it and the allowed values.
    """
    sizes = check_sizes({"train": train, "val": val, "test": test})
    task_names = parse_tasks(tasks)
    if isinstance(bias, str):
        bias = Bias.parse(bias)
    chosen = get_layout(layout)
    config = Config(
        seed=seed, canvas_size=canvas_size,
        min_objects=chosen.min_objects if min_objects is None else min_objects,
        max_objects=chosen.max_objects if max_objects is None else max_objects,
        max_signs=chosen.max_signs if max_signs is None else max_signs, grid_size=grid_size,
        answer_noise=answer_noise, ocr_noise=ocr_noise, bias=bias, layout=layout,
        region_geometry=region_geometry,
    )
    start = time.perf_counter()
    splits = {
        name: generate_split(name, sizes[name], config, task_names)
        for name in SPLITS if sizes[name] > 0
    }
    return ShapesWorld(config, task_names, splits, time.perf_counter() - start)


__all__ = [
    "Bias", "Config", "Scene", "ShapesWorld", "Split", "SPLITS", "TASKS",
    "generate", "generate_split", "split_features", "write", "write_png",
    "summarize", "format_report", "trivial_baselines", "vqa_accuracy",
    "REGION_FEATURE_DIM", "grid_feature_dim", "SHAPES", "COLOR_NAMES", "SIZES",
]
