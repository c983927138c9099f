#!/usr/bin/env bash
# call 16 (binary 98eb91d, whose kernels are 8fed7b6's): hopper's d = 256 backward with the
# deterministic turn's fences: the backward kernels' d = 256 matrix, 50 bitwise runs, and the four
# bf16 points of call 15; then the machine code of every kernel of the Hopper rungs: HGMMA, HMMA
# and local-memory instructions (the FP8 kernels' products are QGMMA, which this count missed).
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
$B/flashlab --version | head -1
timeout 80 $B/flashlab_gpu_tests --gtest_filter='HeadDim256/BwdKernelsD256.*:Shapes/BwdDeterminism.*' > "$L/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS-t0))s"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran|^\[  FAILED" "$L/gpu_tests.log" | head -n 10
timeout 30 $B/flashlab bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -N 4096,16384 -d 256 --dtype bf16 --causal no,yes --json "$OUT/bench_d256.json" > "$L/bench.log" 2>&1
echo "bench rc=$? $((SECONDS-t0))s"; grep -E "^hopper" "$L/bench.log"
bash scripts/sass_counts.sh $B/flashlab 'v_06_hopper|v_08_hopper' > "$L/sass_counts.txt" 2>&1
echo "sass rc=$? kernels=$(wc -l < "$L/sass_counts.txt")"
awk '$2 == 0 || $3 > 0 || $4 > 0' "$L/sass_counts.txt" | cut -c1-200
