"""A smoke run of benchmarks/model_speed.py: the driver, its JAX workers and the table."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# XLA's backend optimisations off: the tiny programs compile several times
# faster (the run is mostly compiling), and a smoke run's times mean nothing.
FAST_COMPILE = ("--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true "
                "--xla_cpu_use_fusion_emitters=false")


def test_quick_run_tables_both_precisions_of_mcan_and_m4c():
    """MCAN and M4C (its decoding too): the driver, two JAX workers, the table."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip())
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.model_speed", "--quick", "--models", "mcan,m4c",
         "--backends", "jax"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert any(line.startswith("# measured matmul peak: ") for line in lines)
    assert any(line.startswith("# mcan: mcan_tiny, 4 questions") for line in lines)
    assert any(line.startswith("# m4c: m4c_tiny (num_steps=4), 4 questions") for line in lines)
    header = next(i for i, line in enumerate(lines) if line.startswith("model "))
    rows = [line.split() for line in lines[header + 2:] if line and not line.startswith("#")]
    assert [(row[0], row[1], row[2]) for row in rows] == [
        ("mcan", "jax", "fp32"), ("mcan", "jax", "bf16"),
        ("m4c", "jax", "fp32"), ("m4c", "jax", "bf16")]
    for row in rows:
        # batch, train ms, examples/s, forward ms, decode ms (MCAN: -), RSS,
        # GFLOP/s, % peak; bf16 also its ratio to fp32 (no PyTorch ratios
        # with --quick: other shapes).
        values = row[3:7] + ([] if row[0] == "mcan" else [row[7]]) + row[8:]
        assert (row[7] == "-") == (row[0] == "mcan")
        assert len(row) == (12 if row[2] == "bf16" else 11)
        assert all(float(value) > 0 for value in values), row
