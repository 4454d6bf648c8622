"""The vision-and-language recipes on real-format files, as a new user runs
them: the README's commands end to end on small hand-written files
(`tests/recipes/real_files.py`), runs that remember their data, official
test sets without answers, and failed first runs that leave nothing behind.
"""

import json

import numpy as np
import pytest

from recipes import _cli
from recipes import caption
from recipes import grounding
from recipes import vqa
from tests.recipes import real_files
from tests.recipes.test_vqa import CATT_TINY
from tests.recipes.test_vqa import TINY as VQA_TINY

TRAIN_IDS, VAL_IDS, TEST_IDS = range(1, 25), range(101, 105), range(201, 207)
GROUNDING_TINY = "hidden_size=16,num_heads=2,filter_size=32,num_blocks=1,word_dim=8,batch_size=8"
CAPTION_TINY = ("num_hidden_layers=1,hidden_size=32,filter_size=64,num_heads=2,"
                "num_area_layers=1,batch_size=4")
CATT = CATT_TINY.replace(",word_dim=16", "")  # the word vectors' width sets it
QUIET = ["--verbose", "0", "--jit", "off", "--predict_batch_size", "16"]


def no_run_left(out):
    """Nothing a later command would take for a run (or its vocabularies)."""
    return not any((out / name).exists() for name in
                   ("run.json", "hparams.json", "question_vocab.json", "answers.json",
                    "vocab.json"))


# ------------------------------------------------------------------- VQA


@pytest.fixture(scope="module")
def vqa_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("vqa_real")
    features = real_files.write_bottom_up_folder(
        root / "bottom_up", [*TRAIN_IDS, *VAL_IDS, *TEST_IDS])
    train = real_files.write_vqa(root, "train2014", TRAIN_IDS)
    val = real_files.write_vqa(root, "val2014", VAL_IDS)
    test, _ = real_files.write_vqa(root, "test2015", TEST_IDS, annotated=False)
    glove = real_files.write_glove(root / "glove.txt", ["what", "color", "is", "the", "object",
                                                       "there", "an", "?"])
    return dict(root=root, features=features, train=train, val=val, test=test, glove=glove)


def vqa_readme_flags(files, out, *extra):
    """The README's line: --model mcan_pa, --questions_train, --annotations_train,
    --features bottom_up/, --word_vectors (tiny hparams, one epoch)."""
    return ["--output_dir", str(out), "--model", "mcan_pa", "--questions_train",
            files["train"][0], "--annotations_train", files["train"][1],
            "--features", files["features"], "--word_vectors", files["glove"],
            "--hparams", VQA_TINY["mcan"].replace(",word_dim=8", ""), "--min_answer_count", "1",
            "--epochs", "1", *QUIET, *extra]


def test_vqa_readme_line_trains_and_later_commands_reuse_its_data(vqa_files, tmp_path, capsys):
    out = tmp_path / "run"
    vqa.main(["train", *vqa_readme_flags(vqa_files, out)])
    err = capsys.readouterr().err
    assert "not evaluated: no annotated test questions" in err  # no test set given: exit 0
    saved = json.loads((out / "run.json").read_text())["data"]
    assert saved["features"] == vqa_files["features"] and saved["questions_train"] == \
        vqa_files["train"][0]
    # The official test set has no answers: predicted, written for the
    # server (EvalAI's results format), not scored; the features are the run's.
    assert vqa.main(["evaluate", "--output_dir", str(out), "--questions_test",
                     vqa_files["test"], *QUIET]) is None
    results = json.loads((out / "test_results.json").read_text())
    assert len(results) == 2 * len(TEST_IDS)
    assert all(set(r) == {"question_id", "answer"} for r in results)
    assert not (out / "test_scores.json").exists()
    predicted = vqa.main(["predict", "--output_dir", str(out), "--questions", vqa_files["test"],
                          *QUIET])
    assert predicted == results
    # With annotations the split is scored; nothing is generated in the run.
    scores = vqa.main(["evaluate", "--output_dir", str(out), "--split", "val",
                       "--questions_val", vqa_files["val"][0], "--annotations_val",
                       vqa_files["val"][1], *QUIET])
    assert 0 <= scores.overall <= 100
    assert not (out / "shapes_world").exists()
    # The README's score line, on the official files and the run's results.
    capsys.readouterr()
    scored = vqa.main(["score", "--questions", vqa_files["val"][0], "--annotations",
                       vqa_files["val"][1], "--results", str(out / "val_results.json")])
    assert scored.overall == scores.overall
    assert capsys.readouterr().out.splitlines()[-1].split()[0] == "overall"


