"""`train --distribute data_parallel` of the VQA, grounding and TextVQA
recipes (issue 23; docs/distributed.md).

Device counts are fixed when a backend starts, so the 2-device runs happen
in two subprocesses started together: JAX (2 forced host devices) trains
the tiny MUAN VQA run for 2 epochs on one device, and on 2 devices for 1
epoch, then resumes it to 2 in a second command (test_vqa.py's resume);
TensorFlow (the CPU split into 2 logical devices) refuses `--jit on` and a
batch that does not split, then trains the run for 2 epochs on 2 devices
and on one; and two JAX processes of one device each, joined through
`--coordinator_address`, train it for 2 epochs into one run folder.
Dropout is off (`--hparams`), so one device and two must give the same
per-step losses and weights. Meanwhile TextVQA trains in this
process under MirroredStrategy on its one CPU device, and grounding
refuses `--jit on` there.
"""

import csv
import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from keras_structattn.training import feeding
from keras_structattn.training.distribution import Replicas
from recipes import _cli
from recipes import grounding
from recipes import textvqa
from recipes import vqa
from tests.recipes import test_grounding
from tests.recipes import test_textvqa
from tests.recipes import test_vqa
from tests.recipes.conftest import ROOT
from tests.recipes.replica_tolerance import assert_close_histories
from tests.recipes.replica_tolerance import assert_close_variables
from tests.recipes.test_caption import weights_of

NO_DROPOUT = "dropout=0,attention_dropout=0"
TWO = ("--distribute", "data_parallel", "--devices", "2")

# Runs the `vqa.main` commands given as JSON in argv[1] in this process, one
# after the other; a command expected to fail as a user sees it runs
# through `entry_point` (one `error:` line, exit status 2).
DRIVER = textwrap.dedent(
    """
    import json, sys
    from recipes import _cli, vqa

    for argv, status in json.loads(sys.argv[1]):
        if status is None:
            vqa.main(argv)
            continue
        try:
            _cli.entry_point(vqa.main, argv)
        except SystemExit as exit:
            print(f"EXIT {exit.code}", flush=True)
    """
)


def vqa_flags(out, *extra):
    # Shapes world: 102 training questions (12 batches of 8), 19 validation
    # questions (18 on 2 devices). float32: the runs compare replicas to
    # float32 rounding (`replica_tolerance`); `auto` would take bfloat16 on
    # AMX CPUs.
    return ["train", "--output_dir", str(out), "--model", "muan", "--precision", "float32",
            "--hparams", f"{test_vqa.TINY['muan']},{NO_DROPOUT}", "--min_answer_count", "1",
            "--world_train", "24", "--world_val", "4", "--world_test", "6",
            "--predict_batch_size", "16", "--verbose", "0", *extra]


def _start(backend, commands, root, name=None, devices=2):
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    if backend == "jax":
        # Also for the one-device run: without a distribution, JAX trains
        # on its first device. The resumed command compiles the step the
        # first one did: the cache spares it.
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
        env["JAX_COMPILATION_CACHE_DIR"] = str(root / "jax_cache")
    # Files, not pipes: nobody reads the output while the tests in this
    # process run.
    name = name or backend
    with open(root / f"{name}.out", "w") as out, open(root / f"{name}.err", "w") as err:
        return subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(commands)],
                                cwd=ROOT, env=env, stdout=out, stderr=err)


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """The JAX and TensorFlow subprocesses, started together (the test in
    this process runs meanwhile)."""
    root = tmp_path_factory.mktemp("distributed_vl")
    processes = {
        "jax": _start("jax", [
            [vqa_flags(root / "jax_one", "--epochs", "2", "--no_eval"), None],
            [vqa_flags(root / "jax_two", "--epochs", "1", "--no_eval", *TWO), None],
            [vqa_flags(root / "jax_two", "--epochs", "2", "--no_eval", *TWO), None],
        ], root),
        "tensorflow": _start("tensorflow", [
            [vqa_flags(root / "refused", *TWO, "--jit", "on"), 2],
            [vqa_flags(root / "refused", *TWO, "--batch_size", "7"), 2],
            [vqa_flags(root / "tf_two", "--epochs", "2", *TWO), None],
            [vqa_flags(root / "tf_one", "--epochs", "2", "--no_eval", "--jit", "off"), None],
        ], root),
    }
    # The several-hosts form on one machine: two processes of one device
    # each, one command per process, the run folder shared.
    address = f"localhost:{_free_port()}"
    for process in range(2):
        several = ["--distribute", "data_parallel", "--coordinator_address", address,
                   "--num_processes", "2", "--process_id", str(process)]
        processes[f"process{process}"] = _start(
            "jax", [[vqa_flags(root / "processes", "--epochs", "2", "--no_eval", *several),
                     None]], root, name=f"process{process}", devices=1)
    yield root, processes
    for process in processes.values():  # after a failure: not left running
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def runs(started):
    """The subprocesses' stdout and stderr, once they have ended."""
    root, processes = started
    done = dict(root=root)
    for name, process in processes.items():
        process.wait(timeout=600)
        err = (root / f"{name}.err").read_text()
        assert process.returncode == 0, err[-3000:]
        done[f"{name}_out"] = (root / f"{name}.out").read_text()
        done[f"{name}_err"] = err
    return done


