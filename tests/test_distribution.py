"""`keras_structattn.training.distribution`: data-parallel training on 2 devices of
this CPU gives the weights of one device with the same global batch, on
JAX (`DataParallel`, one process and two processes) and on TensorFlow
(`MirroredStrategy` over two logical CPUs).

Device counts are fixed when a backend starts, so each training runs in a
subprocess of its own."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from keras_structattn.training.distribution import Replicas

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A small model with a structured layer, trained 4 SGD steps on fixed
# global batches of 8 (dropout off); prints the flattened weights as JSON.
TRAIN = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import keras
    from keras_structattn.training import distribution
    from keras_structattn.layers import MultiHeadAreaAttention

    mode, processes, process = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    kwargs = {}
    if processes > 1:
        kwargs = dict(coordinator_address=sys.argv[4], num_processes=processes,
                      process_id=process)
    elif mode == "data_parallel":
        kwargs = dict(devices=2)
    replicas = distribution.replicas(mode, **kwargs)
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 6, 8)).astype("float32")
    y = rng.normal(size=(32, 6, 2)).astype("float32")

    def batches():
        step = 0
        while True:
            rows = slice(step % 4 * 8, (step % 4 + 1) * 8)
            yield replicas.local_rows((x[rows], y[rows]))
            step += 1

    with replicas.scope():
        inputs = keras.Input((6, 8))
        hidden = MultiHeadAreaAttention(2, 4, max_area_width=2, seed=1)(inputs, inputs)
        model = keras.Model(inputs, keras.layers.Dense(2)(hidden))
        # SGD: Adam would blow the round-off of a zero gradient (the key
        # bias's, with mean area keys) up to a full step.
        model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse",
                      jit_compile=keras.backend.backend() == "jax")
        data = batches()
        if keras.backend.backend() == "tensorflow":
            # MirroredStrategy splits each batch of a tf.data pipeline that
            # ends in `batch`; a generator's batches would go whole to the
            # replicas, in the order they happen to pull them (a flaky
            # match with one device; docs/distributed.md).
            import tensorflow as tf
            data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8)
        model.fit(data, steps_per_epoch=2, epochs=2, verbose=0)
    weights = [keras.ops.convert_to_numpy(w.value).ravel() for w in model.weights]
    print("WEIGHTS", json.dumps({
        "replicas": replicas.num_replicas,
        "steps": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
        "weights": np.concatenate(weights).tolist(),
    }))
    """
)


def _env(backend, devices=None):
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    if backend == "jax" and devices:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    return env


def _start(backend, mode, processes=1, process=0, address="", devices=None):
    return subprocess.Popen(
        [sys.executable, "-c", TRAIN, mode, str(processes), str(process), address],
        env=_env(backend, devices),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(process):
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-2000:]
    line = [x for x in out.splitlines() if x.startswith("WEIGHTS ")][-1]
    result = json.loads(line[len("WEIGHTS "):])
    result["weights"] = np.array(result["weights"])
    return result


@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_two_devices_train_to_the_single_device_weights(backend):
    single = _start(backend, "none")
    parallel = _start(backend, "data_parallel", devices=2)
    one, two = _result(single), _result(parallel)
    assert (one["replicas"], two["replicas"]) == (1, 2)
    # The optimizer counts global steps.
    assert one["steps"] == two["steps"] == 4
    np.testing.assert_allclose(two["weights"], one["weights"], rtol=1e-4, atol=1e-5)


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_jax_processes_train_to_the_single_device_weights():
    """The multi-host form on one machine: two processes of one CPU device
    each, joined through `keras.distribution.initialize`, each feeding its
    half of every global batch."""
    address = f"localhost:{_free_port()}"
    workers = [_start("jax", "data_parallel", 2, i, address) for i in range(2)]
    single = _start("jax", "none")
    results = [_result(w) for w in workers]
    one = _result(single)
    for result in results:
        assert result["replicas"] == 2 and result["steps"] == 4
        np.testing.assert_allclose(result["weights"], one["weights"], rtol=1e-4, atol=1e-5)


def test_local_rows_are_this_process_block_of_the_global_batch():
    batch = {"x": np.arange(8), "y": np.arange(8) * 10}
    halves = [Replicas(num_replicas=2, num_processes=2, process_id=i).local_rows(batch)
              for i in range(2)]
    np.testing.assert_array_equal(halves[0]["x"], [0, 1, 2, 3])
    np.testing.assert_array_equal(halves[1]["y"], [40, 50, 60, 70])
    assert Replicas().local_rows(batch) is batch


def test_check_batch_and_arguments():
    with pytest.raises(ValueError, match="must split evenly over 4 replicas"):
        Replicas(num_replicas=4).check_batch(10)
    Replicas(num_replicas=4).check_batch(12)
    from keras_structattn.training.distribution import replicas

    assert replicas("none").num_replicas == 1
    with pytest.raises(ValueError, match="distribute must be one of"):
        replicas("model_parallel")