def test_vqa_a_run_of_before_without_its_data_is_refused_not_given_a_world(vqa_files,
                                                                          tmp_path):
    out = tmp_path / "run"
    vqa.main(["train", *vqa_readme_flags(vqa_files, out, "--no_eval")])
    settings = json.loads((out / "run.json").read_text())
    del settings["data"]  # as runs were saved before they remembered their data
    (out / "run.json").write_text(json.dumps(settings))
    with pytest.raises(_cli.UsageError, match="holds a run without a Shapes world"):
        vqa.main(["evaluate", "--output_dir", str(out), *QUIET])
    assert not (out / "shapes_world").exists()


def test_vqa_a_remembered_file_that_has_gone_is_a_usage_error(vqa_files, tmp_path):
    import shutil

    copy = tmp_path / "features"
    shutil.copytree(vqa_files["features"], copy)
    out = tmp_path / "run"
    vqa.main(["train", *vqa_readme_flags(vqa_files, out, "--no_eval", "--features",
                                         str(copy))])
    shutil.rmtree(copy)
    with pytest.raises(_cli.UsageError, match=rf"--features {copy} \(the run's data, from "
                                              r".*run.json\): no such file"):
        vqa.main(["predict", "--output_dir", str(out), "--questions", vqa_files["test"]])


@pytest.mark.parametrize("defect, error, message", [
    ("boxes_n5", ValueError, r"boxes of shape \[5, 4\]; found \(5, 5\)"),
    ("pixels_no_size", ValueError, r"boxes must lie in \[0, 1\].*image's size"),
    ("catt_dictionary", _cli.UsageError, r"Dictionary .* entries but the training data gave "
                                         r"only .*dictionary_size"),
])
def test_vqa_a_failed_first_train_leaves_no_run(vqa_files, tmp_path, defect, error, message):
    """Each check runs before the run is committed; the corrected command
    then makes the run (it used to be refused: "holds a run with other hparams")."""
    out = tmp_path / "run"
    features = vqa_files["features"]
    model_flags = []
    if defect == "boxes_n5":
        features = real_files.write_bottom_up_folder(
            tmp_path / "f", TRAIN_IDS, boxes=np.zeros((5, 5), np.float32))
    elif defect == "pixels_no_size":
        features = real_files.write_bottom_up_folder(tmp_path / "f", TRAIN_IDS, image_w=None,
                                                     image_h=None)
    else:
        model_flags = ["--model", "catt", "--hparams", CATT.replace("dictionary_size=16",
                                                                    "dictionary_size=5000")]
    flags = [*vqa_readme_flags(vqa_files, out, "--no_eval"), "--features", features,
             *model_flags]
    with pytest.raises(error, match=message):
        vqa.main(["train", *flags])
    assert no_run_left(out)
    fixed = [*vqa_readme_flags(vqa_files, out, "--no_eval")]
    if defect == "catt_dictionary":
        fixed += ["--model", "catt", "--hparams", CATT]
    vqa.main(["train", *fixed])
    assert (out / "run.json").exists()


# ------------------------------------------------------------- grounding


@pytest.fixture(scope="module")
def refcoco_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("refcoco")
    splits = {"train": TRAIN_IDS, "val": VAL_IDS, "testA": range(201, 204),
              "testB": range(204, 207)}
    refs, instances = real_files.write_refcoco(root, splits)
    features = real_files.write_bottom_up_folder(
        root / "proposals", [i for ids in splits.values() for i in ids])
    return dict(root=root, refs=refs, instances=instances, features=features)


