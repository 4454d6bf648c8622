#!/usr/bin/env bash
# The GPU checks of issue 22 in one call on a lent device machine (JAX there,
# no TensorFlow): the fused kernel's tests compiled for the GPU, then the
# benchmarks behind the targets. Each step has its own time limit so
# that one that hangs leaves time to the others; every log and results file
# goes to $OUT (or ./gpu_out here).
#
#   bash benchmarks/gpu_checks.sh            # on the device machine, repo root
#   QUICK=1 bash benchmarks/gpu_checks.sh    # tiny shapes: a smoke run on a CPU
#   STEPS="tests bf16" IMPLS="fused stacked" bash benchmarks/gpu_checks.sh
#
# STEPS picks among tests, tiles, bf16, f32, long and graph (default: all but
# graph); IMPLS the area implementations of the layer-level steps (default
# fused stacked); REPEATS the graph step's runs (default 1); TILE_CASES,
# BLOCK_K and NUM_WARPS the tile sweep's cases and settings.
#
# Keras is not installed on the device image: carry its wheels in .whl/
# (keras, namex, optree) and they are installed into /tmp/site first.
set -uo pipefail
py="${PYTHON:-python3}"
out="${OUT:-gpu_out}"
mkdir -p "$out"
export KERAS_BACKEND=jax PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=3
if ls .whl/*.whl >/dev/null 2>&1 && ! "$py" -c "import keras" 2>/dev/null; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

step() {  # step NAME SECONDS COMMAND...: run, log to $out/NAME.log, report
    local name=$1 limit=$2 start=$SECONDS
    shift 2
    echo "== $name (limit ${limit}s)"
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    echo "== $name: rc=$rc in $((SECONDS - start)) s"
    tail -n "${TAIL:-40}" "$out/$name.log"
}

nvidia-smi -L 2>/dev/null
$py -c "import jax, keras; print('jax', jax.__version__, 'keras', keras.__version__, jax.devices())"

if [ -n "${QUICK:-}" ]; then
    shapes1=(1d:64) shapes2=(2d:8x8) batch=2 heads=2 key_dim=16 big=1d:128 reps=(--repeats 2 --warmup 1)
    tile_cases=(1d:64:3:float32)
    tests=(tests/ops/test_fused_area_attention.py::test_every_row_masked_gives_zeros)
else
    shapes1=(1d:1024) shapes2=(2d:32x32) batch=32 heads=8 key_dim=64 big=1d:4096
    tile_cases=(1d:1024:3:bfloat16 1d:1024:5:float32 2d:32x32:3:bfloat16 2d:32x32:3:float32)
    reps=(--repeats 10 --warmup 3)
    tests=(tests/ops/test_fused_area_attention.py tests/layers/test_fused_core.py
        tests/ops/test_stacked_area_attention.py)
fi
impls=(${IMPLS:-fused stacked})
steps=" ${STEPS:-tests tiles bf16 f32 long} "
wants() { [[ "$steps" == *" $1 "* ]]; }
common=(--batch "$batch" --heads "$heads" --key_dim "$key_dim" --areas 3 --jit on "${reps[@]}")

wants tests && step tests 120 $py -m pytest -x -q -p no:cacheprovider "${tests[@]}"
tile_cases=(${TILE_CASES:-${tile_cases[@]}})
wants tiles && step tiles 130 $py benchmarks/fused_tiles.py --cases "${tile_cases[@]}" \
    --batch "$batch" --heads "$heads" --depth "$key_dim" --block_k ${BLOCK_K:-32 16} \
    --num_warps ${NUM_WARPS:-4 8} "${reps[@]}"
wants bf16 && step bf16 130 $py benchmarks/area_attention.py --shapes "${shapes1[@]}" \
    "${shapes2[@]}" --widths 3 5 --implementations "${impls[@]}" --dtype mixed_bfloat16 \
    --baseline flash "${common[@]}" --output "$out/results_area_attention_gpu_jax_bf16.txt"
wants f32 && step f32 130 $py benchmarks/area_attention.py --shapes "${shapes1[@]}" \
    "${shapes2[@]}" --widths 3 5 --implementations "${impls[@]}" --dtype float32 \
    --baseline xla "${common[@]}" --output "$out/results_area_attention_gpu_jax_f32.txt"
wants long && step long 70 $py benchmarks/area_attention.py --shapes "$big" --widths 5 \
    --implementations "${impls[@]}" --dtype mixed_bfloat16 --baseline flash \
    "${common[@]}" --output "$out/results_area_attention_gpu_jax_long.txt"
for run in $(seq "${REPEATS:-1}"); do
    wants graph && step "graph$run" 50 $py benchmarks/graph_attention.py --jit on \
        --batch "$batch" "${reps[@]}"
done
