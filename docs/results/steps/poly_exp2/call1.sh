#!/usr/bin/env bash
# Call 1 (outputs: call1/). Correctness of p (main with poly.patch: hopper's forward at d = 64
# with one exponential in four by a polynomial on the FMA pipe; common/poly_exp2.h,
# FwdTraits<64>'s kPolyExp2Every): p's GPU tests of every version at d = 64 (Matrix; Axes and
# Packed at bf16) and compute-sanitizer memcheck on two small ragged shapes of p's hopper, with
# their error tables' verdicts. Needs build/carry/p.tgz (stripped flashlab and flashlab_gpu_tests
# of main with poly.patch).
set -uo pipefail
mkdir -p "$OUT/logs" bins/p
tar xzf build/carry/p.tgz -C bins/p
export PATH="$PATH:/usr/local/cuda/bin"
L="$OUT/logs"; t0=$SECONDS
# A first GPU command that runs out of its time has most likely hung on the GPU: the rest would
# only wait out their own limits, so the call stops here and says so.
stop_if_hung() { if [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; then echo "$2 ran out of its time: stopping the call here"; gzip -f "$L"/*.log; exit 1; fi; }
timeout -k 10 300 bins/p/flashlab_gpu_tests --gtest_color=no --gtest_filter='Matrix/CudaVersions.*_d64_*:Axes/CudaVersionsAxes.*bf16_d64_*:Packed/CudaPacked.*bf16_d64_*' > "$L/tests_p.log" 2>&1
rc=$?; echo "tests p rc=$rc $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_p.log" | tr '\n' ' ')"
stop_if_hung $rc "the GPU tests"
grep -E '^\[  FAILED  \]' "$L/tests_p.log" | head -5
for shape in "--Nq 1000 --Nk 17 -H 2 --dtype fp16 --causal" "--Nq 177 --Nk 300 -H 8 --heads-kv 2 --dtype bf16"; do
  log="$L/memcheck_$(echo "$shape" | tr -d ' -' | cut -c1-30).log"
  timeout -k 10 40 compute-sanitizer --tool memcheck --error-exitcode 3 bins/p/flashlab run --backend cuda --versions hopper -d 64 $shape --repeats 1 --warmup 0 --bitwise-repeats 0 > "$log" 2>&1
  echo "memcheck [$shape] rc=$? $((SECONDS-t0))s: $(grep -E 'ERROR SUMMARY|within their' "$log" | tr '\n' ' ')"
done
gzip -f "$L"/*.log
cd "$OUT" && tar czf call1.tgz logs && rm -rf logs && ls  # at most 8 files come back: one archive
