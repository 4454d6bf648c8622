"""`train --distribute data_parallel` of the translation and captioning
recipes on 2 devices of this CPU, and of translation in 2 JAX processes
(issue 23; docs/distributed.md).

Device counts are fixed when a backend starts, so the runs happen in
subprocesses started together: JAX (2 forced host devices) trains the
tiny translation run on one device and on 2, JAX trains the tiny
captioner on 2 through both phases, TensorFlow (the CPU split into 2
logical devices) refuses `--jit on`, then trains the captioner's
cross-entropy phase under MirroredStrategy, another TensorFlow process
checks the padded loss under MirroredStrategy, and two JAX processes of
one device each train the translation run together. Dropout is off, so
one device and two must give the same per-step losses (the translation
batches have 11 rows, padded to 12).
"""

import csv
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.recipes import test_caption
from tests.recipes.conftest import ROOT
from tests.recipes.conftest import TINY
from tests.recipes.conftest import flags as translate_flags
from tests.recipes.replica_tolerance import assert_close_histories
from tests.recipes.replica_tolerance import assert_close_variables

NO_DROPOUT = "attention_dropout=0,layer_prepostprocess_dropout=0,relu_dropout=0"
# The runs train plain attention: building an area-attention model eagerly
# costs JAX ~10 s a run, and what is tested here does not depend on it
# (all-padding rows through area attention: the in-process test below).
PLAIN = ("num_area_layers=1", "num_area_layers=0")
# 264 tokens: 11 rows of the longest bucket (24), an odd count for 2 devices.
TRANSLATE_HPARAMS = (TINY.replace("batch_size=256", "batch_size=264").replace(*PLAIN)
                     + f",{NO_DROPOUT}")
CAPTION_HPARAMS = f"{test_caption.TINY.replace(*PLAIN)},{NO_DROPOUT}"
TWO = ("--distribute", "data_parallel", "--devices", "2")

# Runs the commands given as JSON in argv[1] in this process, one after the
# other; a command expected to fail as a user sees it runs through
# `entry_point` (one `error:` line, exit status 2). "code" runs Python.
DRIVER = textwrap.dedent(
    """
    import json, sys
    from recipes import _cli, caption, translate

    for recipe, argv, status in json.loads(sys.argv[1]):
        if recipe == "code":
            exec(argv)
            continue
        main = {"caption": caption.main, "translate": translate.main}[recipe]
        if status is None:
            main(argv)
            continue
        try:
            _cli.entry_point(main, argv)
        except SystemExit as exit:
            print(f"EXIT {exit.code}", flush=True)
    """
)

# `PaddedCrossEntropy` (and `PaddedAccuracy`) under TensorFlow's
# MirroredStrategy, 2 replicas whose halves of the batch hold 8 and 20
# real tokens: `fit` (each replica its half) and `train_on_batch` with
# sample weights (each replica the whole batch, as in self-critical
# training) against one device. Prints the losses, accuracies and weights.
LOSS_CHECK = textwrap.dedent(
    """
    import contextlib
    import keras
    import numpy as np
    from keras_structattn.training import distribution
    from keras_structattn.training.losses import PaddedAccuracy, PaddedCrossEntropy

    mirrored = distribution.replicas("data_parallel", devices=2)
    rng = np.random.default_rng(0)
    x = rng.integers(1, 20, (8, 5)).astype("int32")
    y = rng.integers(1, 20, (8, 5)).astype("int32")
    y[:4, 2:] = 0
    weight = rng.normal(size=(8, 5)).astype("float32")
    found = {}
    for name in ("one", "two"):
        for how in ("fit", "train_on_batch"):
            keras.utils.set_random_seed(0)
            with mirrored.scope() if name == "two" else contextlib.nullcontext():
                model = keras.Sequential([keras.Input((5,), dtype="int32"),
                                          keras.layers.Embedding(20, 8), keras.layers.Dense(20)])
                model.compile(optimizer=keras.optimizers.SGD(0.5), jit_compile=False,
                              loss=PaddedCrossEntropy(0.1), metrics=[PaddedAccuracy()])
                if how == "fit":
                    logs = model.fit(x, y, batch_size=8, epochs=2, shuffle=False,
                                     verbose=0).history
                    logs = [logs["loss"], logs["accuracy"]]
                else:
                    logs = [model.train_on_batch(x, y, sample_weight=weight, return_dict=True)
                            for _ in range(2)]
                    logs = [[s["loss"] for s in logs], [s["accuracy"] for s in logs]]
            weights = np.concatenate([keras.ops.convert_to_numpy(w).ravel()
                                      for w in model.weights])
            found[f"{name} {how}"] = [logs[0], logs[1], weights.tolist()]
    print("LOSS_CHECK " + json.dumps(found), flush=True)
    """
)


