"""Fixtures of the recipe tests: a tiny translation corpus and its flags,
and killing a training command mid-run."""

import os
import signal
import subprocess
import time

import pytest

from keras_structattn.tasks.translation import tatoeba

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = (
    "num_hidden_layers=1,hidden_size=32,filter_size=64,num_heads=2,"
    "num_area_layers=1,max_area_width=2,batch_size=256,max_length=24,"
    "learning_rate_warmup_steps=10"
)


def write_tsv(path, pairs):
    with open(path, "w", encoding="utf-8") as f:
        for source, target in pairs:
            f.write(f"{source}\t{target}\n")
    return str(path)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    train = tatoeba.load_tatoeba_en_de("train")[::40]  # 458 pairs
    test = tatoeba.load_tatoeba_en_de("test")[:24]
    return dict(
        train=write_tsv(root / "train.tsv", train),
        dev=write_tsv(root / "dev.tsv", train[:16]),
        test=write_tsv(root / "test.tsv", test),
        test_sources=[s for s, _ in test],
        root=root,
    )


def flags(data, out, *extra):
    return [
        "--output_dir", str(out), "--hparams", TINY, "--vocab_type", "char",
        "--train_tsv", data["train"], "--dev_tsv", data["dev"],
        "--test_tsv", data["test"], "--beam_size", "2", "--extra_length", "4",
        "--decode_batch_size", "8", "--verbose", "0", *extra,
    ]


def kill_at_checkpoint(command, checkpoint, env, timeout=300):
    """Runs `command` from the repository root and SIGKILLs it as soon as
    `checkpoint` exists (asserting that it was reached)."""
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while not checkpoint.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert checkpoint.exists(), "the run did not reach its first checkpoint"
    process.send_signal(signal.SIGKILL)
    process.wait()


@pytest.fixture(autouse=True)
def float32_after_each_test():
    """A recipe command sets its run's precision (`--precision`) as Keras'
    global dtype policy; the tests after it start from float32 again."""
    yield
    import keras

    keras.config.set_dtype_policy("float32")
