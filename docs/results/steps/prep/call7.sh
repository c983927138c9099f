#!/usr/bin/env bash
# Call 7: main 332b0e7 (m: the packed preprocess and convert loading first, tiled's causal kernel),
# the binary of the committed figures: the packed batch twice and the grouped heads beside PyTorch,
# every pass after a 1 s pause on both sides (as protocol/call3.sh); then the GPU tests of every
# version on every causal problem of the matrices. Needs build/carry/m.tgz.
set -uo pipefail
mkdir -p bins/m "$OUT/logs"
tar xzf build/carry/m.tgz -C bins/m
L="$OUT/logs"; t0=$SECONDS
for r in 1 2; do
  timeout 90 bins/m/flashlab bench --backend cuda --versions hopper,hopper-deterministic -d 128 --dtype bf16 --hidden 2048 --causal yes --varlen 24,128,4096 --repeats 10 --warmup 3 --pause 1000 --json "$OUT/packed_m$r.json" > "$L/packed_m$r.log" 2>&1
  echo "packed m$r rc=$? $((SECONDS-t0))s"; grep -E "^hopper" "$L/packed_m$r.log" | cut -c1-160
done
timeout 200 python3 scripts/compare_torch.py --flashlab bins/m/flashlab --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8 --pause 1000 --out "$OUT/compare_gqa_m.json" > "$L/compare_gqa.log" 2>&1
echo "compare gqa rc=$? $((SECONDS-t0))s"; tail -14 "$L/compare_gqa.log"
cd "$OUT" && tar czf call7_results.tgz *.json && cd - > /dev/null
timeout 150 bins/m/flashlab_gpu_tests --gtest_color=no --gtest_filter='*CudaVersions*causal*' > "$L/tests_m.log" 2>&1
echo "tests m rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_m.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$L/tests_m.log" | head -5
gzip -f "$L"/*.log
cd "$OUT" && tar czf call7.tgz logs *.json && rm -rf logs *.json call7_results.tgz && ls
