"""A data-parallel run killed mid-training resumes to the weights of an
uninterrupted data-parallel run (issue 23; docs/distributed.md): the
translation recipe on 2 JAX devices of this CPU, SIGKILLed as soon as its
first checkpoint is on disk, then run again with the same command."""

import os
import subprocess
import sys

import numpy as np

from tests.recipes.conftest import ROOT
from tests.recipes.conftest import flags
from tests.recipes.conftest import kill_at_checkpoint
from tests.recipes.test_caption import weights_of
from tests.recipes.test_distributed_ct import TRANSLATE_HPARAMS

STEPS = ["--train_steps", "4", "--steps_per_checkpoint", "1", "--no_eval", "--precision", "float32",
         "--distribute", "data_parallel", "--devices", "2"]
ENV = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")


def _command(data, out):
    argv = flags(data, out, *STEPS)
    argv[argv.index("--hparams") + 1] = TRANSLATE_HPARAMS
    return [sys.executable, "-m", "recipes.translate", "train", *argv]


def test_a_killed_data_parallel_run_resumes_to_the_straight_runs_weights(data, tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    # The uninterrupted run trains while the other one is started and killed.
    uninterrupted = subprocess.Popen(_command(data, straight), cwd=ROOT, env=ENV,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
    kill_at_checkpoint(_command(data, killed), killed / "checkpoints" / "ckpt-0001.weights.h5",
                       ENV)
    assert not (killed / "train_summary.json").exists()  # it did not finish
    resumed = subprocess.run(_command(data, killed), cwd=ROOT, env=ENV, capture_output=True,
                             text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming at step" in resumed.stderr
    assert "data parallel over 2 devices" in resumed.stderr
    _, err = uninterrupted.communicate(timeout=600)
    assert uninterrupted.returncode == 0, err[-2000:]
    last = "checkpoints/ckpt-0004.weights.h5"
    a, b = weights_of(straight / last), weights_of(killed / last)
    assert sorted(a) == sorted(b) and len(a) > 10
    for name in a:
        np.testing.assert_allclose(b[name], a[name], rtol=1e-6, atol=1e-7, err_msg=name)
