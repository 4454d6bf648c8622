"""The captioning recipe's CATT and Up-Down models (`--model`), on a tiny
biased Shapes world: dictionaries fitted by K-means for a new run (not for a
resumed one), `--dictionary_init uniform`, the hallucination rates of
`evaluate`, and the pictures of IS and CS attention side by side."""

import json
import shutil

import pytest

from recipes import _cli
from recipes import caption

TINY_CATT = "num_hidden_layers=1,hidden_size=16,filter_size=32,num_heads=2,dictionary_size=8"
TINY_BUTD = "hidden_size=16,attention_size=8,dictionary_size=8"


def flags(out, model, hparams, *extra):
    return ["--output_dir", str(out), "--model", model, "--hparams", hparams + ",batch_size=4",
            "--min_word_count", "1", "--world_train", "24", "--world_val", "4",
            "--world_test", "6", "--world_bias", "circle=red:0.9", "--beam_size", "2",
            "--decode_batch_size", "4", "--scst_steps", "0", "--steps_per_checkpoint", "1",
            "--jit", "off", "--verbose", "0", "--examples", "0", *extra]


@pytest.fixture(scope="module")
def catt_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("caption_catt") / "run"
    caption.main(["train", *flags(out, "catt", TINY_CATT, "--train_steps", "1", "--no_eval")])
    return out


def test_a_new_catt_run_fits_its_dictionaries_and_a_resumed_one_does_not(catt_run, capsys):
    settings = json.loads((catt_run / "run.json").read_text())
    assert (settings["model"], settings["dictionary_init"]) == ("catt", "kmeans")
    assert settings["hparams_set"] == "catt_captioner_tiny"
    assert settings["feature_kind"] == "regions"
    world = json.loads((catt_run / "shapes_world" / "recipe_world.json").read_text())
    assert world["bias"] == "circle=red:0.9@train,val"
    capsys.readouterr()
    caption.main(["train", *flags(catt_run, "catt", TINY_CATT, "--train_steps", "2",
                                  "--no_eval")])
    err = capsys.readouterr().err
    assert "resuming cross-entropy at step 1" in err
    assert "[dictionaries]" not in err  # the checkpoint holds them


def test_evaluate_reports_colour_shape_hallucination(catt_run, capsys):
    capsys.readouterr()
    caption.main(["evaluate", *flags(catt_run, "catt", TINY_CATT)])
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in lines if line}
    for name in ("CIDEr", "CHAIR_i", "CHAIR_s", "biased", "biased@cf"):
        assert name in rows
        assert len(rows[name]) == 2  # model, biggest_shape
    saved = json.loads((catt_run / "test_scores.json").read_text())
    rates = saved["model"]["hallucination"]
    assert rates["captions"] == 6 and 0.0 <= rates["chair_s"] <= 1.0
    assert rows["CHAIR_s"][0] == f"{100 * rates['chair_s']:.2f}%"
    # The biggest-shape floor describes what is in the image: it never hallucinates.
    assert saved["biggest_shape"]["hallucination"]["chair_i"] == 0.0


def test_catt_visualize_draws_is_beside_cs(catt_run):
    from PIL import Image

    paths = caption.main(["visualize", *flags(catt_run, "catt", TINY_CATT),
                          "--num_images", "2"])
    assert len(paths) == 2
    for path in paths:
        with Image.open(path) as image:
            assert image.format == "PNG"
            assert image.size[0] > 2 * 384  # two 384-pixel panels side by side


def test_butd_catt_with_the_uniform_initializer(tmp_path, capsys):
    from PIL import Image

    out = tmp_path / "butd"
    caption.main(["train", *flags(out, "butd_catt", TINY_BUTD, "--train_steps", "1",
                                  "--no_eval", "--dictionary_init", "uniform")])
    err = capsys.readouterr().err
    assert "uniform(0, 0.01) initializer" in err and "K-means" not in err
    settings = json.loads((out / "run.json").read_text())
    assert (settings["model"], settings["dictionary_init"]) == ("butd_catt", "uniform")
    (path,) = caption.main(["visualize", *flags(out, "butd_catt", TINY_BUTD),
                            "--num_images", "1"])
    with Image.open(path) as image:
        assert image.size[0] == 384 + 8 + 300  # regions beside the dictionary's bars


