"""The grounding recipe, run as a user runs it, on a tiny Shapes world:
train (2 epochs of a one-block MUAN), evaluate next to the biggest-box
baseline, predict, draw, and the command-line errors."""

import json
import subprocess
import sys

import numpy as np
import pytest

from keras_structattn.tasks.grounding import refcoco
from recipes import grounding
from tests.recipes.conftest import ROOT
from tests.recipes.test_translate_cli import ENV
from tests.recipes.test_translate_cli import assert_error

TINY = "hidden_size=16,num_heads=2,filter_size=32,num_blocks=1,word_dim=8,batch_size=8"


def flags(out, *extra):
    return ["--output_dir", str(out), "--hparams", TINY, "--world_train", "24",
            "--world_val", "4", "--world_test", "6", "--predict_batch_size", "16",
            # Without XLA (tiny steps: compiling costs more than it saves);
            # the VQA recipe's tests cover the default, XLA.
            "--verbose", "0", "--jit", "off", *extra]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("grounding") / "run"
    grounding.main(["train", *flags(out, "--epochs", "2", "--no_eval")])
    return out


def test_evaluate_scores_iou_above_one_half_next_to_the_baseline(trained, capsys):
    summary = grounding.main(["evaluate", *flags(trained)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["split", "expressions", "model", "baseline"]
    assert lines[1].split()[0] == "test"
    # The saved predictions, re-scored independently: IoU with the refs' boxes.
    results = json.loads((trained / "test_results.json").read_text())
    records, _ = refcoco.read_refs(trained / "shapes_world" / "refs" / "refs.json",
                                   trained / "shapes_world" / "refs" / "instances.json",
                                   splits=["test"])
    boxes = {r.sent_id: r.box for r in records}
    correct = []
    for result in results:
        x, y, w, h = result["bbox"]
        iou = refcoco.box_iou(np.array([[x, y, x + w, y + h]]),
                              np.array([boxes[result["sent_id"]]]))[0, 0]
        correct.append(iou > 0.5)
        assert result["correct"] == (iou > 0.5) or abs(iou - 0.5) < 1e-3
    assert summary["expressions"] == len(records) == len(results)
    assert summary["accuracy"] == pytest.approx(100 * np.mean(correct), abs=1e-6)
    # The baseline, from the world's own files: the biggest of each image's
    # boxes (stored normalised; the refs give pixels on their images' sizes).
    world = np.load(trained / "shapes_world" / "features_test.npz")
    rows = {int(i): k for k, i in enumerate(world["image_ids"])}
    hits = []
    for r in records:
        k = rows[r.image_id]
        boxes = world["obj_boxes"][k, : world["num_obj"][k]] * np.tile(r.image_size, 2)
        biggest = boxes[np.argmax((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))]
        hits.append(refcoco.box_iou(biggest[None], np.array([r.box]))[0, 0] > 0.5)
    assert summary["baseline"] == pytest.approx(100 * np.mean(hits), abs=1e-6)
    assert summary["baseline"] > 0  # the referred shape is the biggest in some images


def test_the_papers_target_is_a_run_setting(trained, tmp_path, capsys):
    out = tmp_path / "paper"
    import shutil

    shutil.copytree(trained / "shapes_world", out / "shapes_world")
    grounding.main(["train", *flags(out, "--epochs", "1", "--no_eval", "--target", "paper")])
    assert json.loads((out / "run.json").read_text())["target"] == "paper"
    with pytest.raises(Exception, match="--target iou .the run has paper."):
        grounding.main(["train", *flags(out, "--target", "iou")])


def test_predict_and_visualize(trained, tmp_path, capsys):
    out = tmp_path / "boxes.json"
    results = grounding.main(["predict", *flags(trained, "--output_file", str(out))])
    assert json.loads(out.read_text()) == results and len(results[0]["bbox"]) == 4
    (path,) = grounding.main(["visualize", *flags(trained, "--num_expressions", "1")])
    from PIL import Image

    with Image.open(path) as image:
        pixels = np.asarray(image.convert("RGB"))
    green = np.all(pixels == (0, 200, 0), axis=-1)  # the referred box's outline
    assert green.sum() > 20


BAD_COMMAND_LINES = [
    (["--refs", "README.md"], "give --refs and --instances together"),
    (["--refs", "README.md", "--instances", "README.md"],
     "real refs need their region proposals: give --features"),
    (["evaluate", "--output_dir", "no_run_here"], "no trained run in no_run_here"),
    (["--epochs", "0"], "argument --epochs: must be >= 1"),
]


@pytest.mark.parametrize("argv, message", BAD_COMMAND_LINES,
                         ids=[" ".join(argv) for argv, _ in BAD_COMMAND_LINES])
def test_bad_command_lines_are_one_line_usage_errors(argv, message):
    code = ("import sys\nfrom recipes import _cli, grounding\n"
            f"_cli.entry_point(grounding.main, {argv!r})\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV,
                            capture_output=True, text=True, timeout=60)
    assert_error(result, 2, message)


def test_a_ref_of_an_unknown_annotation_names_the_file_and_the_ref(trained, tmp_path):
    refs = json.loads((trained / "shapes_world" / "refs" / "refs.json").read_text())
    refs[0]["ann_id"] = 123456789
    path = tmp_path / "refs.json"
    path.write_text(json.dumps(refs))
    result = subprocess.run(
        [sys.executable, "-m", "recipes.grounding", "train", "--output_dir",
         str(tmp_path / "run"), "--refs", str(path), "--instances",
         str(trained / "shapes_world" / "refs" / "instances.json"), "--features",
         str(trained / "shapes_world" / "features_train.npz")],
        cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert_error(result, 1, "refs.json", str(refs[0]["ref_id"]))
