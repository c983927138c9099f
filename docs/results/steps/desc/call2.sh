#!/usr/bin/env bash
# Call 2 (outputs: call2/), once call 1 has passed. s's remaining GPU tests: the axes (grouped
# heads, windows) at every head dim, packed batches, the 50-run determinism tests; then
# compute-sanitizer memcheck on small ragged grouped shapes of every changed family (the Hopper
# forward and backward at d = 64, 128 and 256, the FP8 forward) and racecheck and synccheck on the
# d = 128 backward (80-row steps) and the FP8 forward. Needs build/carry/s.tgz.
set -uo pipefail
mkdir -p "$OUT/logs" bins/s
tar xzf build/carry/s.tgz -C bins/s
export PATH="$PATH:/usr/local/cuda/bin"
L="$OUT/logs"; t0=$SECONDS
# Each command's time limit is cut to what is left of 530 s, and a command that would get less than
# 5 s is skipped (exit 125), so that the archive at the end is always made (a call has 600 s, and
# only 8 files come back).
run_for() {
  local left=$((530 - SECONDS + t0)) n=$1
  shift
  [ "$left" -lt "$n" ] && n=$left
  if [ "$n" -lt 5 ]; then echo "skipped (no time left): $*"; return 125; fi
  timeout -k 10 "$n" "$@"
}
run_tests() {  # name, time limit, filter
  run_for "$2" bins/s/flashlab_gpu_tests --gtest_color=no --gtest_filter="$3" > "$L/tests_$1.log" 2>&1
  echo "tests $1 rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_$1.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$L/tests_$1.log" | head -5
}
run_tests axes 200 'Axes/CudaVersionsAxes.*'
run_tests packed 100 'Packed/CudaPacked.*:HeadDim256/CudaPackedD256.*'
run_tests determinism 100 'Shapes/BwdDeterminism.*:Masks/CudaDeterminism.*:CudaDeterminism.*'
san() {  # tool, versions, d, shape...
  local tool=$1 versions=$2 d=$3; shift 3
  local log="$L/san_${tool}_d${d}_$(echo "$versions$*" | tr -d ' ,-' | cut -c1-40).log"
  run_for 40 compute-sanitizer --tool $tool --error-exitcode 3 bins/s/flashlab run --backend cuda --versions $versions -d $d "$@" --repeats 1 --warmup 0 --bitwise-repeats 0 > "$log" 2>&1
  echo "$tool $versions d=$d [$*] rc=$? $((SECONDS-t0))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|within their' "$log" | tr '\n' ' ')"
}
for d in 64 128 256; do
  san memcheck hopper,hopper-deterministic $d --Nq 177 --Nk 300 -H 4 --heads-kv 2 --dtype bf16 --causal
done
san memcheck hopper,hopper-deterministic 128 --Nq 1000 --Nk 17 -H 2 --dtype fp16
san racecheck hopper,hopper-deterministic 128 --Nq 177 --Nk 300 -H 4 --heads-kv 2 --dtype bf16
san synccheck hopper,hopper-deterministic 128 --Nq 177 --Nk 300 -H 4 --heads-kv 2 --dtype bf16
for tool in memcheck racecheck synccheck; do
  san $tool hopper-fp8,hopper-fp8-per-tensor 128 --Nq 200 --Nk 1000 -H 4 --heads-kv 2 --dtype fp8 --causal
done
gzip -f "$L"/*.log
cd "$OUT" && tar czf call2.tgz logs && rm -rf logs && ls  # at most 8 files come back: one archive
