"""The TextVQA recipe, run as a user runs it, on a tiny Shapes world.

One SA-M4C run (one plain and one spatial layer, 2 epochs on 24 generated
images) is trained and evaluated once per module; the tests then evaluate,
predict, score and visualize it, resume it after `kill -9`, train M4C on a
broken imdb, and feed the command line bad flags.
"""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from recipes import textvqa
from tests.recipes.conftest import ROOT
from tests.recipes.conftest import kill_at_checkpoint
from tests.recipes.test_caption import assert_same_weights
from tests.recipes.test_translate_cli import ENV
from tests.recipes.test_translate_cli import assert_error

TINY = ("hidden_size=24,filter_size=32,num_text_layers=1,num_layers=1,num_spatial_layers={},"
        "batch_size=8,min_answer_count=1")


def flags(out, model="sa_m4c", *extra):
    return ["--output_dir", str(out), "--model", model,
            "--hparams", TINY.format(1 if model == "sa_m4c" else 0),
            "--world_train", "24", "--world_val", "4", "--world_test", "8",
            # Without XLA (tiny steps: compiling costs more than it saves);
            # the VQA recipe's tests cover the default, XLA.
            "--predict_batch_size", "16", "--verbose", "0", "--jit", "off", *extra]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("textvqa") / "run"
    textvqa.main(["train", *flags(out, "sa_m4c", "--epochs", "2", "--jit", "off")])
    return out


def imdb(run, split):
    return str(run / "shapes_world" / "textvqa" / f"imdb_{split}.npy")


# ------------------------------------------------------------ the commands


