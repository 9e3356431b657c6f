#!/usr/bin/env bash
# Run aicfc's GPU checks and benchmarks on a lent GPU machine, logs under $OUT.
#
#   bash tools/device_run.sh env tests gemm train[:ARGS]
#
# Stages: env (GPU, CUDA, CuPy, nvmath), tests (the GPU pytest suite and the nvcc compile
# test; the emulated kernel tests are CPU tests that CI runs), gemm (tools/bench_gemm.py),
# small (bench_gemm.py --small: the small train step's products, graph-timed), profile
# (bench_train_step.py --profile), tkernels (tools/bench_transformer_kernels.py), gpt
# (tools/bench_gpt_step.py: the GPT train step against torch and JAX; with no arguments
# `--quick` (--deadline 230), about 4 minutes; `gpt.full:--deadline=480` for every step and
# process; GPT_TIMEOUT bounds it: 280 s with --quick, 560 s without, unless set), train
# (tools/bench_train_step.py; `train:--configs=small` passes arguments, separated by '+';
# `train.NAME:...` is another train run, logged as train.NAME.*), chargpt
# (examples/train_char_gpt.py --backend cupy --config nanogpt-char; CHARGPT_TIMEOUT, 400 s
# unless set; `chargpt:--steps=500` passes arguments), dp
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
            --ignore-glob='test/python/gpu/*_emulated.py' \
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
        timeout 240 python3 tools/bench_transformer_kernels.py \
            $args 2>&1 | tee "$OUT/tkernels.log"
        ;;
    gpt | gpt.*)
        [ -z "$args" ] && args="--quick"  # --deadline 230 (480 without --quick)
        limit=560 && [[ "$args" == *--quick* ]] && limit=280
        timeout "${GPT_TIMEOUT:-$limit}" python3 tools/bench_gpt_step.py --json "$OUT/$name.json" $args 2>&1 \
            | tee "$OUT/$name.log" | tail -60
        ;;
    chargpt)
        # issue 12: the char GPT trains on the GPU; held-out bits per character, tokens/s
        if [ -f examples/train_char_gpt.py ]; then
            timeout "${CHARGPT_TIMEOUT:-400}" python3 examples/train_char_gpt.py --backend cupy \
                --config nanogpt-char $args 2>&1 | tee "$OUT/chargpt.log" | grep -v "^train" | tail -30
        else
            echo "examples/train_char_gpt.py is not in this tree"
        fi
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