def _start(backend, commands, devices=2):
    import json

    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    if backend == "jax":
        # Also for the one-device run: without a distribution, JAX trains
        # on its first device.
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(commands)], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _finish(process):
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-3000:]
    return out, err


def _history(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    # Keras writes NA for the validation columns of epochs without validation.
    return {name: np.array([float("nan") if row[name] == "NA" else float(row[name])
                            for row in rows]) for name in rows[0]}


def _caption_flags(out, *extra):
    # 4 images a batch and 4 self-critical images: both split over 2 devices.
    return test_caption.flags(out, "--hparams", CAPTION_HPARAMS, "--scst_images", "4",
                              "--no_eval", *extra)


@pytest.fixture(scope="module")
def runs(data, tmp_path_factory):
    root = tmp_path_factory.mktemp("distributed")

    # float32: the runs compare replicas to float32 rounding
    # (`replica_tolerance`); `auto` would take bfloat16 on AMX CPUs.
    def translate(name, *extra):
        return ["translate", ["train", *translate_flags(
            data, root / name, "--hparams", TRANSLATE_HPARAMS, "--train_steps", "2",
            "--steps_per_checkpoint", "1", "--no_eval", "--precision", "float32", *extra)],
            None]

    def caption(name, *extra, status=None):
        return ["caption", ["train", *_caption_flags(
            root / name, "--train_steps", "2", "--steps_per_checkpoint", "1",
            "--precision", "float32", *extra)], status]

    processes = [
        _start("jax", [translate("translate_one"), translate("translate_two", *TWO)]),
        _start("jax", [caption("caption_jax", *TWO, "--scst_steps", "2")]),
        # Two MirroredStrategy objects that both reduce in one process
        # confuse TensorFlow's collectives: the check runs on its own.
        _start("tensorflow", [caption("refused", *TWO, "--jit", "on", status=2),
                              caption("caption_tf", *TWO, "--scst_steps", "0")]),
        _start("tensorflow", [["code", LOSS_CHECK, None]]),
    ]
    # The several-hosts form on one machine: two processes of one device
    # each, one command per process, one run folder.
    address = f"localhost:{_free_port()}"
    for process in range(2):
        several = ("--distribute", "data_parallel", "--coordinator_address", address,
                   "--num_processes", "2", "--process_id", str(process))
        processes.append(_start("jax", [translate("translate_processes", *several)], devices=1))
    try:
        finished = [_finish(p) for p in processes]
    finally:  # after a failure: nothing left running
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
    (_, jax_err), _, (tf_out, tf_err), (loss_out, _) = finished[:4]
    return dict(root=root, jax_err=jax_err, tf_out=tf_out, tf_err=tf_err, loss_out=loss_out,
                process_errs=[err for _, err in finished[4:]])


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_translation_on_two_jax_devices_matches_one(runs):
    one = _history(runs["root"] / "translate_one" / "history.csv")
    two = _history(runs["root"] / "translate_two" / "history.csv")
    assert len(one["loss"]) == len(two["loss"]) == 2
    # Every step's loss and accuracy: the padding row of each 11-row batch
    # changes nothing.
    assert_close_histories(one, two, ("loss", "accuracy", "val_accuracy"))
    # val_loss is Keras' mean of the dev batches' losses weighted by their
    # rows, the padding row of the odd batch included (see the module
    # docstring of recipes.translate.commands): close, not equal.
    np.testing.assert_allclose(two["val_loss"], one["val_loss"], rtol=1e-2)
    assert "data parallel over 2 devices" in runs["jax_err"]


def test_translation_in_two_jax_processes_matches_one_device(runs):
    """`--coordinator_address/--num_processes/--process_id`, one command per
    process: every step's loss and accuracy and the final weights are the
    one-device run's; only process 0 writes the run folder."""
    for err in runs["process_errs"]:
        assert "data parallel over 2 devices in 2 process(es)" in err
    one = runs["root"] / "translate_one"
    several = runs["root"] / "translate_processes"
    first, second = _history(one / "history.csv"), _history(several / "history.csv")
    assert len(first["loss"]) == len(second["loss"]) == 2
    assert_close_histories(first, second, ("loss", "accuracy"))
    last = ("checkpoints", "ckpt-0002.weights.h5")
    assert_close_variables(test_caption.weights_of(one.joinpath(*last)),
                           test_caption.weights_of(several.joinpath(*last)), min_count=10)
    assert not list(several.glob("*.partial*"))


def test_captioning_trains_both_phases_on_two_jax_devices(runs):
    run = runs["root"] / "caption_jax"
    assert sorted(os.listdir(run / "scst_checkpoints")) == [
        "ckpt-0001.weights.h5", "ckpt-0002.weights.h5"]
    for name in ("history.csv", "scst_history.csv"):
        history = _history(run / name)
        assert len(history["loss"]) == 2 and np.isfinite(history["loss"]).all()


def test_captioning_cross_entropy_under_mirrored_strategy(runs):
    run = runs["root"] / "caption_tf"
    history = _history(run / "history.csv")
    assert len(history["loss"]) == 2 and np.isfinite(history["loss"]).all()
    assert "/device:CPU:1" in runs["tf_err"]


def test_padded_cross_entropy_under_mirrored_strategy_is_that_of_one_device(runs):
    """The replicas' token counts differ (8 and 20): each replica's sum is
    divided by the tokens of both, so the gradients Keras sums over the
    replicas, and the losses it reports, are one device's."""
    import json

    line = [x for x in runs["loss_out"].splitlines() if x.startswith("LOSS_CHECK ")][-1]
    found = json.loads(line[len("LOSS_CHECK "):])
    for how in ("fit", "train_on_batch"):
        one, two = found[f"one {how}"], found[f"two {how}"]
        for a, b in zip(one, two):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=how)