@pytest.mark.parametrize("extra, message", [
    (["--hparams_set", "captioner_tiny"], "not a set of --model catt"),
    (["--world_bias", "cicle=red"], "--world_bias"),
    (["--hparams", TINY_CATT.replace("=8", "=500")], "only"),
])
def test_bad_settings_are_usage_errors(tmp_path, extra, message):
    argv = flags(tmp_path / "run", "catt", TINY_CATT, "--train_steps", "1", "--no_eval")
    if extra[0] == "--hparams":
        argv[argv.index("--hparams") + 1] = extra[1]
        extra = []
    with pytest.raises(_cli.UsageError, match=message):
        caption.main(["train", *argv, *extra])


def test_dictionaries_are_fitted_after_the_warm_up_and_refitted_alike_on_resume(
        tmp_path, capsys):
    """With --dictionary_warmup 2 the K-means runs at step 2 over the embeddings
    learnt by then (changing the dictionaries), and reports what it covers. A run
    killed after the step-2 checkpoint, before the fit was checkpointed, refits
    on resuming and ends at the weights of the uninterrupted run."""
    from tests.recipes.test_caption import assert_same_weights

    straight = tmp_path / "straight"
    argv = flags(straight, "catt", TINY_CATT, "--train_steps", "4", "--dictionary_warmup", "2",
                 "--no_eval")
    capsys.readouterr()
    caption.main(["train", *argv])
    err = capsys.readouterr().err
    assert "fitted at step 2" in err and err.count("[dictionaries] fitted") == 1
    fitted = json.loads((straight / "dictionaries.json").read_text())
    assert fitted["step"] == 2 and set(fitted["dictionaries"]) == {"image", "words"}
    for report in fitted["dictionaries"].values():
        assert 1 <= report["entries_used"] <= 8
        assert 1 <= report["entries_used_per_batch"] <= report["entries_used"]
        assert report["distinct_rows"] <= report["rows"]
    assert json.loads((straight / "run.json").read_text())["dictionary_warmup"] == 2
    # The checkpoint at step 2 holds the dictionaries of before the fit.
    from tests.recipes.test_caption import weights_of

    before = weights_of(straight / "checkpoints" / "ckpt-0002.weights.h5")
    after = weights_of(straight / "checkpoints" / "ckpt-0003.weights.h5")
    changed = [n for n in before if "global_dictionary" in n
               and not (before[n] == after[n]).all()]
    assert changed

    # Killed after the step-2 checkpoint: ckpt 3 and 4, the fit's report and the
    # history rows after step 2 are gone.
    resumed = tmp_path / "resumed"
    shutil.copytree(straight, resumed)
    for name in ("ckpt-0003.weights.h5", "ckpt-0004.weights.h5"):
        (resumed / "checkpoints" / name).unlink()
    (resumed / "dictionaries.json").unlink()
    history = (resumed / "history.csv").read_text().splitlines()
    (resumed / "history.csv").write_text("\n".join(history[:3]) + "\n")
    argv[argv.index(str(straight))] = str(resumed)
    caption.main(["train", *argv])
    err = capsys.readouterr().err
    assert "resuming cross-entropy at step 2" in err and "fitted at step 2" in err
    assert_same_weights(straight / "checkpoints" / "ckpt-0004.weights.h5",
                        resumed / "checkpoints" / "ckpt-0004.weights.h5")
    assert json.loads((resumed / "dictionaries.json").read_text()) == fitted


def test_a_warm_up_as_long_as_the_run_is_a_usage_error(tmp_path):
    with pytest.raises(_cli.UsageError, match="--dictionary_warmup 3 must be below"):
        caption.main(["train", *flags(tmp_path / "run", "catt", TINY_CATT, "--train_steps", "3",
                                      "--dictionary_warmup", "3", "--no_eval")])


def test_evaluate_on_a_biased_world_reports_the_colour_probe(catt_run, capsys):
    caption.main(["evaluate", *flags(catt_run, "catt", TINY_CATT)])
    out = capsys.readouterr().out
    probe = json.loads((catt_run / "test_scores.json").read_text())["model"]["bias_probe"]
    assert set(probe) == {"images", "positions", "log_odds", "biased_preferred", "p_true",
                          "p_biased"}
    assert "colour probe (model)" in out