def test_evaluate_prints_accuracy_and_anls_per_type_next_to_the_baselines(trained, capsys):
    scores = textvqa.main(["evaluate", *flags(trained)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["question", "type", "questions", "model", "acc", "model",
                                "anls", "majority", "acc", "majority", "anls", "first_ocr",
                                "acc", "first_ocr", "anls"]
    names = {line.split()[0] for line in lines[1:]}
    assert {"[ocr]", "overall"} <= names
    saved = json.loads((trained / "test_scores.json").read_text())
    assert set(saved) == {"accuracy", "anls", "per_question"}
    overall = next(line for line in lines if line.startswith("overall")).split()
    assert float(overall[2]) == pytest.approx(100 * scores.accuracy, abs=0.006)
    assert float(overall[3]) == pytest.approx(100 * scores.anls, abs=0.006)
    assert saved["accuracy"] == pytest.approx(scores.accuracy)


def test_predict_then_score_gives_the_evaluated_scores(trained, tmp_path, capsys):
    results = tmp_path / "results.json"
    textvqa.main(["predict", *flags(trained), "--imdb", imdb(trained, "test"),
                  "--output_file", str(results)])
    capsys.readouterr()
    output = tmp_path / "scores.json"
    scores = textvqa.main(["score", "--annotations", imdb(trained, "test"),
                           "--results", str(results), "--output", str(output)])
    evaluated = json.loads((trained / "test_scores.json").read_text())
    assert scores.accuracy == pytest.approx(evaluated["accuracy"])
    assert scores.anls == pytest.approx(evaluated["anls"])
    assert json.loads(output.read_text())["per_question"] == evaluated["per_question"]
    out = capsys.readouterr().out.splitlines()
    assert out[1] == f"accuracy\t{100 * scores.accuracy:.2f}"  # percentages, as evaluate's


def test_score_takes_the_official_annotation_json(tmp_path, capsys):
    """Hand-computed: "cafe" matches 4 of 10 answers (accuracy 1); "cafe"
    against "caf" is one edit in 4 letters (ANLS 0.75, accuracy 0); "ab"
    against "abcd" is NL = 0.5, 0 in ST-VQA's ANLS and 0.5 in mmf's."""
    annotations = {"dataset_name": "textvqa", "dataset_version": "0.5.1", "data": [
        {"question_id": 1, "image_id": "a", "question": "what?",
         "answers": ["cafe"] * 4 + ["bar"] * 6},
        {"question_id": 2, "image_id": "b", "question": "what?", "answers": ["caf"] * 10},
        {"question_id": 3, "image_id": "c", "question": "what?", "answers": ["abcd"] * 10},
    ]}
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(annotations))
    results = tmp_path / "results.json"
    results.write_text(json.dumps([{"question_id": q, "answer": a}
                                   for q, a in ((1, "cafe"), (2, "cafe"), (3, "ab"))]))
    scores = textvqa.main(["score", "--annotations", str(path), "--results", str(results)])
    assert scores.accuracy == pytest.approx(1 / 3)
    assert scores.anls == pytest.approx((1 + 0.75 + 0) / 3)
    mmf = textvqa.main(["score", "--annotations", str(path), "--results", str(results),
                        "--anls", "mmf"])
    assert mmf.anls == pytest.approx((1 + 0.75 + 0.5) / 3)
    assert capsys.readouterr().out.splitlines()[-2:] == ["accuracy\t33.33", "anls\t75.00"]
    # A question of 9 answers among questions of 10: refused, as VQA's reader does.
    annotations["data"][1]["answers"] = ["caf"] * 9
    path.write_text(json.dumps(annotations))
    with pytest.raises(ValueError, match=r"question id 2 \(data\[1\]\): 9 answers, where "
                                         r"the file's questions have 10 \(2 of 3\)"):
        textvqa.main(["score", "--annotations", str(path), "--results", str(results)])


def test_visualize_draws_the_ocr_boxes_and_one_panel_per_spatial_head(trained, capsys):
    from PIL import Image

    written = textvqa.main(["visualize", *flags(trained), "--num_questions", "2"])
    assert len(written) == 2
    for path in written:
        with Image.open(path) as image:
            width, height = image.size
        # The question's picture, and beside it 3 rows of 4 head panels.
        assert width > 2 * height / 3 and width > 600, (width, height)


def test_a_run_killed_mid_training_resumes_to_the_straight_runs_weights(trained, tmp_path):
    out = tmp_path / "killed"
    shutil.copytree(trained / "shapes_world", out / "shapes_world")
    command = [sys.executable, "-m", "recipes.textvqa", "train",
               *flags(out, "sa_m4c", "--epochs", "2", "--jit", "off", "--no_eval")]
    kill_at_checkpoint(command, out / "checkpoints" / "ckpt-0001.weights.h5", ENV)
    result = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "resuming" in result.stderr
    assert_same_weights(trained / "checkpoints" / "ckpt-0002.weights.h5",
                        out / "checkpoints" / "ckpt-0002.weights.h5")


# ----------------------------------------------------- errors, as a user sees them

BAD_COMMAND_LINES = [
    (["score", "--results", "README.md"], "score needs --annotations and --results"),
    (["predict"], "predict needs --imdb"),
    (["--model", "m4c", "--graph", "random"], "--graph is for --model sa_m4c"),
    (["--object_features", "docs"], "give --object_features and --ocr_features together"),
    (["evaluate", "--output_dir", "no_run_here"], "no trained run in no_run_here"),
    (["--model", "m5c"], "argument --model: invalid choice: 'm5c'"),
    (["--imdb_train", "nowhere.npy"], "argument --imdb_train: no such file: nowhere.npy"),
]


@pytest.mark.parametrize("argv, message", BAD_COMMAND_LINES,
                         ids=[" ".join(argv) for argv, _ in BAD_COMMAND_LINES])
def test_bad_command_lines_are_one_line_usage_errors(argv, message):
    """Checked before TensorFlow loads."""
    code = ("import sys\nfrom recipes import _cli, textvqa\n"
            f"_cli.entry_point(textvqa.main, {argv!r})\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV,
                            capture_output=True, text=True, timeout=60)
    assert_error(result, 2, message)


def test_a_malformed_imdb_entry_stops_the_run_or_is_counted(trained, tmp_path, capsys):
    """The error names the file and the entry; --skip_invalid counts it and
    trains M4C on the rest."""
    entries = np.load(imdb(trained, "train"), allow_pickle=True)
    entries[3] = dict(entries[3], ocr_normalized_boxes=np.zeros((1, 3), "float32"))
    broken = tmp_path / "textvqa" / "imdb_train.npy"
    broken.parent.mkdir()
    np.save(broken, entries, allow_pickle=True)
    shutil.copy(trained / "shapes_world" / "features_train.npz", tmp_path)
    argv = ["train", *flags(tmp_path / "run", "m4c", "--imdb_train", str(broken), "--epochs",
                            "1", "--no_eval")]
    with pytest.raises(ValueError, match=r"imdb_train\.npy.*3"):
        textvqa.main(argv)
    assert not (tmp_path / "run" / "run.json").exists()
    capsys.readouterr()
    # The counted run also reads the OCR tokens' word vectors from a local file.
    vectors = tmp_path / "vectors.vec"
    tokens = sorted({t for e in entries[1:] for t in e["ocr_tokens"]})
    vectors.write_text("2 4\n" + "".join(f"{t} 0.1 0.2 0.3 {k}\n"
                                          for k, t in enumerate(tokens[:2])))
    textvqa.main(argv + ["--skip_invalid", "--fasttext", str(vectors)])
    err = capsys.readouterr().err
    assert f"{len(entries) - 2} of {len(entries) - 1} entries kept" in err, err
    assert f"vectors for 2 of {len(tokens)} OCR token types" in err, err
    hparams = json.loads((tmp_path / "run" / "hparams.json").read_text())
    # FastText, PHOC, appearance (the recipe's world: 25 dims, no box); real data: the
    # paper's set, no order vectors, and the boxes as given (no jitter).
    assert hparams["ocr_feature_dim"] == 4 + 604 + 25
    assert hparams["box_jitter"] == 0.0 and not hparams["ocr_order_vectors"]
    history = json.loads((tmp_path / "run" / "train_summary.json").read_text())
    assert np.isfinite(history["loss"][-1])


def test_per_image_feature_folders_give_the_same_answers(trained, tmp_path, capsys):
    """Real data's layout: per-image .npz object and OCR features named by
    image id, an imdb without feature paths."""
    entries = np.load(imdb(trained, "test"), allow_pickle=True)
    with np.load(trained / "shapes_world" / "features_test.npz") as data:
        stacked = {k: data[k] for k in data.files}
    objects, ocr = tmp_path / "objects", tmp_path / "ocr"
    objects.mkdir()
    ocr.mkdir()
    for k, image_id in enumerate(stacked["image_ids"]):
        n, t = stacked["num_obj"][k], stacked["num_ocr"][k]
        np.savez(objects / f"{image_id}.npz", features=stacked["obj_features"][k, :n],
                 boxes=stacked["obj_boxes"][k, :n] * 64, image_w=64, image_h=64)
        np.savez(ocr / f"{image_id}.npz", features=stacked["ocr_features"][k, :t])
    for k in range(1, len(entries)):
        entries[k] = {key: v for key, v in entries[k].items()
                      if key not in ("feature_path", "feature_index")}
    moved = tmp_path / "imdb_test.npy"
    np.save(moved, entries, allow_pickle=True)
    folders = ["--object_features", str(objects), "--ocr_features", str(ocr)]
    want = textvqa.main(["predict", *flags(trained), "--imdb", imdb(trained, "test")])
    got = textvqa.main(["predict", *flags(trained), "--imdb", str(moved), *folders])
    assert got == want


def test_shapes_world_trains_to_early_stopping_under_a_time_cap_unless_told():
    """The default run's budget (docs/textvqa.md): on Shapes world, early
    stopping on the validation accuracy and a time cap where the flags are
    left out; the flags given win; real data keeps the paper's schedule."""
    def checked(*argv):
        args = textvqa.build_parser().parse_args(["train", *argv])
        textvqa.check_args(args)
        return args.early_stopping, args.max_minutes

    assert checked() == (("accuracy", 15), 7.5)
    assert checked("--max_minutes", "2", "--early_stopping", "loss:2") == (("loss", 2), 2.0)
    assert checked("--imdb_train", "README.md") == (None, None)
    world = textvqa.build_parser().parse_args(["train"])
    assert world.world_region_geometry == "off" and world._world_sizes["train"] == 4500