def grounding_flags(files, out, *extra):
    """The README's line: --refs "refs(unc).p" --instances --features proposals/."""
    return ["--output_dir", str(out), "--refs", files["refs"], "--instances", files["instances"],
            "--features", files["features"], "--hparams", GROUNDING_TINY, "--epochs", "1",
            *QUIET, *extra]


def test_grounding_readme_line_tests_on_testA_and_testB(refcoco_files, tmp_path, capsys):
    out = tmp_path / "run"
    summary = grounding.main(["train", *grounding_flags(refcoco_files, out)])
    assert summary is not None  # evaluated on `test` = testA + testB
    results = json.loads((out / "test_results.json").read_text())
    assert len(results) == 2 * 6  # two sentences for each of the 6 test images
    capsys.readouterr()
    grounding.main(["evaluate", "--output_dir", str(out), "--split", "testB", *QUIET])
    assert len(json.loads((out / "testB_results.json").read_text())) == 2 * 3
    assert not (out / "shapes_world").exists()


def test_grounding_proposals_outside_the_image_leave_no_run(refcoco_files, tmp_path):
    out = tmp_path / "run"
    outside = np.tile(np.float32([[10, 10, 2 * real_files.WIDTH, 50]]), (5, 1))
    features = real_files.write_bottom_up_folder(
        tmp_path / "f", [*TRAIN_IDS, *VAL_IDS], boxes=outside)
    with pytest.raises(ValueError, match=r"boxes must lie in \[0, 1\]"):
        grounding.main(["train", *grounding_flags(refcoco_files, out, "--no_eval"),
                        "--features", features])
    assert no_run_left(out)


# ------------------------------------------------------------- captioning


@pytest.fixture(scope="module")
def coco_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("coco")
    splits = {"train": TRAIN_IDS, "val": VAL_IDS, "test": TEST_IDS}
    karpathy = real_files.write_karpathy(root / "dataset_coco.json", splits)
    features = real_files.write_coco_grid_folder(
        root / "features", [i for ids in splits.values() for i in ids])
    return dict(root=root, karpathy=karpathy, features=features)


def caption_flags(files, out, *extra):
    """The README's line: --karpathy_json --features coco/features --model area."""
    return ["--output_dir", str(out), "--karpathy_json", files["karpathy"], "--features",
            files["features"], "--model", "area", "--hparams", CAPTION_TINY,
            "--min_word_count", "1", "--train_steps", "2", "--scst_steps", "1",
            "--scst_images", "2", "--scst_samples", "2", "--steps_per_checkpoint", "1",
            "--beam_size", "2", "--decode_batch_size", "4", "--verbose", "0", "--jit", "off",
            *extra]


def test_caption_readme_line_then_decode_reads_what_train_read(coco_files, tmp_path, capsys):
    out = tmp_path / "run"
    caption.main(["train", *caption_flags(coco_files, out)])
    assert json.loads((out / "test_results.json").read_text())
    capsys.readouterr()
    # `decode` on the run's own COCO-named features folder (the docs' layout).
    results = caption.main(["decode", "--output_dir", str(out), "--features",
                            coco_files["features"], "--beam_size", "2"])
    assert sorted(r["image_id"] for r in results) == sorted([*TRAIN_IDS, *VAL_IDS, *TEST_IDS])
    capsys.readouterr()
    scores = caption.main(["evaluate", "--output_dir", str(out), "--beam_size", "2"])
    assert scores is not None
    assert not (out / "shapes_world").exists()
    # Self-critical training has begun: more cross-entropy steps are refused.
    with pytest.raises(_cli.UsageError, match=r"--train_steps 3, but .* began self-critical "
                                              r"training after 2 cross-entropy steps"):
        caption.main(["train", "--output_dir", str(out), "--train_steps", "3", "--scst_steps",
                      "1", "--verbose", "0"])


