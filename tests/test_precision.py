"""Tests of `keras_structattn.training.precision` (the runs' --precision)."""

import keras
import pytest

from keras_structattn.training import precision
from recipes import _cli


def test_auto_takes_bfloat16_only_with_amx_tiles(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16 amx_bf16 amx_tile\n")
    flags = precision.cpu_flags(str(cpuinfo))
    assert {"avx512_bf16", "amx_bf16"} <= flags
    assert precision.resolve("auto", flags) == "mixed_bfloat16"
    assert precision.resolve("auto", {"avx512f", "avx512_bf16"}) == "float32"
    assert precision.resolve("float32", flags) == "float32"
    assert precision.resolve("mixed_bfloat16", set()) == "mixed_bfloat16"
    assert precision.cpu_flags(str(tmp_path / "missing")) == set()
    with pytest.raises(ValueError, match="precision must be one of"):
        precision.resolve("float16")


def test_the_command_line_offers_the_same_choices():
    assert _cli.PRECISIONS == precision.CHOICES


def test_use_sets_the_policy_of_new_layers():
    try:
        precision.use("mixed_bfloat16")
        layer = keras.layers.Dense(2)
        assert (layer.compute_dtype, layer.variable_dtype) == ("bfloat16", "float32")
    finally:
        precision.use("float32")
    assert keras.layers.Dense(2).compute_dtype == "float32"
