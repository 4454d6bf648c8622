"""What a recipe writes on stderr: its own lines, not the native libraries'
start-up INFO lines (TensorFlow 2.21 logs them before absl's logging
starts, where TF_CPP_MIN_LOG_LEVEL cannot reach; recipes/_cli.py)."""

import os
import subprocess
import sys

from recipes import _cli
from tests.recipes.conftest import ROOT


def test_start_up_info_lines_are_dropped_and_the_rest_kept_in_order(capfd):
    with _cli._native_start_up_lines_dropped():
        os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called "
                    b"are written to STDERR\n")
        os.write(2, b"I0000 00:00:1795719969.504416   12120 port.cc:153] oneDNN ...\n")
        os.write(2, b"W0000 00:00:1795719969.504813   12120 x.cc:1] a real warning\n")
        os.write(2, b"a line of the recipe's\n")
        os.write(2, b"E0000 00:00:1795719969.504813   12120 y.cc:2] an error\n")
    err = capfd.readouterr().err
    assert err.splitlines() == [
        "W0000 00:00:1795719969.504813   12120 x.cc:1] a real warning",
        "a line of the recipe's",
        "E0000 00:00:1795719969.504813   12120 y.cc:2] an error",
    ]


def test_an_error_after_tensorflow_loads_is_the_only_line_but_the_status(tmp_path):
    """A check that runs after the heavy imports (the batch against 3
    replicas): stderr holds the recipe's status line and its error, nothing
    of TensorFlow's start-up."""
    env = dict(os.environ, KERAS_BACKEND="tensorflow", PYTHONPATH=ROOT)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    done = subprocess.run(
        [sys.executable, "-m", "recipes.vqa", "--output_dir", str(tmp_path / "run"),
         "--distribute", "data_parallel", "--devices", "3", "--batch_size", "8"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "[distribute] data parallel over 3 devices in 1 process(es): "
        "/device:CPU:0, /device:CPU:1, /device:CPU:2",
        "error: the --batch_size 8 must split evenly over 3 replicas: use a multiple of 3",
    ]