def test_caption_an_odd_grid_file_leaves_no_run(coco_files, tmp_path):
    import shutil

    features = tmp_path / "features"
    shutil.copytree(coco_files["features"], features)
    np.save(features / "COCO_val2014_000000000001.npy",  # the first file read
            np.zeros((2, 4, real_files.FEATURE_DIM), np.float32))
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=r"COCO_val2014_000000000001.npy: features of shape "
                                         r"\(2, 4, 12\), but .* have \(3, 3, 12\)"):
        caption.main(["train", *caption_flags(coco_files, out, "--no_eval"), "--features",
                      str(features)])
    assert no_run_left(out)


def test_caption_catt_dictionary_larger_than_the_data_leaves_no_run(coco_files, tmp_path):
    """Checked before the run is made, though the dictionaries are fitted
    after the warm-up (the rows counted do not depend on the weights)."""
    regions = real_files.write_bottom_up_folder(
        tmp_path / "regions", [*TRAIN_IDS, *VAL_IDS, *TEST_IDS])
    out = tmp_path / "run"
    flags = caption_flags(coco_files, out, "--no_eval", "--model", "catt", "--features", regions,
                          "--dictionary_warmup", "1", "--train_steps", "2")
    tiny = "num_hidden_layers=1,hidden_size=16,filter_size=32,num_heads=2,batch_size=4"
    with pytest.raises(_cli.UsageError, match=r"Dictionary .* has 5000 entries but the "
                                              r"training data gave only \d+ vectors"):
        caption.main(["train", *flags, "--hparams", f"{tiny},dictionary_size=5000"])
    assert no_run_left(out)
    caption.main(["train", *flags, "--hparams", f"{tiny},dictionary_size=8"])
    assert json.loads((out / "run.json").read_text())["data"]["features"] == regions


def test_another_recipes_run_is_named(vqa_files, tmp_path):
    out = tmp_path / "run"
    vqa.main(["train", *vqa_readme_flags(vqa_files, out, "--no_eval")])
    with pytest.raises(_cli.UsageError, match=r"holds a vqa run \(its hparams.json\), not a run "
                                              r"of python -m recipes.grounding"):
        grounding.main(["evaluate", "--output_dir", str(out)])


# --------------------------------------------------------------- TextVQA


@pytest.fixture(scope="module")
def textvqa_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("textvqa_real")
    ids = {split: real_files.textvqa_image_ids(count, start) for split, count, start in
           (("train", 24, 0), ("val", 4, 100), ("test", 6, 200))}
    everything = [i for split in ids.values() for i in split]
    imdbs = dict(
        train=real_files.write_textvqa_imdb(root / "imdb_train.npy", "train", ids["train"]),
        val=real_files.write_textvqa_imdb(root / "imdb_val.npy", "val", ids["val"]),
        test=real_files.write_textvqa_imdb(root / "imdb_test.npy", "test", ids["test"],
                                           annotated=False))
    return dict(
        ids=ids, **imdbs,
        objects=real_files.write_mmf_object_folder(root / "detectron_fix_100", everything),
        ocr=real_files.write_mmf_ocr_folder(root / "ocr_en_frcn_features", imdbs.values()),
        fasttext=real_files.write_fasttext(root / "wiki.en.vec",
                                           [*real_files.OCR_WORDS, "sign"]),
        answers=real_files.write_answer_vocab(root / "answers.txt", real_files.OCR_WORDS))


def textvqa_readme_flags(files, out, *extra):
    """The README's line: --imdb_train --imdb_val --object_features
    --ocr_features --fasttext --answer_vocab (tiny hparams, one epoch)."""
    from tests.recipes.test_textvqa import TINY

    return ["--output_dir", str(out), "--imdb_train", files["train"], "--imdb_val",
            files["val"], "--object_features", files["objects"], "--ocr_features", files["ocr"],
            "--fasttext", files["fasttext"], "--answer_vocab", files["answers"],
            "--hparams", TINY.format(0), "--epochs", "1", *QUIET, *extra]


