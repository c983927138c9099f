#!/usr/bin/env bash
# Call 1 (outputs: call1/): correctness of w, main with wide.patch (the backward at d = 128 without
# a band in steps of 80 query rows, hopper and hopper-deterministic; bwd_params.h's kWide) and
# probe_causal.patch (inert unless FLASHLAB_PROBE_WIDE_CAUSAL is set). First one small run of w's
# hopper and hopper-deterministic (their error tables); then w's GPU tests of every version at
# d = 128 (Matrix, Axes: causal and not, windows included; the Hopper rung's causal problems at
# d = 128 get the new padding of LSE2 and D too) and the 50-run determinism tests at d = 128
# without the causal mask;
# compute-sanitizer memcheck, racecheck and synccheck on small ragged shapes of both versions.
# Needs build/carry/w.tgz (stripped flashlab and flashlab_gpu_tests).
set -uo pipefail
mkdir -p "$OUT/logs" bins/w
tar xzf build/carry/w.tgz -C bins/w
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
# A first GPU command that runs out of its time has most likely hung on the GPU: the rest would
# only wait out their own limits, so the call stops here and says so.
stop_if_hung() { if [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; then echo "$2 ran out of its time: stopping the call here"; gzip -f "$L"/*.log; exit 1; fi; }
run_for 30 bins/w/flashlab run --backend cuda --versions hopper,hopper-deterministic -d 128 --Nq 177 --Nk 300 -H 8 --heads-kv 2 --dtype bf16 --repeats 1 --warmup 0 > "$L/smoke_w.log" 2>&1
rc=$?; echo "smoke w rc=$rc $((SECONDS-t0))s"; grep -E "^hopper|^ *hopper" "$L/smoke_w.log" | head -6
stop_if_hung $rc "the smoke run"
run_for 240 bins/w/flashlab_gpu_tests --gtest_color=no --gtest_filter='Matrix/CudaVersions.*_d128_*:Axes/CudaVersionsAxes.*_d128_*:Shapes/BwdDeterminism.*/bf16_d128_full_*:Masks/CudaDeterminism.*/full' > "$L/tests_w.log" 2>&1
echo "tests w rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_w.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$L/tests_w.log" | head -5
for tool in memcheck racecheck synccheck; do
  for shape in "--Nq 177 --Nk 300 -H 8 --heads-kv 2 --dtype bf16" "--Nq 1000 --Nk 17 -H 2 --dtype fp16" "--Nq 17 --Nk 1000 -H 4 --heads-kv 1 --dtype bf16"; do
    log="$L/san_${tool}_$(echo "$shape" | tr -d ' -' | cut -c1-30).log"
    run_for 30 compute-sanitizer --tool $tool --error-exitcode 3 bins/w/flashlab run --backend cuda --versions hopper,hopper-deterministic -d 128 $shape --repeats 1 --warmup 0 --bitwise-repeats 0 > "$log" 2>&1
    echo "$tool [$shape] rc=$? $((SECONDS-t0))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tr '\n' ' ')"
  done
done
gzip -f "$L"/*.log
cd "$OUT" && tar czf call1.tgz logs && rm -rf logs && ls  # at most 8 files come back: one archive
