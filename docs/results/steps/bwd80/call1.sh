#!/usr/bin/env bash
# Call 1 (outputs: call1/). hopper's backward at d = 128 without a band in steps of 80 query rows
# (w: main with wide.patch, bwd_params.h's kWide: dQ^T = K^T dS^T, dS stored by stmatrix.trans,
# one dQ staging buffer) against main (h: e.tgz, e006e3a's binary, whose 243 kernels have the same
# SASS as main's and as w's others). First one small run of w's hopper (its error table); then
# w's GPU tests of every version at d = 128 without a mask (Matrix, Axes); compute-sanitizer
# memcheck, racecheck and synccheck on small ragged shapes of w's hopper; the grouped-heads shapes
# beside PyTorch's cuDNN; the backward of the sweep's non-causal d = 128 shapes alternating h, w,
# two rounds, each pass after a 1 s pause. Prediction (docs/perf.md): 4 to 11 % at every
# non-causal d = 128 point. Needs build/carry/e.tgz and w.tgz (stripped flashlab and
# flashlab_gpu_tests of main with wide.patch).
set -uo pipefail
mkdir -p "$OUT/logs" bins/h bins/w
tar xzf build/carry/e.tgz -C bins/h; tar xzf build/carry/w.tgz -C bins/w
export PATH="$PATH:/usr/local/cuda/bin"
L="$OUT/logs"; t0=$SECONDS
timeout 60 bins/w/flashlab run --backend cuda --versions hopper -d 128 --Nq 177 --Nk 300 -H 8 --heads-kv 2 --dtype bf16 --repeats 1 --warmup 0 > "$L/smoke_w.log" 2>&1
echo "smoke w rc=$? $((SECONDS-t0))s"; grep -E "hopper" "$L/smoke_w.log" | head -4
timeout 200 bins/w/flashlab_gpu_tests --gtest_color=no --gtest_filter='Matrix/CudaVersions.*_d128_full_*:Axes/CudaVersionsAxes.*_d128_full_*' > "$L/tests_w.log" 2>&1
echo "tests w rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_w.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$L/tests_w.log" | head -5
for tool in memcheck racecheck synccheck; do
  for shape in "--Nq 177 --Nk 300 -H 8 --heads-kv 2 --dtype bf16" "--Nq 1000 --Nk 17 -H 2 --dtype fp16" "--Nq 17 --Nk 1000 -H 4 --heads-kv 1 --dtype bf16"; do
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 bins/w/flashlab run --backend cuda --versions hopper -d 128 $shape --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_${tool}_$(echo $shape | tr -d ' -' | cut -c1-30).log" 2>&1
    echo "$tool [$shape] rc=$? $((SECONDS-t0))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L"/san_${tool}_$(echo $shape | tr -d ' -' | cut -c1-30).log | tr '\n' ' ')"
  done
done
timeout 150 python3 scripts/compare_torch.py --flashlab bins/w/flashlab --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8 --pause 1000 --out "$OUT/compare_torch_gqa_hopper.json" > "$L/compare_gqa.log" 2>&1
echo "compare gqa rc=$? $((SECONDS-t0))s"; tail -12 "$L/compare_gqa.log"
for r in 1 2; do
  for b in h w; do
    timeout 80 bins/$b/flashlab bench --backend cuda --versions hopper --passes bwd -N 1024,2048,4096,8192,16384 -d 128 --dtype fp16,bf16 --causal no --hidden 2048 --repeats 10 --warmup 3 --pause 1000 --json "$OUT/bwd_$b$r.json" > "$L/bwd_$b$r.log" 2>&1
    echo "$b$r rc=$? $((SECONDS-t0))s"
  done
done
python3 scripts/compare_rounds.py "$OUT" --prefix bwd_ --base h --new w --version hopper | tee "$OUT/compare.txt"
gzip -f "$L"/*.log
cd "$OUT" && tar czf call1.tgz logs *.json compare.txt && rm -rf logs *.json && ls
