#!/usr/bin/env bash
# Call 1 (outputs: call1/). Correctness of b, main with quant_rcp.patch and bc192.patch: the FP8
# forward on key tiles of 192 (K/V scale blocks of 192 keys, V^T in three 64-key panels of 64-byte
# swizzle, a quantization pass of 192-thread CTAs). b's GPU tests of the FP8 rung (the test matrix
# against the fp8 budget and the twin, the codes and scales against the twin's with K/V blocks of
# 192 keys, the converter, the entry); compute-sanitizer memcheck, racecheck and synccheck on a
# small causal grouped shape and on a ragged one whose keys span several 192-key tiles (the last
# one clipped); then `lab fp8 --backend cuda` (the kernels' error table at seed 0 and the factor
# incoherent processing buys on outliers). Needs build/carry/b9.tgz (stripped flashlab and
# flashlab_gpu_tests).
set -uo pipefail
mkdir -p "$OUT/logs" bins/b
tar xzf build/carry/b9.tgz -C bins/b
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
run_for 150 bins/b/flashlab_gpu_tests --gtest_color=no --gtest_filter='HopperFp8/*:CudaHopperFp8Quantization.*:Fp8Cuda.*:GpuHopperFp8Entry.*' > "$L/tests_b.log" 2>&1
rc=$?; echo "tests b rc=$rc $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_b.log" | tr '\n' ' ')"
stop_if_hung $rc "the GPU tests"
grep -E '^\[  FAILED  \]' "$L/tests_b.log" | head -5
for tool in memcheck racecheck synccheck; do
  for shape in "-B 1 -H 4 --heads-kv 2 -N 300 -d 128 --causal yes" "-B 2 -H 2 --Nq 200 --Nk 1000 -d 64"; do
    log="$L/san_${tool}_$(echo "$shape" | tr -d ' -' | cut -c1-30).log"
    run_for 60 compute-sanitizer --tool $tool --error-exitcode 3 bins/b/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8,hopper-fp8-per-tensor $shape --repeats 1 --warmup 0 --bitwise-repeats 0 > "$log" 2>&1
    echo "$tool [$shape] rc=$? $((SECONDS-t0))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|within their' "$log" | tr '\n' ' ')"
  done
done
run_for 150 bins/b/flashlab lab fp8 --backend cuda --json "$OUT/lab_fp8_cuda_b.json" > "$L/lab_fp8_b.log" 2>&1
echo "lab fp8 b rc=$? $((SECONDS-t0))s"; grep -E 'lowers block-scaled|^fp8|^bf16' "$L/lab_fp8_b.log" | cut -c1-200
gzip -f "$L"/*.log
cd "$OUT" && tar czf call1.tgz logs $(ls *.json 2>/dev/null) && rm -rf logs *.json && ls  # at most 8 files come back: one archive
