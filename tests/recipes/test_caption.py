"""The captioning recipe, run as a user runs it, on a tiny Shapes world.

One run is trained once per module (`trained`): 2 cross-entropy and 2
self-critical steps of a one-layer captioner with 2x2 area attention
(`--model area`; the default Up-Down is tested in test_caption_catt.py) on
24 generated images. The tests then evaluate, decode, score and visualize it,
resume it, and feed the loaders broken files through the command line.
"""

import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

from recipes import caption
from tests.recipes.conftest import ROOT
from tests.recipes.conftest import kill_at_checkpoint
from tests.recipes.test_translate_cli import ENV
from tests.recipes.test_translate_cli import assert_error

TINY = ("num_hidden_layers=1,hidden_size=32,filter_size=64,num_heads=2,num_area_layers=1,"
        "batch_size=4")


def flags(out, *extra):
    return ["--output_dir", str(out), "--model", "area", "--hparams", TINY, "--min_word_count", "1",
            "--world_train", "24", "--world_val", "4", "--world_test", "6",
            "--beam_size", "2", "--decode_batch_size", "4", "--scst_images", "3",
            "--scst_samples", "2", "--verbose", "0", *extra]


def run_recipe(*args):
    return subprocess.run([sys.executable, "-m", "recipes.caption", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=600)


def train(out, *extra):
    return caption.main(["train", *flags(out, "--train_steps", "2", "--scst_steps", "2",
                                         "--steps_per_checkpoint", "1", *extra)])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("caption") / "run"
    train(out, "--jit", "off", "--no_eval")
    return out


def weights_of(path):
    arrays = {}
    with h5py.File(path) as f:
        f.visititems(lambda name, obj: arrays.__setitem__(name, obj[()])
                     if isinstance(obj, h5py.Dataset) else None)
    return arrays


def assert_same_weights(a, b):
    a, b = weights_of(a), weights_of(b)
    assert sorted(a) == sorted(b) and len(a) > 20
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


# ------------------------------------------------------------ the commands


def test_the_default_model_is_up_down_on_regions_and_real_data_takes_the_base_set():
    parser = caption.build_parser()
    world = caption.run_defaults(parser.parse_args(["train"]))
    assert (world["model"], world["hparams_set"], world["feature_kind"]) == (
        "butd", "updown_tiny", "regions")
    real = caption.run_defaults(parser.parse_args(
        ["train", "--karpathy_json", __file__, "--features", __file__]))
    assert real["hparams_set"] == "updown_base"
    area = caption.run_defaults(parser.parse_args(["train", "--model", "area"]))
    assert (area["hparams_set"], area["feature_kind"]) == ("captioner_tiny_area2x2", "grid")


def test_train_writes_both_phases_and_evaluate_prints_scores(trained, capsys):
    assert sorted(os.listdir(trained / "checkpoints")) == [
        "ckpt-0001.weights.h5", "ckpt-0002.weights.h5"]
    assert sorted(os.listdir(trained / "scst_checkpoints")) == [
        "ckpt-0001.weights.h5", "ckpt-0002.weights.h5"]
    history = (trained / "scst_history.csv").read_text().splitlines()
    assert history[0].split(",")[0] == "epoch" and "reward" in history[0]
    assert len(history) == 3
    capsys.readouterr()
    scores = caption.main(["evaluate", *flags(trained)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["metric", "model", "biggest_shape"]
    names = [line.split()[0] for line in lines[1:] if line]
    for name in ("Bleu_1", "Bleu_4", "ROUGE_L", "CIDEr"):
        assert name in names
    # METEOR and SPICE are either scored or reported as not computed, never 0.
    assert "SPICE" in names
    saved = json.loads((trained / "test_scores.json").read_text())
    assert saved["model"]["scores"]["CIDEr"] == pytest.approx(scores.scores["CIDEr"])
    floors = {"constant", "biggest_shape", "oracle_count"}
    assert floors <= set(saved) and "model" in saved
    assert {name for name in saved if name.startswith("constant_")} >= {
        "constant_count", "constant_attributes"}
    for name, entry in saved.items():
        assert 0 <= entry["fact_f1"] <= 1 and entry["scores"]["CIDEr"] >= 0, name
        assert entry["cider_by_group"] and "chair_i" in entry["hallucination"], name
    # The floors and oracles are printed, one line each, beside the model.
    table = [line.split()[0] for line in lines if line]
    assert {"model", "constant", "biggest_shape", "oracle_count"} <= set(table)
    assert any(line.startswith("model CIDEr-D") and "best floor" in line for line in lines)
    results = json.loads((trained / "test_results.json").read_text())
    assert len(results) == 6 and all(set(r) == {"image_id", "caption"} for r in results)


def test_decode_then_score_round_trip(trained, tmp_path, capsys):
    world = trained / "shapes_world"
    out = tmp_path / "results.json"
    caption.main(["decode", *flags(trained), "--features", str(world / "features_test.npz"),
                  "--output_file", str(out)])
    results = json.loads(out.read_text())
    assert len(results) == 6
    capsys.readouterr()
    scores = caption.main(["score", "--annotations",
                           str(world / "captions" / "captions_test.json"),
                           "--results", str(out), "--output", str(tmp_path / "scores.json")])
    printed = capsys.readouterr().out
    cider = [line.split() for line in printed.splitlines() if line.startswith("CIDEr")]
    assert cider == [["CIDEr", f"{scores.scores['CIDEr']:.4f}"]]
    saved = json.loads((tmp_path / "scores.json").read_text())
    assert len(saved["per_image"]) == 6
    # The recipe's own evaluation of the same captions gives the same score.
    evaluated = caption.main(["evaluate", *flags(trained)])
    assert evaluated.scores["CIDEr"] == pytest.approx(scores.scores["CIDEr"], abs=1e-12)


def scale_strip(pixels, top):
    """The colour scale's strip whose top is at row `top` of a picture,
    sampled at its ends: grey at `DIM` (weight 0) and white (the largest)."""
    from keras_structattn.tasks import attention_maps

    row = pixels[top + 5].astype(int)
    return row[5], row[160], 255 * attention_maps.DIM


def test_visualize_writes_one_png_per_image(trained, capsys):
    """The area captioner's panels: each word's top area outlined on a
    spotlight of its weights over the areas, the colour scale below."""
    from PIL import Image

    from keras_structattn.tasks import attention_maps

    paths = caption.main(["visualize", *flags(trained), "--num_images", "2"])
    assert len(paths) == 2
    for path in paths:
        with Image.open(path) as image:
            assert image.format == "PNG" and image.size[0] >= 192
            pixels = np.asarray(image.convert("RGB"))
        low, high, dim = scale_strip(pixels, len(pixels) - attention_maps.SCALE_HEIGHT + 2)
        np.testing.assert_allclose(low, [dim] * 3, atol=3)
        np.testing.assert_allclose(high, [255] * 3, atol=6)
    printed = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in printed] == paths


# ----------------------------------------------------------------- resuming


def test_resumed_run_ends_at_the_weights_of_a_straight_run(tmp_path):
    """2 cross-entropy steps and 1 self-critical step, then 1 more
    self-critical step in a second command, give the weights of one command
    that trains 2 + 2 (resuming the cross-entropy phase is
    `test_killed_run_resumes_to_the_same_weights`)."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train(straight, "--jit", "off", "--no_eval")
    shutil.copytree(straight / "shapes_world", resumed / "shapes_world")  # skip generating
    for steps in (("2", "1"), ("2", "2")):
        caption.main(["train", *flags(resumed, "--train_steps", steps[0], "--scst_steps",
                                      steps[1], "--steps_per_checkpoint", "1", "--jit", "off",
                                      "--no_eval")])
    for folder in ("checkpoints", "scst_checkpoints"):
        assert_same_weights(straight / folder / "ckpt-0002.weights.h5",
                            resumed / folder / "ckpt-0002.weights.h5")


def test_killed_run_resumes_to_the_same_weights(trained, tmp_path):
    """SIGKILL a training command after its first checkpoint; the same
    command run again ends at the weights of the uninterrupted run."""
    out = tmp_path / "killed"
    shutil.copytree(trained / "shapes_world", out / "shapes_world")  # skip generating
    command = [sys.executable, "-m", "recipes.caption", "train",
               *flags(out, "--train_steps", "2", "--scst_steps", "2",
                      "--steps_per_checkpoint", "1", "--jit", "off", "--no_eval")]
    first = out / "checkpoints" / "ckpt-0001.weights.h5"
    kill_at_checkpoint(command, first, ENV)
    result = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "resuming" in result.stderr
    assert_same_weights(trained / "scst_checkpoints" / "ckpt-0002.weights.h5",
                        out / "scst_checkpoints" / "ckpt-0002.weights.h5")


# ----------------------------------------------------- errors, as a user sees them

BAD_COMMAND_LINES = [
    (["score", "--results", "README.md"], "score needs --annotations and --results"),
    (["--captions_train", "README.md"], "real captions need their features: give --features"),
    (["--karpathy_json", "README.md", "--captions_train", "README.md", "--features", "docs"],
     "give either --karpathy_json or --captions_* files"),
    (["--split_val", "README.md"], "--split_val needs --captions_val"),
    (["decode", "--output_dir", "no_run_here", "--features", "docs"],
     "no trained run in no_run_here"),
    (["decode"], "decode needs --features"),
    (["extract", "--images", "docs"], "extract needs --features_out, --backbone_weights"),
    (["--scst_learning_rate", "0"], "argument --scst_learning_rate: must be > 0"),
    (["--features", "nowhere"], "argument --features: no such file: nowhere"),
    (["extract", "--images", "README.md"], "argument --images: README.md is a file"),
]


@pytest.mark.parametrize("argv, message", BAD_COMMAND_LINES,
                         ids=[" ".join(argv) for argv, _ in BAD_COMMAND_LINES])
def test_bad_command_lines_are_one_line_usage_errors(argv, message):
    """Checked before TensorFlow loads (each takes well under a second)."""
    code = ("import sys\nfrom recipes import _cli, caption\n"
            f"_cli.entry_point(caption.main, {argv!r})\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV,
                            capture_output=True, text=True, timeout=60)
    assert_error(result, 2, message)


def _coco(path, images, annotations):
    path.write_text(json.dumps({"images": images, "annotations": annotations}))
    return str(path)


def test_data_errors_name_the_file_and_the_image(trained, tmp_path):
    features = str(trained / "shapes_world" / "features_train.npz")
    broken = tmp_path / "broken.json"
    broken.write_text('{"images": [\n  {"id": 1,}\n]}')
    result = run_recipe("train", "--output_dir", str(tmp_path / "a"), "--captions_train",
                        str(broken), "--features", features)
    assert_error(result, 1, str(broken), "line 2")
    unknown = _coco(tmp_path / "unknown.json", [{"id": 1, "file_name": "a.png"}],
                    [{"image_id": 7, "caption": "a red disc"}])
    with pytest.raises(ValueError, match=r"unknown\.json.*7|7.*unknown\.json"):
        caption.main(["train", "--output_dir", str(tmp_path / "b"), "--captions_train",
                      unknown, "--features", features])


def test_missing_features_stop_or_are_counted(trained, tmp_path, capsys):
    ids = json.loads((trained / "shapes_world" / "captions" /
                      "captions_train.json").read_text())["images"][:3]
    images = [{"id": i["id"], "file_name": i["file_name"]} for i in ids]
    images.append({"id": 999_999, "file_name": "missing.png"})
    path = _coco(tmp_path / "captions.json", images, [
        {"image_id": i["id"], "caption": "a red disc"} for i in images])
    features = str(trained / "shapes_world" / "features_train.npz")
    argv = ["train", "--output_dir", str(tmp_path / "run"), "--captions_train", path,
            "--features", features, "--model", "area", "--hparams", TINY, "--min_word_count", "1",
            "--train_steps", "1", "--scst_steps", "0", "--no_eval", "--verbose", "0"]
    with pytest.raises(ValueError, match="999999"):
        caption.main(argv)
    assert not (tmp_path / "run" / "run.json").exists()
    capsys.readouterr()
    caption.main(argv + ["--skip_missing"])
    assert "1 images without features" in capsys.readouterr().err


@pytest.mark.parametrize("hparams_set", ["captioner_tiny_area2x2", "updown_tiny"])
def test_self_critical_steps_train_a_dropout_free_copy(hparams_set):
    """--scst_dropout off: the model that the gradient steps train draws no
    dropout mask in training mode either, and starts from the same weights."""
    from keras_structattn.data.word_vocab import WordVocab
    from models import registry
    from recipes.caption import commands

    hparams = registry.get(hparams_set).override(hidden_size=32)
    grid = hparams.encoder_input == "grid"
    settings = {"feature_shape": [8, 8, 36] if grid else [30]}
    vocab = WordVocab.build(["a red circle left of a blue square".split()], min_count=1)
    model = commands.build_model(hparams, vocab.vocab_size, settings["feature_shape"], seed=3)
    copy = commands.dropout_free(model, hparams, vocab, settings)
    rng = np.random.default_rng(0)
    if grid:
        features = rng.random((2, 8, 8, 36), np.float32)
    else:
        features = {"features": rng.random((2, 5, 30), np.float32),
                    "boxes": np.sort(rng.random((2, 5, 4), np.float32), -1),
                    "mask": np.ones((2, 5), bool)}
    words = np.array([[0, 4, 5, 6], [0, 7, 8, 9]], "int32")
    inference = np.asarray(model((features, words), training=False))
    np.testing.assert_allclose(np.asarray(copy((features, words), training=True)), inference,
                               rtol=1e-5, atol=1e-5)
    assert not np.allclose(np.asarray(model((features, words), training=True)), inference,
                           atol=1e-5)
    no_dropout = hparams.override(**{k: 0.0 for k in hparams.values() if k.endswith("dropout")})
    assert commands.dropout_free(copy, no_dropout, vocab, settings) is copy
