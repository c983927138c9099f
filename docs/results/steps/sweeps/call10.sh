#!/usr/bin/env bash
# Run in call 10 (outputs: call10/). hopper's forward with the schedule of bands without a left
# side folded at compile time (q = main with no_left_schedule.patch: the kernels for the causal
# mask and windows without a left bound pass left_side = false to schedule.h's block_schedule, which
# then skips the left side's arithmetic once per tile and thread; static SASS at bf16 causal: d = 64
# 2760 -> 2736 instructions, d = 128 3096 -> 3064, packed d = 64 2928 -> 2896) against main (h):
# the 40 forward shapes of the sweep, alternating h, q, two rounds, each pass after a 0.5 s pause;
# then q's GPU tests of every version on the causal problems, the windows and the packed batches.
# Prediction: the causal shapes at N = 1024 up to 0.5 % faster (about 10 of the 28 instructions the
# tile's schedule gained since ec149c0), the others unchanged. Needs build/carry/h1.tgz (main's
# stripped flashlab) and q.tgz (flashlab and the GPU tests of main with the patch).
set -uo pipefail
mkdir -p "$OUT/logs" bins/h bins/q
tar xzf build/carry/h1.tgz -C bins/h; tar xzf build/carry/q.tgz -C bins/q
L="$OUT/logs"; t0=$SECONDS
for r in 1 2; do
  for b in h q; do
    timeout 100 bins/$b/flashlab bench --backend cuda --versions hopper --passes fwd -N 1024,2048,4096,8192,16384 -d 64,128 --dtype fp16,bf16 --causal yes,no --hidden 2048 --repeats 10 --warmup 3 --pause 500 --json "$OUT/fwd_$b$r.json" > "$L/fwd_$b$r.log" 2>&1
    echo "$b$r rc=$? $((SECONDS-t0))s"
  done
done
python3 scripts/compare_rounds.py "$OUT" --prefix fwd_ --base h --new q --version hopper | tee "$OUT/compare.txt"
timeout 250 bins/q/flashlab_gpu_tests --gtest_color=no --gtest_filter='*CudaVersions*causal*:Axes/*:Packed/*' > "$L/tests_q.log" 2>&1
echo "tests q rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_q.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$L/tests_q.log" | head -5
gzip -f "$L"/*.log
cd "$OUT" && tar czf call10.tgz logs *.json compare.txt && rm -rf logs *.json && ls
