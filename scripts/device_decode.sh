#!/usr/bin/env bash
# The decoding rung's GPU half in one run: split-kv's GPU tests, compute-sanitizer (memcheck,
# racecheck, synccheck) on small ragged, grouped, paged shapes with splits, `lab decode` (JSON and
# markdown) and the comparison with PyTorch's cuDNN SDPA (scripts/compare_decode.py). Outputs go
# to $OUT, a summary is printed last. Every stage has a time limit, and one that would run past the
# whole budget (BUDGET seconds, default 540) is skipped and says so.
#
# Build first, where nvcc is (no GPU needed):  scripts/device_build.sh   (-> build/device-bin)
# Then, on a machine with the GPU, from the repository root:
#   scripts/device_decode.sh
#   STAGES="tests sanitize" scripts/device_decode.sh          # some of them
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${FLASHLAB_BIN_DIR:-build/device-bin}
OUT=${OUT:-out/decode}
LOGS="$OUT/logs"
BUDGET=${BUDGET:-540}
STAGES=${STAGES:-"info tests sanitize lab compare"}
mkdir -p "$LOGS"
source scripts/cupti_env.sh

source scripts/device_stages.sh

if has info; then
  run_stage info 20 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,memory.used --format=csv
  note info "$(sed -n 2p "$LOGS/info.log")"
fi

if has tests; then
  run_stage tests 240 "$BIN/flashlab_gpu_tests" --gtest_filter="${FILTER:-SplitKv/*:GpuSplitKvEntry.*}"
  note tests "rc=$STAGE_RC ${STAGE_S}s $(grep -E '^\[  (PASSED|FAILED)  \]' "$LOGS/tests.log" | tr '\n' ' ')"
fi

if has sanitize; then
  # Small shapes with every axis the kernels take: grouped heads, a paged cache of pages smaller
  # than a tile, Nq > 1 with the causal mask and a window, forced splits (so the combine runs).
  for tool in memcheck racecheck synccheck; do
    run_stage "san_$tool" 60 compute-sanitizer --tool "$tool" --error-exitcode 3 \
      "$BIN/flashlab" run --backend cuda --versions split-kv --dtype bf16 -d 128 -B 2 -H 8 \
      --heads-kv 2 --Nq 4 --Nk 1000 --page-size 16 --causal yes --window 300,0 --splits 5 \
      --repeats 1 --warmup 0 --bitwise-repeats 0
    note "san_$tool" "rc=$STAGE_RC $(grep -E 'ERROR SUMMARY|within their error budget' "$LOGS/san_$tool.log" | tr '\n' ' ')"
  done
fi

if has lab; then
  run_stage lab 150 "$BIN/flashlab" lab decode --backend cuda --format markdown \
    --json "$OUT/lab_decode_cuda.json"
  cp "$LOGS/lab.log" "$OUT/lab_decode_cuda.md"
  note lab "rc=$STAGE_RC ${STAGE_S}s -> lab_decode_cuda.json, lab_decode_cuda.md"
fi

if has compare; then
  run_stage compare 300 python3 scripts/compare_decode.py --flashlab "$BIN/flashlab" \
    --ceiling-from "$OUT/lab_decode_cuda.json" --out "$OUT/compare_decode.json" ${COMPARE_ARGS:-}
  note compare "rc=$STAGE_RC ${STAGE_S}s -> compare_decode.json"
fi

echo
echo "== summary"
for line in "${SUMMARY[@]}"; do echo "$line"; done
for f in "$LOGS"/*.log; do
  echo "---- $(basename "$f") (tail)"
  tail -n 25 "$f"
done
