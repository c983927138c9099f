#!/usr/bin/env bash
# The decoding rung's GPU half in one run: split-kv's GPU tests, compute-sanitizer (memcheck,
# racecheck, synccheck) on small ragged, grouped, paged shapes with splits, `lab decode` (JSON and
# markdown), the comparison with PyTorch's cuDNN SDPA (scripts/compare_decode.py), the split counts
# around the rule's for a contiguous and a paged cache (splits), and a 1,000,000-key cache checked
# on sampled slices (million). Outputs go
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
STAGES=${STAGES:-"info tests sanitize lab compare splits million"}
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
  # sanitize NAME "TOOLS" RUN-ARGS...: compute-sanitizer with each tool on one split-kv run, a
  # stage (NAME_TOOL) and a summary line each.
  sanitize() {
    local name=$1 tools=$2 tool
    shift 2
    for tool in $tools; do
      run_stage "${name}_$tool" 60 compute-sanitizer --tool "$tool" --error-exitcode 3 \
        "$BIN/flashlab" run --backend cuda --versions split-kv "$@" \
        --repeats 1 --warmup 0 --bitwise-repeats 0
      note "${name}_$tool" "rc=$STAGE_RC $(grep -E 'ERROR SUMMARY|within their error budget' "$LOGS/${name}_$tool.log" | tr '\n' ' ')"
    done
  }
  # Small shapes with every axis the kernels take: grouped heads, a paged cache of pages smaller
  # than a tile, Nq > 1 with the causal mask and a window, forced splits merged in place by the
  # last split; then a batch with more workers' rows than the merge's counters (8 x 64 heads,
  # 64 query rows: 2,048), whose splits the combine kernel merges.
  sanitize san "memcheck racecheck synccheck" --dtype bf16 -d 128 -B 2 -H 8 --heads-kv 2 \
    --Nq 4 --Nk 1000 --page-size 16 --causal yes --window 300,0 --splits 5
  sanitize san_combine "memcheck racecheck" --dtype bf16 -d 64 -B 8 -H 64 --heads-kv 64 \
    --Nq 64 --Nk 300 --causal yes --splits 3
  # d = 256 (its own traits: Q from shared memory, copy passes of 4 rows): pages of 64 (a tile
  # found by one table read) merged in place, then the combine kernel's path (8 x 16 K/V heads,
  # 64 query rows over 4 heads each: 2,048 workers' rows).
  sanitize san_d256 "memcheck racecheck synccheck" --dtype fp16 -d 256 -B 2 -H 8 --heads-kv 2 \
    --Nq 4 --Nk 1000 --page-size 64 --causal yes --window 300,0 --splits 5
  sanitize san_d256_combine memcheck --dtype bf16 -d 256 -B 8 -H 64 --heads-kv 16 --Nq 64 \
    --Nk 300 --page-size 16 --causal yes --splits 3
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

# One query row, 32 query heads over 8 K/V heads, d = 128, bf16: the shape the split rule is tuned on.
# (Functions, exported, so that run_stage's time limit can run them in a shell of their own.)
export BIN
decode_run() {
  "$BIN/flashlab" run --backend cuda --versions split-kv --dtype bf16 -d 128 -H 32 --heads-kv 8 \
    --Nq 1 --check sample "$@"
}

if has splits; then
  # The rule gives a contiguous cache one worker an SM and a paged one two (schedule.h): both
  # layouts at 16 and 32 splits of a 65,536-key cache, the timing line of each.
  sweep() {
    for page in 0 64; do
      for s in 16 32; do
        local a=()
        [ "$page" -gt 0 ] && a=(--page-size "$page")
        echo "== page=$page splits=$s"
        decode_run --Nk 65536 --repeats 20 --warmup 5 --bitwise-repeats 0 --splits "$s" "${a[@]}" |
          grep -E "split-kv +fwd|FAIL"
      done
    done
  }
  export -f decode_run sweep
  run_stage splits 120 bash -c sweep
  note splits "rc=$STAGE_RC ${STAGE_S}s $(grep -c 'split-kv  fwd' "$LOGS/splits.log") timings"
fi

if has million; then
  export -f decode_run
  run_stage million 150 bash -c 'decode_run --Nk 1000000 --repeats 10 --json "$0"' "$OUT/nk1m.json"
  note million "rc=$STAGE_RC ${STAGE_S}s $(grep -E 'within their error budget|FAIL' "$LOGS/million.log" | tr '\n' ' ')"
fi

echo
echo "== summary"
for line in "${SUMMARY[@]}"; do echo "$line"; done
for f in "$LOGS"/*.log; do
  echo "---- $(basename "$f") (tail)"
  tail -n 25 "$f"
done
