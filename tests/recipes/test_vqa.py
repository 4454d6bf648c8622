"""The VQA recipe, run as a user runs it, on a tiny Shapes world.

One MCAN run is trained and evaluated once per module (`trained`: 2
epochs of a one-layer model on 24 generated images). The tests then evaluate,
predict, score and visualize it, resume it after a kill, train MCAN+PA and
MUAN briefly, and feed the loaders broken files through the command line.
"""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from keras_structattn.training import precision as precision_of_machine
from recipes import _cli
from recipes import vqa
from tests.recipes.conftest import ROOT
from tests.recipes.test_caption import assert_same_weights
from tests.recipes.test_translate_cli import ENV
from tests.recipes.test_translate_cli import assert_error

FIXTURES = f"{ROOT}/tests/fixtures/vqa_eval"
TINY = {
    "mcan": "hidden_size=16,num_heads=2,filter_size=32,num_encoder_layers=1,"
            "num_decoder_layers=1,word_dim=8,flat_mlp_size=8,flat_output_size=16,batch_size=8",
    "muan": "hidden_size=16,num_heads=2,filter_size=32,num_blocks=1,word_dim=8,batch_size=8",
}


def flags(out, model="mcan", *extra):
    family = "muan" if model == "muan" else "mcan"
    return ["--output_dir", str(out), "--model", model, "--hparams", TINY[family],
            "--min_answer_count", "1", "--world_train", "24", "--world_val", "4",
            "--world_test", "6", "--predict_batch_size", "16", "--verbose", "0", *extra]


def train(out, model="mcan", *extra):
    return vqa.main(["train", *flags(out, model, "--epochs", "2", *extra)])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("vqa") / "run"
    train(out, "mcan", "--jit", "off")  # then evaluates: DIR/test_results.json
    return out


def world_file(run, *parts):
    return str(run.joinpath("shapes_world", *parts))


# ------------------------------------------------------------ the commands


