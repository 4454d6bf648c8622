"""The translation recipe as a command-line tool, run as a user runs it.

Each test runs `python -m recipes.translate` in a subprocess and checks what
a user sees: the exit status (0, 2 for a bad command line, 1 for a failure),
the last line of stderr (`error: ...` or `warning: ...`, never a
traceback), stdout (results only) and the run folder (unchanged by a
refused command). The tests are numbered after the items of the issue that
asked for them (docs/recipes.md lists the behaviours).
"""

import gzip
import json
import os
import re
import shutil
import subprocess
import sys

import h5py
import pytest

from tests.recipes.conftest import ROOT
from tests.recipes.conftest import flags
from tests.test_readme import python_blocks

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def run_recipe(*args, stdin=None, module="recipes.translate"):
    """Runs a recipe as a user does; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, env=ENV, input=stdin,
        capture_output=True, text=True, timeout=600,
    )


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def assert_error(result, status, *fragments):
    """A one-line error with `status`: no traceback, each fragment named."""
    assert result.returncode == status, result.stderr[-3000:]
    line = last_line(result.stderr)
    assert line.startswith("error: "), result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    for fragment in fragments:
        assert fragment in line, line
    return line


def snapshot(folder):
    """Every file under `folder` with its size and modification time."""
    found = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            stat = os.stat(path)
            found[os.path.relpath(path, folder)] = (stat.st_size, stat.st_mtime_ns)
    return found


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    """A tiny run: 4 steps, a checkpoint every 2 (trained once per module)."""
    out = tmp_path_factory.mktemp("trained") / "run"
    from recipes import translate

    translate.main(["train", *flags(data, out, "--train_steps", "4",
                                    "--steps_per_checkpoint", "2", "--no_eval")])
    return out


@pytest.fixture
def run_copy(trained, tmp_path):
    """A copy of the trained run that a test may change."""
    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    return copy


# ------------------------------------------------------ 7: one-line errors


BAD_COMMAND_LINES = [
    (["--train_steps", "-5"], "argument --train_steps: must be >= 1, got -5"),
    (["--beam_size", "0"], "argument --beam_size: must be >= 1, got 0"),
    (["--train_steps", "ten"], "expected an integer, got 'ten'"),
    (["--alpha", "-1"], "argument --alpha: must be a finite number >= 0"),
    (["--length_bucket_step", "1"], "--length_bucket_step must be > 1"),
    (["translate"], "invalid choice: 'translate'"),
    (["--no_such_flag"], "unrecognized arguments: --no_such_flag"),
    (["--train_tsv", "nowhere.tsv"], "argument --train_tsv: no such file: nowhere.tsv"),
    (["--train_source", "README.md"], "--train_source and --train_target go together"),
    (["--train_tsv", "README.md", "--train_source", "README.md", "--train_target",
      "README.md"], "give either --train_tsv or --train_source/--train_target"),
    (["decode", "--output_dir", "no_run_here"], "no trained run in no_run_here"),
    (["decode", "--input_file", "recipes"], "argument --input_file: recipes is a folder"),
    (["decode", "--output_file", "missing_folder/out.de"],
     "argument --output_file: the folder of missing_folder/out.de does not exist"),
    (["--output_dir", "README.md"], "argument --output_dir: README.md is a file"),
]


@pytest.mark.parametrize("argv, message", BAD_COMMAND_LINES,
                         ids=[" ".join(argv) for argv, _ in BAD_COMMAND_LINES])
def test_07_bad_command_lines_are_one_line_usage_errors(argv, message):
    assert_error(run_recipe(*argv), 2, message)


def test_07_flags_are_checked_before_tensorflow_loads():
    code = (
        "import sys\n"
        "from recipes import translate\n"
        "try:\n"
        "    translate.main(['--train_steps', '-5'])\n"
        "except ValueError as error:\n"
        "    print(type(error).__name__, error)\n"
        "print(sorted(m for m in ('tensorflow', 'jax', 'keras') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV,
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.splitlines() == [
        "UsageError argument --train_steps: must be >= 1, got -5 "
        "(see python -m recipes.translate --help)",
        "[]",
    ], result.stderr


def test_07_debug_shows_the_traceback():
    result = run_recipe("--beam_size", "0", "--debug")
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "UsageError" in result.stderr


# ---------------------------------------- 1: stdout carries results only


def test_01_decode_writes_one_stdout_line_per_input_line(run_copy):
    result = run_recipe("decode", "--output_dir", str(run_copy), "--beam_size", "1",
                        stdin="Hello.\n\nThank you.\n")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.split("\n")
    assert len(lines) == 4 and lines[3] == "", result.stdout  # 3 lines, newline-ended
    assert lines[1] == ""  # an empty input line gives an empty output line
    assert "[model] weights" in result.stderr  # status on stderr, naming the weights


# ----------------------------------------------- 2: stale averaged weights


def test_02_an_average_older_than_the_newest_checkpoint_is_not_used(data, run_copy):
    from recipes import translate

    translate.main(["average", *flags(data, run_copy, "--last", "2")])
    fresh = run_recipe("decode", "--output_dir", str(run_copy), stdin="Hello.\n")
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert "weights " + str(run_copy / "averaged.weights.h5") in fresh.stderr
    translate.main(["train", *flags(data, run_copy, "--train_steps", "6",
                                    "--steps_per_checkpoint", "2", "--no_eval")])
    stale = run_recipe("decode", "--output_dir", str(run_copy), stdin="Hello.\n")
    assert stale.returncode == 0, stale.stderr[-3000:]
    assert "averaged.weights.h5 averages ckpt-0001.weights.h5, ckpt-0002.weights.h5, older " \
        "than the newest checkpoint ckpt-0003.weights.h5: not used" in stale.stderr
    assert "weights " + str(run_copy / "checkpoints" / "ckpt-0003.weights.h5") in stale.stderr


# ------------------------------------- 3: the command must match the run


@pytest.mark.parametrize("change, named", [
    (["--hparams_set", "transformer_small"],
     "--hparams_set transformer_small (the run has transformer_tiny_area)"),
    (["--vocab_type", "subword"], "--vocab_type subword (the run has char)"),
    (["--model", "lstm"], "--model lstm (the run has transformer)"),
    (["--hparams", "hidden_size=64"], "hidden_size=64 (the run has 32)"),
])
def test_03_a_flag_that_differs_from_the_run_is_refused(data, run_copy, change, named):
    argv = flags(data, run_copy, "--train_steps", "8")
    if change[0] == "--hparams":
        argv[argv.index("--hparams") + 1] = change[1]
    else:
        argv += change
    before = snapshot(run_copy)
    assert_error(run_recipe("train", *argv), 2, named, str(run_copy))
    assert snapshot(run_copy) == before


# --------------------------------------------- 4: resuming counts steps


def test_04_resuming_ends_at_train_steps_whatever_the_interval(data, run_copy):
    result = run_recipe("train", *flags(data, run_copy, "--train_steps", "7",
                                        "--steps_per_checkpoint", "5", "--no_eval"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resuming at step 4 " in result.stderr
    summary = json.loads((run_copy / "train_summary.json").read_text())
    assert summary["steps"] == 7
    # 19: the summary of a resumed run holds every epoch: 2 + 1 (cut short at step 7).
    assert len(summary["history"]["loss"]) == 3
    # A finished run asked for no more steps trains nothing and says so.
    again = run_recipe("train", *flags(data, run_copy, "--train_steps", "7", "--no_eval"))
    assert again.returncode == 0
    assert "already trained 7 steps" in again.stderr


def test_37_a_resumed_runs_bar_starts_at_the_resumed_step(data, run_copy):
    """Issue 37, item 8: Keras' bars said "Epoch 3/4" (a checkpoint
    interval); ours count the run's optimizer steps, on stderr."""
    result = run_recipe("train", *flags(data, run_copy, "--train_steps", "6",
                                        "--steps_per_checkpoint", "2", "--no_eval",
                                        "--verbose", "1"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "/6" not in result.stdout
    # Each rewrite of a bar is a line here (text mode reads "\r" as a newline).
    bars = [line for line in re.sub(r"\x1b\[[0-9;]*m|\x08", "", result.stderr).splitlines()
            if "/6 " in line]
    assert bars[0].startswith("4/6 ") and bars[-1].startswith("6/6 ")
    assert " - loss: " in bars[-1] and "Epoch" not in result.stderr


# --------------------------------- 8: a run is committed once it builds


def test_08_a_failed_first_train_leaves_no_run_behind(data, tmp_path):
    out = tmp_path / "run"
    argv = flags(data, out, "--train_steps", "2", "--no_eval")
    argv[argv.index("--hparams") + 1] = "hidden_size=32,num_heads=3"
    assert_error(run_recipe("train", *argv), 1)
    assert not (out / "run.json").exists() and not (out / "hparams.json").exists()
    assert not list(out.glob("vocab*"))  # (an absent folder globs to nothing)
    # The corrected command is not refused.
    argv[argv.index("--hparams") + 1] = "hidden_size=32,num_heads=2,max_length=24"
    result = run_recipe("record", *argv)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "run.json").exists()


# ---------------------------------------- 9: list-valued hparams override


def test_09_a_list_valued_hparam_keeps_its_commas(data, tmp_path):
    out = tmp_path / "run"
    argv = flags(data, out, "--train_steps", "1")
    argv[argv.index("--hparams") + 1] += ",area_attention_kinds=encoder_self,encdec"
    result = run_recipe("record", *argv)
    assert result.returncode == 0, result.stderr[-3000:]
    saved = json.loads((out / "hparams.json").read_text())
    assert saved["area_attention_kinds"] == "encoder_self,encdec"


# ------------------------------------- 10: output paths checked up front


def test_10_a_bad_output_file_is_refused_before_any_work(run_copy):
    before = snapshot(run_copy)
    result = run_recipe("decode", "--output_dir", str(run_copy),
                        "--output_file", "missing_folder/out.de", stdin="Hello.\n")
    assert_error(result, 2, "missing_folder/out.de")
    assert "[model]" not in result.stderr  # refused before the model loads
    assert snapshot(run_copy) == before


# ----------------------------------- 11: unreadable checkpoints skipped


def test_11_decode_and_average_skip_a_truncated_checkpoint(data, run_copy):
    newest = run_copy / "checkpoints" / "ckpt-0002.weights.h5"
    newest.write_bytes(newest.read_bytes()[:1000])
    decoded = run_recipe("decode", "--output_dir", str(run_copy), stdin="Hello.\n")
    assert decoded.returncode == 0, decoded.stderr[-3000:]
    assert f"warning: skipping unreadable checkpoint {newest}" in decoded.stderr
    assert "ckpt-0001.weights.h5" in last_line(decoded.stderr)
    averaged = run_recipe("average", "--output_dir", str(run_copy))
    assert averaged.returncode == 0, averaged.stderr[-3000:]
    assert f"warning: skipping unreadable checkpoint {newest}" in averaged.stderr
    assert json.loads((run_copy / "averaged.json").read_text()) == {
        "checkpoints": ["ckpt-0001.weights.h5"]}


# --------------------------------------- 12: data errors name the file


def test_12_a_truncated_gz_corpus_is_named(data, tmp_path):
    lines = [s for s, _ in [line.split("\t") for line in
                            open(data["train"], encoding="utf-8").read().splitlines()]]
    source = tmp_path / "train.en.gz"
    with gzip.open(source, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    source.write_bytes(source.read_bytes()[:-20])
    target = tmp_path / "train.de"
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    result = run_recipe("train", "--output_dir", str(out), "--train_source", str(source),
                        "--train_target", str(target))
    assert_error(result, 1, str(source))
    assert not out.exists() or not (out / "run.json").exists()


def test_12_an_empty_corpus_is_named(tmp_path):
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    result = run_recipe("train", "--output_dir", str(tmp_path / "run"),
                        "--train_tsv", str(empty))
    assert_error(result, 1, str(empty))


# -------------------------------- 13: truncated inputs counted, limit raised


def test_13_long_inputs_are_counted_and_the_limit_can_be_raised(run_copy):
    long_line = " ".join(["Tom is here."] * 50)  # about 600 characters: > 23 ids
    cut = run_recipe("decode", "--output_dir", str(run_copy), "--beam_size", "1",
                     stdin=f"Hello.\n{long_line}\n")
    assert cut.returncode == 0, cut.stderr[-3000:]
    assert "warning: 1 of 2 sources were longer than 23 tokens and were cut " \
        "(--max_input_length raises the limit)" in cut.stderr
    assert len(cut.stdout.splitlines()) == 2
    whole = run_recipe("decode", "--output_dir", str(run_copy), "--beam_size", "1",
                       "--max_input_length", "700", stdin=f"Hello.\n{long_line}\n")
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert "were cut" not in whole.stderr


# ------------------------------------------ 14: a loadable SavedModel


def test_14_the_export_loads_the_documented_way_in_a_fresh_process(data, tmp_path):
    pytest.importorskip("tensorflow_text")
    import keras

    if keras.backend.backend() != "tensorflow":
        pytest.skip("export needs the TensorFlow backend")
    out = tmp_path / "run"
    argv = flags(data, out, "--beam_size", "1")
    argv[argv.index("--vocab_type") + 1] = "subword"
    from recipes import translate

    translate.main(["train", *argv, "--train_steps", "2", "--steps_per_checkpoint", "2",
                    "--vocab_size", "300", "--no_eval"])
    exported = run_recipe("export", *argv)
    assert exported.returncode == 0, exported.stderr[-3000:]
    # The example of docs/translation.md, as written, on this export.
    (block,) = [b for b in python_blocks(os.path.join(ROOT, "docs", "translation.md"))
                if "saved_model.load" in b]
    code = block.replace('"runs/translate_tatoeba/export"', "sys.argv[1]")
    assert "sys.argv[1]" in code
    loaded = subprocess.run([sys.executable, "-c", "import sys\n" + code, str(out / "export")],
                            cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert loaded.stdout.startswith("tf.Tensor([b'"), loaded.stdout
    assert "shape=(1,), dtype=string" in loaded.stdout


# ------------------------------------------------------------ 19: style


def test_19_shapes_world_uses_the_recipes_flag_style(tmp_path):
    usage = run_recipe("--help", module="recipes.shapes_world")
    assert usage.returncode == 0
    assert usage.stdout.startswith("usage: python -m recipes.shapes_world")
    assert "--min_objects" in usage.stdout and "--min-objects" not in usage.stdout
    assert_error(run_recipe("--min_objects", "0", module="recipes.shapes_world"), 2,
                 "--min_objects")


def test_checkpoint_reader_rejects_a_truncated_file(run_copy):
    from keras_structattn.training import checkpoints

    path = run_copy / "checkpoints" / "ckpt-0002.weights.h5"
    assert checkpoints.is_readable(path)
    path.write_bytes(path.read_bytes()[:2000])
    assert not checkpoints.is_readable(path)
    with pytest.raises(OSError):
        h5py.File(path, "r")
    with pytest.warns(UserWarning, match="skipping unreadable checkpoint .*ckpt-0002"):
        readable = checkpoints.checkpoint_paths(run_copy / "checkpoints", readable_only=True)
    assert readable == [str(run_copy / "checkpoints" / "ckpt-0001.weights.h5")]
