#!/usr/bin/env bash
# Run aicfc's GPU checks and benchmarks on a lent GPU machine, logs under $OUT.
#
#   bash tools/device_run.sh env tests gemm train[:ARGS]
#
# Stages: env (GPU, CUDA, CuPy, nvmath), tests (the GPU pytest suite and the nvcc
# compile test), gemm (tools/bench_gemm.py), small (bench_gemm.py --small: the small
# train step's products, graph-timed), profile (bench_train_step.py --profile),
# tkernels (test/python/gpu/bench_transformer_kernels.py), train (tools/bench_train_step.py; `train:--configs=small` passes arguments,
# separated by '+'; `train.NAME:...` is another train run, logged as train.NAME.*), dp
# (tools/bench_data_parallel.py: the data-parallel scaling table; needs 2+ GPUs and NCCL).
# Needs the wheels of ../shared/tools/device-wheels.sh in .whl (xdsl, nvmath-python).
# TESTS_TIMEOUT / TRAIN_TIMEOUT (seconds) bound those two stages.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/aicfc-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 \
    || { cat "$OUT/install.log"; exit 1; }

for stage in "$@"; do
    name="${stage%%:*}"
    args=""
    [ "$name" != "$stage" ] && args="${stage#*:}" && args="${args//+/ }"
    echo "=== $stage ($(date +%T))"
    case "$name" in
    env)
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv
        nvcc --version | tail -1
        python3 -c "import cupy, sys; print('cupy', cupy.__version__, cupy.cuda.is_available(), sys.version.split()[0])"
        python3 -c "from aicfc.runtime.cuda import cublaslt; print('nvmath:', cublaslt.available() or 'ok')"
        ;;
    tests)
        timeout "${TESTS_TIMEOUT:-540}" python3 -m pytest -q -p no:cacheprovider -o addopts="-ra" \
            --ignore=test/python/gpu/test_kernels_emulated.py \
            test/python/gpu test/python/test_kernels_compile.py $args 2>&1 | tee "$OUT/tests.log" | tail -60
        ;;
    gemm)
        timeout 300 python3 tools/bench_gemm.py --json "$OUT/gemm.json" $args 2>&1 | tee "$OUT/gemm.log"
        ;;
    small)
        timeout 120 python3 tools/bench_gemm.py --small --json "$OUT/small.json" $args 2>&1 \
            | tee "$OUT/small.log"
        ;;
    tkernels)
        PYTHONPATH="$PYTHONPATH:$PWD/test/python" timeout 240 python3 test/python/gpu/bench_transformer_kernels.py \
            $args 2>&1 | tee "$OUT/tkernels.log"
        ;;
    profile)
        timeout 120 python3 tools/bench_train_step.py --profile $args 2>&1 | tee "$OUT/profile.log"
        ;;
    train | train.*)
        timeout "${TRAIN_TIMEOUT:-560}" python3 tools/bench_train_step.py --json "$OUT/$name.json" $args 2>&1 \
            | tee "$OUT/$name.log" | grep -v "^\[" | tail -80
        ;;
    dp)
        NCCL_NVLS_ENABLE=0 timeout 560 python3 tools/bench_data_parallel.py --json "$OUT/dp.json" $args \
            2>&1 | tee "$OUT/dp.log"
        ;;
    *) echo "unknown stage $stage" ;;
    esac
done
