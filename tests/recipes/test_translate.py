"""The translation recipe end to end on a tiny model: train (XLA), evaluate,
decode, average, export; a killed run resumes; bad input gives clear errors."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from keras_structattn.decoding.seq2seq import generate
from recipes import translate
from recipes.translate import commands
from tests.recipes.conftest import ROOT
from tests.recipes.conftest import flags


def _not_from_disk(args):
    raise AssertionError("evaluate after train must use the model in memory")


def test_train_evaluate_decode_average_export(data, tmp_path, monkeypatch):
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(commands, "load_trained", _not_from_disk)
        translate.main(["train", *flags(data, out, "--train_steps", "6",
                                        "--steps_per_checkpoint", "2", "--jit", "on")])
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["steps"] == 6
    losses = summary["history"]["loss"]
    assert len(losses) == 3 and losses[-1] < losses[0]
    assert len(commands.checkpoints(_args(data, out))) == 3
    assert list((out / "logs").rglob("events.out.tfevents.*"))
    scores = json.loads((out / "test_scores.json").read_text())
    assert 0.0 <= scores["bleu"] <= 100.0 and "nrefs" in scores["bleu_signature"]
    hypotheses = (out / "test.hyp.txt").read_text(encoding="utf-8").split("\n")
    assert len(hypotheses) == len(set(data["test_sources"])) + 1  # final newline
    # The model evaluated in memory is the last checkpoint: evaluating the
    # run from disk gives the same translations and scores.
    translate.main(["evaluate", *flags(data, out)])
    assert json.loads((out / "test_scores.json").read_text()) == scores
    assert (out / "test.hyp.txt").read_text(encoding="utf-8").split("\n") == hypotheses

    # decode: a file of sentences, in order, one output line each.
    source_file = data["root"] / "sources.txt"
    source_file.write_text("\n".join(data["test_sources"][:5]) + "\n", encoding="utf-8")
    output_file = tmp_path / "out.txt"
    translate.main(["decode", *flags(data, out, "--input_file", str(source_file),
                                     "--output_file", str(output_file))])
    decoded = output_file.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(decoded) == 5

    # average: the mean of the last two checkpoints' weights.
    translate.main(["average", *flags(data, out, "--last", "2")])
    assert (out / "averaged.weights.h5").exists()


def _args(data, out, *extra):
    return translate.build_parser().parse_args(flags(data, out, *extra))


def test_export_round_trip_matches_python_decoding(data, tmp_path):
    tf = pytest.importorskip("tensorflow")
    import keras

    if keras.backend.backend() != "tensorflow":
        pytest.skip("export needs the TensorFlow backend")
    out = tmp_path / "run"
    common = flags(data, out, "--beam_size", "1")
    common[common.index("--vocab_type") + 1] = "subword"
    translate.main(["train", *common, "--train_steps", "4", "--steps_per_checkpoint",
                    "4", "--vocab_size", "300", "--no_eval"])
    path = translate.main(["export", *common])
    loaded = tf.saved_model.load(path)
    sentences = data["test_sources"][:4]
    args = translate.build_parser().parse_args(["decode", *common])
    model, vocab, hparams = commands.load_trained(args)
    # The same ids as decoding the unpadded sources in Python.
    for sentence in sentences:
        source = np.array([vocab.encode(sentence)[: hparams.max_length - 1] + [1]], "int32")
        expected, _ = generate(model, source, max_decode_length=hparams.max_length,
                               beam_size=1)
        got = loaded.translate_ids(tf.constant([sentence])).numpy()
        np.testing.assert_array_equal(got, np.asarray(expected))
    # Strings: the in-graph detokenisation of those ids.
    exported = loaded(tf.constant(sentences)).numpy()
    ids = loaded.translate_ids(tf.constant(sentences))
    np.testing.assert_array_equal(exported, vocab.tf_decode(ids).numpy())


@pytest.mark.slow
def test_killed_training_resumes_to_the_same_step_count(data, tmp_path):
    """SIGKILL a training run after its second checkpoint, run the same
    command again: it resumes (not restarts) and stops at --train_steps,
    like an uninterrupted run."""
    command = [sys.executable, "-m", "recipes.translate", "train"]
    steps = ["--train_steps", "16", "--steps_per_checkpoint", "2", "--no_eval"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")

    killed = tmp_path / "killed"
    process = subprocess.Popen(
        command + flags(data, killed, *steps), cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    second = killed / "checkpoints" / "ckpt-0002.weights.h5"
    deadline = time.time() + 300
    while not second.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert second.exists(), "the run did not reach its second checkpoint"
    # Killed at whatever it is doing then: training, or writing the next
    # checkpoint (CI once caught the old in-place backup half-written).
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed / "train_summary.json").exists()  # it did not finish

    resumed = subprocess.run(
        command + flags(data, killed, *steps), cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert re.search(r"resuming at step ([4-9]|1[0-4]) ", resumed.stderr), resumed.stderr[-2000:]
    summary = json.loads((killed / "train_summary.json").read_text())

    straight = tmp_path / "straight"
    translate.main(["train", *flags(data, straight, *steps)])
    expected = json.loads((straight / "train_summary.json").read_text())
    assert summary["steps"] == expected["steps"] == 16
    # The summary of the resumed run holds every epoch, as the straight one's.
    assert len(summary["history"]["loss"]) == len(expected["history"]["loss"]) == 8


@pytest.mark.slow
def test_resumed_training_repeats_an_uninterrupted_run(data, tmp_path):
    """Training 4 steps and then (same command, --train_steps 8) 4 more gives
    the weights of 8 steps in one go: the optimizer state, the dropout seed
    streams and the position in the data all resume. --jit off makes TF's
    ops deterministic."""
    import h5py

    def train(out, steps):
        translate.main(["train", *flags(data, out, "--train_steps", str(steps),
                                        "--steps_per_checkpoint", "2", "--jit", "off",
                                        "--no_eval")])

    train(tmp_path / "straight", 8)
    train(tmp_path / "resumed", 4)
    train(tmp_path / "resumed", 8)
    names = []
    with h5py.File(tmp_path / "straight/checkpoints/ckpt-0004.weights.h5") as a, \
            h5py.File(tmp_path / "resumed/checkpoints/ckpt-0004.weights.h5") as b:
        a.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset)
                     else None)
        assert len(names) > 50
        for name in names:
            np.testing.assert_array_equal(a[name][()], b[name][()], err_msg=name)


def test_recorded_batches_train_the_same_weights(data, tmp_path):
    """`record` then `train --recorded` (the path for machines without
    TensorFlow) trains exactly what `train` trains on the tf.data pipeline."""
    import h5py

    def run(out, *extra):
        translate.main([*extra, *flags(data, out, "--train_steps", "6",
                                       "--steps_per_checkpoint", "3", "--jit", "off",
                                       "--no_eval")])

    run(tmp_path / "direct", "train")
    run(tmp_path / "replayed", "record")
    assert not (tmp_path / "replayed" / "checkpoints").exists()
    run(tmp_path / "replayed", "train", "--recorded")
    names = []
    with h5py.File(tmp_path / "direct/checkpoints/ckpt-0002.weights.h5") as a, \
            h5py.File(tmp_path / "replayed/checkpoints/ckpt-0002.weights.h5") as b:
        a.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset)
                     else None)
        for name in names:
            np.testing.assert_array_equal(a[name][()], b[name][()], err_msg=name)
    direct = json.loads((tmp_path / "direct/train_summary.json").read_text())
    replayed = json.loads((tmp_path / "replayed/train_summary.json").read_text())
    assert direct["history"]["val_loss"] == replayed["history"]["val_loss"]


def test_recorded_training_needs_enough_batches(data, tmp_path):
    common = flags(data, tmp_path, "--steps_per_checkpoint", "2", "--no_eval")
    with pytest.raises(ValueError, match="record"):
        translate.main(["train", "--recorded", *common, "--train_steps", "2"])
    translate.main(["record", *common, "--train_steps", "2"])
    with pytest.raises(ValueError, match="--train_steps=4.*holds 2 batches"):
        translate.main(["train", "--recorded", *common, "--train_steps", "4"])


# ------------------------------------------------------------------ errors


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="nowhere.tsv"):
        translate.main(["train", "--output_dir", str(tmp_path),
                        "--train_tsv", str(tmp_path / "nowhere.tsv")])


def test_misaligned_files_name_both(tmp_path):
    source = tmp_path / "a.en"
    target = tmp_path / "a.de"
    source.write_text("one\ntwo\nthree\n")
    target.write_text("eins\nzwei\n")
    with pytest.raises(ValueError, match="a.en.*a.de|a.de.*a.en"):
        translate.main(["train", "--output_dir", str(tmp_path / "run"),
                        "--train_source", str(source), "--train_target", str(target)])


def test_unknown_hparams_set_and_name(tmp_path, data):
    with pytest.raises(ValueError, match="Unknown hparams set 'transformer_huge'"):
        translate.main(["train", *flags(data, tmp_path / "a"),
                        "--hparams_set", "transformer_huge"])
    bad = flags(data, tmp_path / "b")
    bad[bad.index("--hparams") + 1] = "hiden_size=8"
    with pytest.raises(ValueError, match="Unknown hyper-parameter 'hiden_size'"):
        translate.main(["train", *bad])


def test_decode_without_a_trained_run_says_so(tmp_path):
    with pytest.raises(ValueError, match="no trained run"):
        translate.main(["decode", "--output_dir", str(tmp_path / "none")])


def test_lstm_model_trains_evaluates_and_decodes(data, tmp_path):
    """`--model lstm` reuses the whole recipe (data, checkpoints, decoding)."""
    out = tmp_path / "lstm"
    common = flags(data, out)
    common[common.index("--hparams") + 1] = (
        "hidden_size=32,num_heads=2,batch_size=256,max_length=24,"
        "learning_rate_warmup_steps=10"
    )
    translate.main(["train", "--model", "lstm", "--hparams_set",
                    "lstm_seq2seq_256_h4_area", *common, "--train_steps", "4",
                    "--steps_per_checkpoint", "2"])
    saved = json.loads((out / "hparams.json").read_text())
    assert saved["model_type"] == "lstm" and saved["max_area_width"] == 2
    scores = json.loads((out / "test_scores.json").read_text())
    assert 0.0 <= scores["bleu"] <= 100.0
    # The run's own flags (a Transformer's --hparams are refused: item 3).
    model, _, _ = commands.load_trained(translate.build_parser().parse_args(common))
    assert type(model).__name__ == "LSTMSeq2Seq"


def test_model_and_hparams_set_must_agree(data, tmp_path):
    with pytest.raises(ValueError, match="does not match"):
        translate.main(["train", "--model", "lstm", "--hparams_set",
                        "transformer_tiny", *flags(data, tmp_path / "x")])
