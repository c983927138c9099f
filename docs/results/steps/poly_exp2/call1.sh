#!/usr/bin/env bash
# Call 1 (outputs: call1/). hopper's forward at d = 64 with one exponential in four by a
# polynomial on the FMA pipe (p: main with poly.patch; common/poly_exp2.h, FwdTraits<64>'s
# kPolyExp2Every) against main (h: build/carry/e.tgz, e006e3a's binary: the same SASS as main).
# First p's GPU tests of every version at d = 64 (Matrix; Axes and Packed at bf16) and
# compute-sanitizer memcheck on two small ragged shapes of p's hopper; then the sweep's 20 forward
# shapes at d = 64 alternating h, p, two rounds, each pass after a 0.5 s pause. Prediction
# (docs/perf.md): 0 to +5 % at d = 64, most at the long non-causal sequences; up to -2 % if the
# extra instructions crowd the issue slots. Needs build/carry/e.tgz and p.tgz (stripped flashlab
# and flashlab_gpu_tests of main with poly.patch).
set -uo pipefail
mkdir -p "$OUT/logs" bins/h bins/p
tar xzf build/carry/e.tgz -C bins/h; tar xzf build/carry/p.tgz -C bins/p
export PATH="$PATH:/usr/local/cuda/bin"
L="$OUT/logs"; t0=$SECONDS
timeout 240 bins/p/flashlab_gpu_tests --gtest_color=no --gtest_filter='Matrix/CudaVersions.*_d64_*:Axes/CudaVersionsAxes.*bf16_d64_*:Packed/CudaPacked.*bf16_d64_*' > "$L/tests_p.log" 2>&1
echo "tests p rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_p.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$L/tests_p.log" | head -5
for shape in "--Nq 1000 --Nk 17 -H 2 --dtype fp16 --causal" "--Nq 177 --Nk 300 -H 8 --heads-kv 2 --dtype bf16"; do
  log="$L/memcheck_$(echo "$shape" | tr -d ' -' | cut -c1-30).log"
  timeout 30 compute-sanitizer --tool memcheck --error-exitcode 3 bins/p/flashlab run --backend cuda --versions hopper -d 64 $shape --repeats 1 --warmup 0 --bitwise-repeats 0 > "$log" 2>&1
  echo "memcheck [$shape] rc=$? $((SECONDS-t0))s: $(grep -E 'ERROR SUMMARY' "$log")"
done
for r in 1 2; do
  for b in h p; do
    timeout 90 bins/$b/flashlab bench --backend cuda --versions hopper --passes fwd -N 1024,2048,4096,8192,16384 -d 64 --dtype fp16,bf16 --causal yes,no --hidden 2048 --repeats 10 --warmup 3 --pause 500 --json "$OUT/fwd_$b$r.json" > "$L/fwd_$b$r.log" 2>&1
    echo "$b$r rc=$? $((SECONDS-t0))s"
  done
done
python3 scripts/compare_rounds.py "$OUT" --prefix fwd_ --base h --new p --version hopper | tee "$OUT/compare.txt"
gzip -f "$L"/*.log
cd "$OUT" && tar czf call1.tgz logs *.json compare.txt && rm -rf logs *.json && ls