def test_textvqa_readme_line_reads_mmf_object_features_by_image_name(textvqa_files, tmp_path,
                                                                   capsys):
    """mmf's `<id>.npy` + `<id>_info.npy` (M4C's objects), through the
    feature stores the other recipes read, keyed by TextVQA's image ids
    (names: "1234567890123456" is one, not an int); later commands reuse
    the run's data."""
    from recipes import textvqa

    out = tmp_path / "run"
    textvqa.main(["train", *textvqa_readme_flags(textvqa_files, out)])
    err = capsys.readouterr().err
    assert (f"[data] features: MmfFolderFeatures({textvqa_files['objects']}): 34 images, "
            f"regions [N, {real_files.FEATURE_DIM}]") in err
    assert f"[data] OCR features: OcrFeatures({textvqa_files['ocr']}, mmf_npy): 34 images" in err
    assert "not evaluated: no annotated test questions" in err
    assert "[train] 24 questions" in err
    saved = json.loads((out / "run.json").read_text())["data"]
    assert saved["object_features"] == textvqa_files["objects"]
    hparams = json.loads((out / "hparams.json").read_text())
    assert hparams["object_feature_dim"] == real_files.FEATURE_DIM
    assert hparams["ocr_feature_dim"] == 6 + 604 + real_files.FEATURE_DIM  # FastText, PHOC, OCR
    capsys.readouterr()
    scores = textvqa.main(["evaluate", "--output_dir", str(out), "--split", "val", *QUIET])
    assert scores is not None and "MmfFolderFeatures" in capsys.readouterr().err
    predicted = textvqa.main(["predict", "--output_dir", str(out), "--imdb",
                              textvqa_files["test"], *QUIET])
    assert len(predicted) == len(textvqa_files["ids"]["test"])
    assert not (out / "shapes_world").exists()


def test_textvqa_object_features_in_a_named_format_and_one_that_cannot_name(textvqa_files,
                                                                         tmp_path):
    from recipes import textvqa

    out = tmp_path / "run"
    textvqa.main(["train", *textvqa_readme_flags(textvqa_files, out, "--no_eval"),
                  "--features_format", "mmf_npy"])
    assert json.loads((out / "run.json").read_text())["data"]["features_format"] == "mmf_npy"
    # bottom-up's .tsv keys its images by COCO's int ids: refused, not misread.
    tsv = tmp_path / "objects.tsv"
    tsv.write_text("1\t640\t480\t0\t\t\n")
    with pytest.raises(ValueError, match=r"keys its images by int ids .* these image ids are "
                                         r"names"):
        textvqa.main(["train", *textvqa_readme_flags(textvqa_files, tmp_path / "other",
                                                     "--no_eval"), "--object_features",
                      str(tsv)])
    assert no_run_left(tmp_path / "other")
    with pytest.raises(_cli.UsageError, match="--features_format is the layout of "
                                              "--object_features"):
        textvqa.main(["train", "--features_format", "mmf_npy"])


def test_textvqa_official_test_imdb_without_answers_is_predicted_not_scored(tmp_path, capsys):
    """mmf's TextVQA test imdb: `has_answer` False, entries without
    `answers` / `valid_answers`. Train with it as --imdb_test: the run ends
    with the official results file, and `evaluate` reuses the run's imdbs."""
    from keras_structattn.data.shapes_world import generate
    from keras_structattn.data.shapes_world.writers import write
    from recipes import textvqa
    from tests.recipes.test_textvqa import TINY

    data = tmp_path / "data"
    write(generate(train=24, val=4, test=6, tasks="textvqa", seed=0), str(data),
          compress=False)
    imdb = np.load(data / "textvqa" / "imdb_test.npy", allow_pickle=True)
    header = dict(imdb[0], has_answer=False)
    entries = [{k: v for k, v in e.items() if k not in ("answers", "valid_answers",
                                                        "answer_tokens", "answer_source")}
               for e in imdb[1:]]
    official = data / "textvqa" / "imdb_test_official.npy"
    np.save(official, np.array([header, *entries], dtype=object), allow_pickle=True)
    out = tmp_path / "run"
    flags = ["--output_dir", str(out), "--model", "m4c", "--hparams", TINY.format(0),
             "--epochs", "1", *QUIET]
    assert textvqa.main(["train", *flags, "--imdb_train", str(data / "textvqa" / "imdb_train.npy"),
                         "--imdb_val", str(data / "textvqa" / "imdb_val.npy"),
                         "--imdb_test", str(official)]) is None  # predicted, not scored
    results = json.loads((out / "test_results.json").read_text())
    assert [r["question_id"] for r in results] == [e["question_id"] for e in entries]
    assert not (out / "test_scores.json").exists()
    assert "the official results format" in capsys.readouterr().err
    scores = textvqa.main(["evaluate", "--output_dir", str(out), "--split", "val", *QUIET])
    assert scores is not None and not (out / "shapes_world").exists()


