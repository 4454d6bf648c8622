"""Loading a `.keras` file in a fresh process, as docs/recipes.md says:
after `import keras_structattn`, and with Keras' message without it."""

import os
import subprocess
import sys

import keras
import numpy as np

from keras_structattn.layers import GraphMultiHeadAttention

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOAD = (
    "import sys\n"
    "{imports}"
    "import keras, numpy as np\n"
    "model = keras.saving.load_model(sys.argv[1])\n"
    "x = np.load(sys.argv[2])\n"
    "np.testing.assert_allclose(model.predict(x, verbose=0), np.load(sys.argv[3]), "
    "rtol=1e-5, atol=1e-6)\n"
    "print('loaded', type(model.layers[1]).__name__)\n"
)


def _run(code, *args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_keras_file_loads_in_a_fresh_process_after_importing_the_library(tmp_path):
    inputs = keras.Input((5, 8))
    outputs = GraphMultiHeadAttention(num_heads=2, key_dim=4, head_relations=[[0], [1, 2]])(
        inputs, inputs)
    model = keras.Model(inputs, outputs)
    x = np.random.default_rng(0).random((2, 5, 8)).astype("float32")
    path = tmp_path / "model.keras"
    model.save(path)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", model.predict(x, verbose=0))
    files = (path, tmp_path / "x.npy", tmp_path / "y.npy")

    documented = _run(LOAD.format(imports="import keras_structattn  # noqa: F401\n"), *files)
    assert documented.returncode == 0, documented.stderr[-3000:]
    assert documented.stdout.strip() == "loaded GraphMultiHeadAttention"

    without = _run(LOAD.format(imports=""), *files)
    assert without.returncode != 0
    assert "GraphMultiHeadAttention" in without.stderr
