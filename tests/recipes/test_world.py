"""`recipes._world.ensure_world`: the run's Shapes world, made once, also
when several processes of one run (docs/distributed.md) make it at once."""

import argparse
import json
import os
import shutil

from keras_structattn.data.shapes_world.run_cache import SETTINGS_FILE
from recipes import _world


def _args(out):
    return argparse.Namespace(
        output_dir=str(out), world_train=3, world_val=2, world_test=2, world_seed=None,
        seed=5, world_bias=None, _world_sizes={"train": 3, "val": 2, "test": 2})


def test_a_world_put_in_place_by_another_process_first_is_kept(tmp_path, capsys):
    """Another process of the run finishes the same world while this one
    writes its own: this one keeps the other's (which that process may be
    reading), removes its temporary folder and raises nothing."""
    out = tmp_path / "run"
    out.mkdir()
    folder = out / _world.FOLDER
    marker = "made by the other process"

    def other_process_finishes_first(world, partial):
        shutil.copytree(partial, folder)
        (folder / "marker.txt").write_text(marker)
        with open(folder / SETTINGS_FILE, "w", encoding="utf-8") as f:
            json.dump({"train": 3, "val": 2, "test": 2, "seed": 5}, f)

    got = _world.ensure_world(_args(out), tasks="refs", default_seed=0,
                              write_extras=other_process_finishes_first)
    assert got == str(folder)
    assert (folder / "marker.txt").read_text() == marker
    assert sorted(os.listdir(out)) == [_world.FOLDER]  # no temporary folder left
    # A later command reuses it.
    assert _world.ensure_world(_args(out), tasks="refs", default_seed=0) == str(folder)
    assert "[data] Shapes world: reusing" in capsys.readouterr().out


def test_a_folder_without_its_settings_is_replaced(tmp_path):
    out = tmp_path / "run"
    (out / _world.FOLDER).mkdir(parents=True)
    (out / _world.FOLDER / "stale.txt").write_text("half a world")
    folder = _world.ensure_world(_args(out), tasks="refs", default_seed=0)
    assert not os.path.exists(os.path.join(folder, "stale.txt"))
    with open(os.path.join(folder, SETTINGS_FILE), encoding="utf-8") as f:
        assert json.load(f) == {"train": 3, "val": 2, "test": 2, "seed": 5}
    assert sorted(os.listdir(out)) == [_world.FOLDER]