def test_jit_on_with_mirrored_strategy_is_a_usage_error(runs):
    assert "EXIT 2" in runs["tf_out"]
    errors = [line for line in runs["tf_err"].splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "--jit on cannot run with --distribute data_parallel" in errors[0]
    assert not (runs["root"] / "refused" / "run.json").exists()


# ------------------------------------------------ padding rows, in-process


def test_padding_rows_change_neither_loss_nor_accuracy():
    """The rows `replica_rows` adds to an odd batch are all padding: the
    logits stay finite and the loss and accuracy are those of the batch."""
    import keras

    from keras_structattn.tasks.translation.replicas import replica_rows
    from keras_structattn.training.distribution import Replicas
    from keras_structattn.training.losses import PaddedAccuracy
    from keras_structattn.training.losses import PaddedCrossEntropy
    from models import registry
    from models.translation.transformer import Transformer

    hparams = registry.get("transformer_tiny_area").parse(f"{TINY},{NO_DROPOUT}")
    model = Transformer.from_hparams(hparams, 30, seed=1)
    rng = np.random.default_rng(0)
    targets = rng.integers(1, 30, (3, 7)).astype("int32")
    targets[2, 4:] = 0
    source = rng.integers(1, 30, (3, 6)).astype("int32")
    source[1, 3:] = 0
    decoder_inputs = np.pad(targets[:, :-1], ((0, 0), (1, 0)))
    batch = ((source, decoder_inputs), targets)
    padded = replica_rows(batch, Replicas(num_replicas=2))
    assert padded[1].shape == (4, 7) and not padded[1][3].any() and not padded[0][0][3].any()
    results = []
    for inputs, y in (batch, padded):
        logits = keras.ops.convert_to_numpy(model(inputs, training=False))
        assert np.isfinite(logits).all()
        accuracy = PaddedAccuracy()
        accuracy.update_state(y, logits)
        results.append((float(PaddedCrossEntropy(0.1)(y, logits)), float(accuracy.result())))
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)


def test_each_process_feeds_its_block_of_the_padded_batch():
    """5 rows over 4 devices of 2 processes: padded to 8, process 1 feeds
    rows 4-7 (one real row, three of padding); NumPy and tf.data alike."""
    import tensorflow as tf

    from keras_structattn.tasks.translation.replicas import replica_batches
    from keras_structattn.tasks.translation.replicas import replica_rows
    from keras_structattn.training.distribution import Replicas

    rows = np.arange(1, 6, dtype="int32")[:, None] * np.ones((1, 3), "int32")
    batch = ((rows, rows + 10), rows + 20)
    for process in (0, 1):
        replicas = Replicas(num_replicas=4, num_processes=2, process_id=process)
        fed = replica_rows(batch, replicas)
        expected = np.array([1, 2, 3, 4]) if process == 0 else np.array([5, 0, 0, 0])
        np.testing.assert_array_equal(fed[0][0][:, 0], expected)
        np.testing.assert_array_equal(fed[1][:, 0], np.where(expected, expected + 20, 0))
        dataset = replica_batches(tf.data.Dataset.from_tensors(batch), replicas)
        (source, _), target = next(dataset.as_numpy_iterator())
        np.testing.assert_array_equal(source, fed[0][0])
        np.testing.assert_array_equal(target, fed[1])


@pytest.mark.parametrize("recipe, command", [("translate", "record"), ("caption", "evaluate")])
def test_distribute_is_for_train_only(recipe, command, tmp_path):
    import importlib

    from recipes import _cli

    main = importlib.import_module(f"recipes.{recipe}").main
    with pytest.raises(_cli.UsageError, match=f"--distribute is for train; {command} runs"):
        main([command, "--output_dir", str(tmp_path), "--distribute", "data_parallel"])
