#!/usr/bin/env bash
# The ring's GPU half (kernels/09_ring/cuda.cu) in one run: its GPU tests (R = 1 through NCCL on one
# GPU; R = 2, 3, 4, 8 where that many GPUs are visible), compute-sanitizer memcheck on a small
# R = 1 run of both shardings (forward and backward, odd N, causal, grouped heads), and one
# `flashlab run` of ring and ring-contiguous beside hopper on the same problem (JSON in $OUT).
# A summary is printed last; every stage has a time limit within BUDGET seconds (default 540).
#
# Build first, where nvcc is (no GPU needed):  scripts/device_build.sh   (-> build/device-bin)
# Then, on a machine with the GPU, from the repository root:
#   scripts/device_ring.sh
#   STAGES="tests memcheck" scripts/device_ring.sh
#
# NCCL: the binary opens libnccl.so.2 at run time. Where it is only a Python wheel
# (nvidia-nccl-cu13), the file is found from python3 here and passed as FLASHLAB_NCCL_LIB.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0, also set by the binary itself).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${FLASHLAB_BIN_DIR:-build/device-bin}
OUT=${OUT:-out/ring}
LOGS="$OUT/logs"
BUDGET=${BUDGET:-540}
STAGES=${STAGES:-"info tests memcheck run"}
mkdir -p "$LOGS"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -z "${FLASHLAB_NCCL_LIB:-}" ]; then
  lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  [ -n "$lib" ] && [ -f "$lib" ] && export FLASHLAB_NCCL_LIB="$lib"
fi

source scripts/device_stages.sh

if has info; then
  run_stage info 20 nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv
  note info "$(($(wc -l <"$LOGS/info.log") - 1)) GPU(s); NCCL: ${FLASHLAB_NCCL_LIB:-found by the binary itself}"
fi

if has tests; then
  run_stage tests 300 "$BIN/flashlab_gpu_tests" --gtest_filter="${FILTER:-RingOfOne/*:Ranks/*:CudaRingEntry.*}"
  note tests "rc=$STAGE_RC ${STAGE_S}s $(grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]' "$LOGS/tests.log" | tr '\n' ' ')"
fi

if has memcheck; then
  for v in ring ring-contiguous; do
    # --report-api-errors no: NCCL's initialisation asks the runtime about its kernels for other
    # architectures (cudaFuncGetAttributes: "no kernel image"), and handles the answer; memcheck
    # would count each as an error. The project's own CUDA calls are all checked (a failed one
    # ends the run), and memory errors are reported either way.
    run_stage "memcheck_$v" 120 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
      "$BIN/flashlab" run --backend cuda --versions "$v" --ranks 1 --dtype bf16 -d 64 -B 1 -H 4 \
      --heads-kv 2 -N 77 --causal yes --repeats 1 --warmup 0 --bitwise-repeats 0
    note "memcheck_$v" "rc=$STAGE_RC $(grep -E 'ERROR SUMMARY|within their error budget|FAIL' "$LOGS/memcheck_$v.log" | tr '\n' ' ')"
  done
fi

if has run; then
  run_stage run 120 "$BIN/flashlab" run --backend cuda --versions hopper,ring,ring-contiguous \
    --ranks 1 --dtype bf16 -d 128 -B 1 -H 4 -N 4095 --causal yes --repeats 5 --warmup 2 \
    --json "$OUT/run_ring_r1.json"
  note run "rc=$STAGE_RC $(grep -E 'within their error budget|FAIL' "$LOGS/run.log" | tr '\n' ' ')"
fi

echo
echo "== summary ($SECONDS s; logs in $LOGS)"
printf '%s\n' "${SUMMARY[@]}"
