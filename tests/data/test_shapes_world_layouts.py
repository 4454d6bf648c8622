"""Shapes world's `large_objects` layout (the area-attention comparison's world):
scenes of 2-4 shapes whose large ones span several grid cells, no signs,
nesting or overlap, and captions whose every noun phrase states the size,
from the attributes, relation and biggest-shape groups only; every claim of
every reference true. And the recipes' `--world_layout` flag."""

import collections

import numpy as np
import pytest

from keras_structattn.data import shapes_world as sw
from keras_structattn.data.shapes_world import claims
from keras_structattn.data.shapes_world.layouts import LAYOUTS
from keras_structattn.data.shapes_world.layouts import get_layout
from tests.data.test_shapes_world import _check_scene_pixels
from tests.data.test_shapes_world import check_fact
from tests.data.test_shapes_world_claims import facts_of

LAYOUT = get_layout("large_objects")


@pytest.fixture(scope="module")
def world():
    return sw.generate(train=300, val=0, test=0, seed=5, layout="large_objects",
                       tasks="captions")


def test_scenes_hold_large_shapes_that_span_several_cells(world):
    split = world.splits["train"]
    assert (world.config.layout, world.config.max_signs) == ("large_objects", 0)
    cell = world.config.canvas_size / world.config.grid_size
    counts, spans = collections.Counter(), collections.defaultdict(list)
    for scene in split.scenes:
        _check_scene_pixels(scene)
        assert 2 <= len(scene.shapes) <= 4 and not scene.signs
        assert sum(o.size == "large" for o in scene.shapes) <= LAYOUT.max_large
        counts[len(scene.shapes)] += 1
        for o in scene.shapes:
            assert o.parent is None
            low, high = LAYOUT.size_fractions[o.size]
            assert round(low * scene.canvas) <= o.side <= round(high * scene.canvas)
            x1, _, x2, _ = o.box
            # Grid columns the shape covers (cell edges at multiples of `cell`).
            spans[o.size].append(int(np.ceil(x2 / cell) - np.floor(x1 / cell)))
        boxes = [o.box for o in scene.shapes]
        for i, a in enumerate(boxes):  # no overlap: one background pixel apart
            for b in boxes[i + 1:]:
                assert (a[0] >= b[2] + 1 or b[0] >= a[2] + 1
                        or a[1] >= b[3] + 1 or b[1] >= a[3] + 1)
    assert set(counts) == {2, 3, 4}
    assert min(spans["large"]) >= 3 and max(spans["large"]) <= 5
    assert max(spans["small"]) <= 3 and np.median(spans["small"]) <= 2


def test_captions_state_the_size_and_only_true_facts(world):
    split = world.splits["train"]
    groups, made = collections.Counter(), collections.Counter()
    for scene, references in zip(split.scenes, split.tasks["captions"]):
        facts = facts_of(scene)
        assert len(references) == 5
        for reference in references:
            groups[reference["group"]] += 1
            for fact in reference["facts"]:
                check_fact(scene, fact)
                if fact["kind"] == "attributes":
                    assert "size" in fact["values"], reference
            for claim in claims.caption_claims(reference["caption"]):
                made[claim[0]] += 1
                assert facts.is_true(claim), (reference["caption"], claim)
    assert set(groups) == set(LAYOUT.caption_groups)
    assert {"shape", "colour", "size", "relation"} <= set(made)
    assert min(made[c] for c in ("shape", "colour", "size", "relation")) > 100


def test_the_default_layout_is_the_default_world():
    a = sw.generate(train=20, val=0, test=0, seed=2, tasks="captions")
    b = sw.generate(train=20, val=0, test=0, seed=2, tasks="captions", layout="default",
                    min_objects=2, max_objects=8, max_signs=3)
    assert a.config == b.config
    for x, y in zip(a.splits["train"].scenes, b.splits["train"].scenes):
        assert x.shapes == y.shapes and (x.image == y.image).all()
    assert a.splits["train"].tasks == b.splits["train"].tasks
    # The layout's numbers are defaults only: a caller may change them.
    other = sw.generate(train=5, val=0, test=0, layout="large_objects", max_objects=2,
                        tasks="captions")
    assert all(len(s.shapes) == 2 for s in other.splits["train"].scenes)


def test_an_unknown_layout_is_refused():
    with pytest.raises(ValueError, match="layout.*large_objects"):
        sw.generate(train=1, val=0, test=0, layout="huge")


def test_the_recipes_flag_lists_every_layout(tmp_path, capsys):
    from recipes import _cli
    from recipes import _world
    from recipes import caption

    assert _world.WORLD_LAYOUTS == tuple(LAYOUTS)
    args = caption.build_parser().parse_args(
        ["train", "--output_dir", str(tmp_path), "--world_layout", "large_objects",
         "--world_train", "4", "--world_val", "2", "--world_test", "2"])
    folder = _world.ensure_world(args, tasks="captions", default_seed=1)
    from keras_structattn.data.shapes_world import run_cache

    assert run_cache.read_settings(folder)["layout"] == "large_objects"
    args.world_layout = "default"
    with pytest.raises(_cli.UsageError, match=r"layout default \(cached: large_objects\)"):
        _world.ensure_world(args, tasks="captions", default_seed=1)
    # Left out, the cached world's layout is reused.
    args.world_layout = None
    assert _world.ensure_world(args, tasks="captions", default_seed=1) == folder


def test_region_features_without_geometry_are_the_appearance_dims():
    with_boxes = sw.generate(train=6, val=0, test=0, seed=4, tasks="vqa")
    without = sw.generate(train=6, val=0, test=0, seed=4, tasks="vqa", region_geometry=False)
    a, b = with_boxes.splits["train"].features, without.splits["train"].features
    assert a["obj_features"].shape[-1] == sw.REGION_FEATURE_DIM == 30
    assert b["obj_features"].shape[-1] == b["ocr_features"].shape[-1] == 25
    np.testing.assert_array_equal(b["obj_features"], a["obj_features"][..., :25])
    np.testing.assert_array_equal(b["obj_boxes"], a["obj_boxes"])  # the boxes stay
    # Dims 25-29 were the box and its area: what the appearance-only world drops.
    rows = a["num_obj"][0]
    np.testing.assert_allclose(a["obj_features"][0, :rows, 25:29], a["obj_boxes"][0, :rows])
    assert with_boxes.splits["train"].tasks == without.splits["train"].tasks


def test_the_recipes_flag_makes_an_appearance_only_world(tmp_path):
    from keras_structattn.data.shapes_world import run_cache
    from recipes import _world
    from recipes import vqa

    args = vqa.build_parser().parse_args(
        ["train", "--output_dir", str(tmp_path), "--world_region_geometry", "off",
         "--world_train", "4", "--world_val", "2", "--world_test", "2"])
    folder = _world.ensure_world(args, tasks="vqa", default_seed=1)
    assert run_cache.read_settings(folder)["region_geometry"] is False
    with np.load(f"{folder}/features_train.npz") as f:
        assert f["obj_features"].shape[-1] == 25
    # A default world's settings do not name the options it leaves at their defaults.
    args = vqa.build_parser().parse_args(
        ["train", "--output_dir", str(tmp_path / "plain"), "--world_train", "4",
         "--world_val", "2", "--world_test", "2", "--world_region_geometry", "on"])
    folder = _world.ensure_world(args, tasks="vqa", default_seed=1)
    assert set(run_cache.read_settings(folder)) == {"train", "val", "test", "seed"}