def test_vqa_regions_beyond_max_regions_are_counted(vqa_files, tmp_path, capsys):
    out = tmp_path / "run"
    flags = vqa_readme_flags(vqa_files, out, "--no_eval")
    flags[flags.index("--hparams") + 1] += ",max_regions=3"  # the files have 5 a image
    vqa.main(["train", *flags])
    err = capsys.readouterr().err
    read = len(TRAIN_IDS) * 2 + 8  # an epoch's questions, and the first batch checked before
    assert (f"[data] train (training batches): {read} of {read} images read had more "
            f"than max_regions=3 regions; {2 * read} regions left out") in err


def test_caption_all_empty_captions_warn(capsys):
    from recipes.caption.commands import warn_if_empty

    warn_if_empty(["a red object", ""])
    assert "warning" not in capsys.readouterr().err
    warn_if_empty(["", " "])
    assert "warning: all 2 captions are empty" in capsys.readouterr().err


def test_vqa_on_openvqa_features_and_the_remembered_format(vqa_files, tmp_path, capsys):
    features = real_files.write_openvqa_folder(tmp_path / "openvqa",
                                               [*TRAIN_IDS, *TEST_IDS])
    out = tmp_path / "run"
    vqa.main(["train", *vqa_readme_flags(vqa_files, out, "--no_eval"), "--features", features,
              "--features_format", "openvqa"])
    err = capsys.readouterr().err
    assert f"regions [N, {real_files.FEATURE_DIM}] (stored channels-first, OpenVQA)" in err
    assert json.loads((out / "run.json").read_text())["data"]["features_format"] == "openvqa"
    results = vqa.main(["predict", "--output_dir", str(out), "--questions", vqa_files["test"],
                        *QUIET])
    assert len(results) == 2 * len(TEST_IDS)
    assert "(stored channels-first, OpenVQA)" in capsys.readouterr().err


def help_of(main, *argv):
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stopped:
        main([*argv, "--help"])
    assert stopped.value.code == 0
    # The flags listed (not those other flags' help texts mention).
    return {line.split()[0].rstrip(",") for line in out.getvalue().splitlines()
            if line.startswith("  -")}


def test_subcommand_help_shows_the_flags_it_reads():
    score = help_of(vqa.main, "score")
    assert all(f in score for f in ("--questions", "--annotations", "--results", "--output",
                                    "--normalization"))
    assert all(f not in score for f in ("--epochs", "--features", "--weights", "--model"))
    evaluate = help_of(caption.main, "evaluate")
    assert all(f in evaluate for f in ("--beam_size", "--split", "--features", "--weights"))
    assert all(f not in evaluate for f in ("--scst_steps", "--train_steps", "--backbone",
                                           "--distribute", "--annotations"))
    train = help_of(caption.main, "train")
    assert all(f in train for f in ("--scst_steps", "--distribute", "--beam_size"))
    assert "--num_images" not in train and "--backbone" not in train
    extract = help_of(caption.main, "extract")
    assert "--backbone_weights" in extract and "--beam_size" not in extract
    everything = help_of(caption.main)
    assert all(f in everything for f in ("--scst_steps", "--backbone", "--annotations"))