def _history(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {name: np.array([float(row[name]) for row in rows]) for name in rows[0]}


def assert_close_weights(a, b):
    """Every weight and optimizer variable of two checkpoints, to float32
    rounding amplified by training (`tests.recipes.replica_tolerance`)."""
    assert_close_variables(weights_of(a), weights_of(b), min_count=20)


def assert_same_training(one, two):
    """2 epochs of one device and of two: the same training losses and
    accuracies per epoch (validation: 19 questions vs 18) and weights."""
    first, second = _history(one / "history.csv"), _history(two / "history.csv")
    assert len(first["loss"]) == len(second["loss"]) == 2
    assert_close_histories(first, second, ("loss", "soft_accuracy"))
    assert np.all(np.isfinite(second["val_loss"]))
    assert_close_weights(one / "checkpoints" / "ckpt-0002.weights.h5",
                         two / "checkpoints" / "ckpt-0002.weights.h5")


def test_textvqa_trains_under_a_strategy_and_grounding_refuses_jit(started, tmp_path,
                                                                    capsys):
    """In this process (while the subprocesses run), on its one CPU device:
    TextVQA's batches (targets drawn per epoch, loss masks as sample
    weights) through MirroredStrategy (--jit auto: off); grounding reaches
    the strategy and refuses --jit on; `--distribute` is for `train`."""
    out = tmp_path / "textvqa"
    textvqa.main(["train", *test_textvqa.flags(
        out, "m4c", "--epochs", "1", "--no_eval", "--distribute", "data_parallel")])
    assert np.isfinite(_history(out / "history.csv")["loss"][0])
    assert (out / "checkpoints" / "ckpt-0001.weights.h5").exists()
    with pytest.raises(_cli.UsageError, match="--jit on cannot run with --distribute"):
        grounding.main(["train", *test_grounding.flags(
            tmp_path / "grounding", "--distribute", "data_parallel", "--jit", "on")])
    assert not (tmp_path / "grounding").exists()
    with pytest.raises(_cli.UsageError, match="--distribute is for train; evaluate runs"):
        vqa.main(["evaluate", "--output_dir", str(out), "--distribute", "data_parallel"])


def test_processes_feed_their_blocks_and_validation_splits_evenly(capsys):
    """Each of 2 processes makes its contiguous half of every global batch
    (together: the one-process batches); validation is rounded down to a
    multiple of the replicas, the rest counted; under MirroredStrategy the
    bool masks are fed as float32 (Keras averages a batch over replicas)."""
    def batches(replicas):
        stream = feeding.epoch_batches(10, 4, 1, lambda rows, epoch: (rows, epoch), start=1,
                                   with_epoch=True, replicas=replicas)
        return [next(stream) for _ in range(3)]

    one = batches(None)
    halves = [batches(Replicas(4, 2, k)) for k in (0, 1)]
    for step, (rows, epoch) in enumerate(one):
        assert [e for _, e in (halves[0][step], halves[1][step])] == [epoch, epoch]
        np.testing.assert_array_equal(
            np.concatenate([halves[0][step][0], halves[1][step][0]]), rows)
    assert [e for _, e in one] == [0, 1, 1]  # 2 batches an epoch, from step 1

    ordered = feeding.validation_batches(11, 4, lambda rows: rows, Replicas(2))
    assert [list(ordered[i]) for i in range(len(ordered))] == [
        [0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert "validation: 1 of 11 items left out" in capsys.readouterr().out
    assert feeding.validation_batches(1, 4, lambda rows: rows, Replicas(2)) is None

    mask = np.array([True, False])
    inputs, target = feeding.feed(Replicas(2, strategy=object()),
                              lambda rows: ({"mask": mask[rows]}, rows), np.arange(2))
    assert inputs["mask"].dtype == np.float32 and list(inputs["mask"]) == [1.0, 0.0]
    assert target.dtype == np.arange(2).dtype
    assert feeding.feed(Replicas(2), lambda rows: mask[rows], np.arange(2)).dtype == bool


def test_jax_two_devices_resumed_end_at_the_one_device_weights(runs):
    """Epoch 1 on 2 devices, then a second command resuming to epoch 2,
    gives the straight one-device run's losses and weights."""
    err = runs["jax_err"]
    assert "[distribute] data parallel over 2 devices in 1 process(es)" in err
    assert "resuming at epoch 2 (step 12)" in err
    assert err.count("[train] validation: 1 of 19 items left out") == 2  # both commands
    assert_same_training(runs["root"] / "jax_one", runs["root"] / "jax_two")


def test_two_jax_processes_end_at_the_one_device_weights(runs):
    """`--coordinator_address/--num_processes/--process_id`, one command per
    process: each feeds its half of every global batch; process 0 alone
    writes the run folder; the weights are the one-device run's."""
    for process in range(2):
        assert ("[distribute] data parallel over 2 devices in 2 process(es)"
                in runs[f"process{process}_err"])
    assert_same_training(runs["root"] / "jax_one", runs["root"] / "processes")
    assert not list((runs["root"]).glob("shapes_world.partial*"))
    assert not list((runs["root"] / "processes").glob("*.partial*"))


def test_tensorflow_two_devices_match_one_and_refuse_what_cannot_run(runs):
    out, err = runs["tensorflow_out"], runs["tensorflow_err"]
    assert [line for line in out.splitlines() if line.startswith("EXIT")] == ["EXIT 2"] * 2
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 2 and "Traceback" not in err
    assert errors[0].startswith("error: --jit on cannot run with --distribute data_parallel "
                                "on TensorFlow")
    assert errors[1] == ("error: the --batch_size 7 must split evenly over 2 replicas: "
                         "use a multiple of 2")
    assert not (runs["root"] / "refused" / "run.json").exists()
    assert_same_training(runs["root"] / "tf_one", runs["root"] / "tf_two")
    # Evaluated after training: the checkpoint on one device.
    assert "[model] the newest checkpoint, on one device" in err
    scores = json.loads((runs["root"] / "tf_two" / "test_scores.json").read_text())
    assert 0 <= scores["overall"] <= 100