def test_evaluate_prints_accuracy_per_type_next_to_the_baseline(trained, capsys):
    scores = vqa.main(["evaluate", *flags(trained)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["question", "type", "questions", "model", "baseline"]
    types = {line.split()[0] for line in lines[1:]}
    assert {"count", "color", "shape", "exist", "relation", "overall"} <= types
    saved = json.loads((trained / "test_scores.json").read_text())
    assert set(saved) == {"overall", "perAnswerType", "perQuestionType", "perQuestion"}
    assert saved["overall"] == scores.overall
    overall = next(line for line in lines if line.startswith("overall")).split()
    assert float(overall[2]) == pytest.approx(scores.overall)


def test_answers_are_counted_over_train_and_val(trained):
    """MCAN's answer vocabulary: normalised multiple_choice_answer counts of
    the training and validation annotations."""
    from keras_structattn.metrics import prepare_answer

    counts = {}
    for split in ("train", "val"):
        annotations = json.loads(open(world_file(trained, "vqa",
                                                 f"annotations_{split}.json")).read())
        for record in annotations["annotations"]:
            answer = prepare_answer(record["multiple_choice_answer"])
            counts[answer] = counts.get(answer, 0) + 1
    saved = json.loads((trained / "answers.json").read_text())
    assert dict(zip(saved["answers"], saved["counts"])) == counts  # --min_answer_count 1


def test_predict_then_score_gives_the_evaluated_accuracy(trained, tmp_path, capsys):
    results = tmp_path / "results.json"
    vqa.main(["predict", *flags(trained), "--questions",
              world_file(trained, "vqa", "questions_test.json"),
              "--features", world_file(trained, "features_test.npz"),
              "--output_file", str(results)])
    evaluated = json.loads((trained / "test_results.json").read_text())
    assert json.loads(results.read_text()) == evaluated
    capsys.readouterr()
    scores = vqa.main(["score", "--questions", world_file(trained, "vqa", "questions_test.json"),
                       "--annotations", world_file(trained, "vqa", "annotations_test.json"),
                       "--results", str(results), "--output", str(tmp_path / "s.json")])
    assert scores.to_official() == {
        k: (v if k != "perQuestion" else {int(q): a for q, a in v.items()})
        for k, v in json.loads((trained / "test_scores.json").read_text()).items()}


def test_per_image_bottom_up_files_give_the_same_answers(trained, tmp_path, capsys):
    """The real-data layout: a folder of `<image_id>.npz` with `features`
    [N, C], pixel `boxes` [N, 4], `image_w`, `image_h` (bottom-up style)."""
    folder = tmp_path / "features"
    folder.mkdir()
    size = 64  # Shapes world's canvas
    with np.load(world_file(trained, "features_test.npz")) as world:
        for row, image_id in enumerate(world["image_ids"]):
            count = int(world["num_obj"][row])
            np.savez(folder / f"{image_id}.npz", features=world["obj_features"][row, :count],
                     boxes=world["obj_boxes"][row, :count] * size, image_w=size, image_h=size)
    results = vqa.main(["predict", *flags(trained), "--questions",
                        world_file(trained, "vqa", "questions_test.json"),
                        "--features", str(folder)])
    evaluated = json.loads((trained / "test_results.json").read_text())
    assert results == evaluated
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"{results[0]['question_id']}\t{results[0]['answer']}"


def test_score_reproduces_the_official_evaluation(tmp_path, capsys):
    """The fixture's results set A, scored as the official code (2021) did."""
    expected = json.loads(open(f"{FIXTURES}/expected_accuracy.json").read())["2021"]["A"]
    vqa.main(["score", "--questions", f"{FIXTURES}/questions.json", "--annotations",
              f"{FIXTURES}/annotations.json", "--results", f"{FIXTURES}/results_A.json",
              "--output", str(tmp_path / "a.json")])
    written = json.loads((tmp_path / "a.json").read_text())
    assert written["overall"] == expected["overall"]
    assert written["perQuestion"] == expected["perQuestion"]
    overall = next(line for line in capsys.readouterr().out.splitlines()
                   if line.startswith("overall"))
    assert float(overall.split()[-1]) == expected["overall"]


def test_visualize_writes_one_png_per_question(trained, capsys):
    written = vqa.main(["visualize", *flags(trained), "--num_questions", "2"])
    assert len(written) == 2
    from PIL import Image

    with Image.open(written[0]) as image:
        assert image.size[0] >= 300


@pytest.mark.parametrize("model", ["mcan_pa", "muan"])
def test_other_models_train_evaluate_and_draw(model, trained, tmp_path, capsys):
    out = tmp_path / model
    shutil.copytree(trained / "shapes_world", out / "shapes_world")  # skip generating
    # MUAN trains in mixed bfloat16: the run keeps its precision. MCAN+PA's
    # `auto` is the machine's (bfloat16 on CPUs with AMX tiles).
    precision = ["--precision", "mixed_bfloat16"] if model == "muan" else []
    vqa.main(["train", *flags(out, model, "--epochs", "1", *precision)])
    assert "overall" in capsys.readouterr().out
    settings = json.loads((out / "run.json").read_text())
    expected = "mixed_bfloat16" if model == "muan" else precision_of_machine.resolve("auto")
    assert settings["precision"] == expected
    if model == "muan":
        with pytest.raises(_cli.UsageError, match=r"--precision float32 \(the run has "
                           r"mixed_bfloat16\)"):
            vqa.main(["evaluate", *flags(out, model, "--precision", "float32")])
    (path,) = vqa.main(["visualize", *flags(out, model, "--num_questions", "1")])
    from PIL import Image

    with Image.open(path) as image:  # MUAN: the quadrants beside the image
        wide = image.size[0] > image.size[1] + 100
    assert wide == (model == "muan")


def test_resumed_run_ends_at_the_weights_of_a_straight_run(trained, tmp_path, capsys):
    """1 epoch, then a second command to 2 epochs, gives the weights of the
    module's straight 2-epoch run (the order of each epoch's batches comes
    from the seed and the epoch). Killing a run mid-way (atomic
    checkpoints, `kill -9`) is tested on the captioning and translation
    recipes, which write the same checkpoints."""
    out = tmp_path / "resumed"
    shutil.copytree(trained / "shapes_world", out / "shapes_world")
    for epochs in ("1", "2"):
        vqa.main(["train", *flags(out, "mcan", "--epochs", epochs, "--jit", "off",
                                  "--no_eval")])
    assert "resuming at epoch 2" in capsys.readouterr().err
    assert_same_weights(trained / "checkpoints" / "ckpt-0002.weights.h5",
                        out / "checkpoints" / "ckpt-0002.weights.h5")


# ----------------------------------------------------- errors, as a user sees them

BAD_COMMAND_LINES = [
    (["score", "--results", "README.md"], "score needs --questions, --annotations and --results"),
    (["--questions_train", "README.md"], "--questions_train needs --annotations_train"),
    (["--annotations_val", "README.md"], "--annotations_val needs --questions_val"),
    (["--questions_train", "README.md", "--annotations_train", "README.md"],
     "real questions need their region features: give --features"),
    (["predict", "--questions", "README.md"], "predict needs --questions"),
    (["evaluate", "--output_dir", "no_run_here"], "no trained run in no_run_here"),
    (["--model", "lstm"], "argument --model: invalid choice: 'lstm'"),
    (["--features", "nowhere"], "argument --features: no such file: nowhere"),
]


@pytest.mark.parametrize("argv, message", BAD_COMMAND_LINES,
                         ids=[" ".join(argv) for argv, _ in BAD_COMMAND_LINES])
def test_bad_command_lines_are_one_line_usage_errors(argv, message):
    """Checked before TensorFlow loads."""
    code = ("import sys\nfrom recipes import _cli, vqa\n"
            f"_cli.entry_point(vqa.main, {argv!r})\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV,
                            capture_output=True, text=True, timeout=60)
    assert_error(result, 2, message)


def _vqa_files(tmp_path, trained, edit):
    """Copies of the world's training questions and annotations, `edit`ed."""
    questions = json.loads(open(world_file(trained, "vqa", "questions_train.json")).read())
    annotations = json.loads(open(world_file(trained, "vqa", "annotations_train.json")).read())
    edit(questions, annotations)
    paths = tmp_path / "q.json", tmp_path / "a.json"
    paths[0].write_text(json.dumps(questions))
    paths[1].write_text(json.dumps(annotations))
    return [str(p) for p in paths]


def test_data_errors_name_the_file_and_the_question(trained, tmp_path):
    def unknown_question(questions, annotations):
        annotations["annotations"][1]["question_id"] = 777

    def nine_answers(questions, annotations):
        del annotations["annotations"][2]["answers"][0]

    features = world_file(trained, "features_train.npz")
    for edit, question_id in ((unknown_question, "777"), (nine_answers, None)):
        q, a = _vqa_files(tmp_path, trained, edit)
        wanted = question_id or str(json.loads(open(a).read())["annotations"][2]["question_id"])
        with pytest.raises(ValueError, match=rf"a\.json.*{wanted}"):
            vqa.main(["train", "--output_dir", str(tmp_path / "run"), "--questions_train", q,
                      "--annotations_train", a, "--features", features])
        assert not (tmp_path / "run" / "run.json").exists()


def test_missing_features_stop_or_are_counted(trained, tmp_path, capsys):
    """An image without features stops the run, or is skipped and counted;
    the counted run also starts its embeddings from a GloVe-format file."""
    def other_image(questions, annotations):
        questions["questions"][0]["image_id"] = 424242
        annotations["annotations"][0]["image_id"] = 424242

    q, a = _vqa_files(tmp_path, trained, other_image)
    vectors = tmp_path / "glove.txt"
    rng = np.random.default_rng(0)
    vectors.write_text("".join(
        f"{word} " + " ".join(f"{v:.3f}" for v in rng.normal(size=8)) + "\n"
        for word in ("what", "color", "notaquestionword")))
    argv = ["train", "--output_dir", str(tmp_path / "run"), "--questions_train", q,
            "--annotations_train", a, "--features", world_file(trained, "features_train.npz"),
            "--hparams", TINY["mcan"], "--min_answer_count", "1", "--epochs", "1",
            "--no_eval", "--verbose", "0", "--word_vectors", str(vectors)]
    with pytest.raises(ValueError, match="424242"):
        vqa.main(argv)
    capsys.readouterr()
    vqa.main(argv + ["--skip_invalid"])
    err = capsys.readouterr().err
    assert "1 questions skipped" in err
    words = json.loads((tmp_path / "run" / "question_vocab.json").read_text())["words"]
    assert f"2 of {len(words) + 3} words found (8-d)" in err, err
    assert np.isfinite(json.loads((tmp_path / "run" / "train_summary.json").read_text())
                       ["loss"][-1])


def test_score_names_the_results_file_and_the_question(tmp_path):
    results = json.loads(open(f"{FIXTURES}/results_A.json").read())
    dropped = results.pop()["question_id"]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    with pytest.raises(ValueError, match=rf"results\.json.*{dropped}"):
        vqa.main(["score", "--questions", f"{FIXTURES}/questions.json", "--annotations",
                  f"{FIXTURES}/annotations.json", "--results", str(path)])
    results.append({"question_id": 123, "answer": "yes"})
    path.write_text(json.dumps(results))
    with pytest.raises(ValueError, match=r"results\.json, question id 123"):
        vqa.main(["score", "--questions", f"{FIXTURES}/questions.json", "--annotations",
                  f"{FIXTURES}/annotations.json", "--results", str(path)])


# ------------------------------------------------------- Transformer+CATT

CATT_TINY = ("hidden_size=16,num_heads=2,filter_size=32,num_language_layers=1,"
             "num_vision_layers=1,num_cross_layers=1,word_dim=16,dictionary_size=16,"
             "batch_size=8")


def catt_flags(out, *extra):
    return ["--output_dir", str(out), "--model", "catt", "--hparams", CATT_TINY,
            "--min_answer_count", "1", "--world_train", "40", "--world_val", "10",
            "--world_test", "10", "--predict_batch_size", "16", "--verbose", "0", *extra]


def test_catt_reports_the_bias_conflict_questions_and_draws_both_attentions(tmp_path, capsys):
    """--world_bias marks the test questions that contradict the confounder;
    their accuracy and the others' are printed and saved beside the official
    dict. --dictionary_init uniform (the 'w/o Init' ablation) is a run
    setting. The pictures put the IS attention beside the CS one."""
    out = tmp_path / "catt"
    flags_ = catt_flags(out, "--world_bias", "circle=red:0.9")
    vqa.main(["train", *flags_, "--epochs", "1", "--dictionary_init", "uniform"])
    captured = capsys.readouterr()
    assert "[dictionaries] uniform(0, 0.01)" in captured.err
    assert json.loads((out / "run.json").read_text())["dictionary_init"] == "uniform"
    annotations = json.loads(open(world_file(out, "vqa", "annotations_test.json")).read())
    conflicts = sum(a["bias_conflict"] for a in annotations["annotations"])
    saved = json.loads((out / "test_scores.json").read_text())
    assert {"overall", "perAnswerType", "perQuestionType", "perQuestion"} < set(saved)
    per_question = {int(q): a for q, a in saved["perQuestion"].items()}
    conflicting = [per_question[a["question_id"]] for a in annotations["annotations"]
                   if a["bias_conflict"]]
    bias = saved["biasConflict"]
    assert bias["conflict_questions"] == conflicts > 0
    assert bias["other_questions"] == len(annotations["annotations"]) - conflicts
    assert bias["conflict"] == pytest.approx(np.mean(conflicting), abs=0.01)
    line = next(x for x in captured.out.splitlines() if x.startswith("[bias conflict]"))
    assert line.split()[2:4] == [str(conflicts), f"{bias['conflict']:.2f}"]
    with pytest.raises(_cli.UsageError, match="--dictionary_init kmeans"):  # a run setting
        vqa.main(["train", *flags_, "--dictionary_init", "kmeans"])
    capsys.readouterr()
    written = vqa.main(["visualize", *flags_, "--num_questions", "2"])
    from PIL import Image

    with Image.open(written[0]) as first, Image.open(written[1]) as second:
        assert first.size == second.size and first.size[0] > first.size[1] + 200
        assert np.abs(np.asarray(first, float) - np.asarray(second, float)).max() > 0


def test_catt_fits_its_dictionaries_once_and_resumes_to_a_straight_run(tmp_path, capsys):
    """A new run fits both dictionaries by K-means before training; a
    resumed one takes them from its checkpoint, so 1 + 1 epochs end at the
    weights of 2 straight epochs."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    vqa.main(["train", *catt_flags(straight, "--epochs", "2", "--jit", "off", "--no_eval")])
    err = capsys.readouterr().err
    assert "[dictionaries] language: K-means of" in err
    assert "[dictionaries] vision: K-means of" in err
    shutil.copytree(straight / "shapes_world", resumed / "shapes_world")
    for epochs in ("1", "2"):
        vqa.main(["train", *catt_flags(resumed, "--epochs", epochs, "--jit", "off",
                                       "--no_eval")])
    err = capsys.readouterr().err
    assert "resuming at epoch 2" in err and err.count("K-means of") == 2  # the first command's
    assert_same_weights(straight / "checkpoints" / "ckpt-0002.weights.h5",
                        resumed / "checkpoints" / "ckpt-0002.weights.h5")
