#!/usr/bin/env bash
# call 13 (binary 5836269): hopper's backward at d = 256 (the consumer warpgroups split the head dim): the GPU
# tests at d = 256 and the hopper matrices at d = 64 and 128, sanitizers, and bf16 d = 256 beside
# PyTorch in the same call.
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
$B/flashlab --version | head -1
timeout 330 $B/flashlab_gpu_tests --gtest_filter='HeadDim256/*:BwdKernels.*:Shapes/BwdDeterminism.*:Matrix/BwdKernels*' > "$L/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS-t0))s"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran|^\[  FAILED|ms total" "$L/gpu_tests.log" | head -n 30
grep -B3 -A12 "Failure" "$L/gpu_tests.log" | head -60
for tool in memcheck racecheck synccheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 3 $B/flashlab run --backend cuda --versions hopper,hopper-deterministic -B 1 -H 4 --heads-kv 2 --Nq 300 --Nk 200 -d 256 --causal --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_$tool.log" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|within their' "$L/san_$tool.log" | tr '\n' ' ')"
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 3 $B/flashlab run --backend cuda --versions hopper,hopper-deterministic -H 4 --heads-kv 2 --seqlens 1,130,77 -d 256 --causal --window 100,0 --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_packed_$tool.log" 2>&1
  echo "$tool packed rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|within their' "$L/san_packed_$tool.log" | tr '\n' ' ')"
done
echo "elapsed $((SECONDS-t0))s"
timeout 200 python3 scripts/compare_torch.py --flashlab $B/flashlab --versions hopper,hopper-deterministic --passes bwd -N 1024,4096,16384 -d 256 --dtype bf16 --causal no,yes --out "$OUT/compare_bwd_d256.json" > "$L/compare.log" 2>&1
echo "compare rc=$?"; sed -n '/vs torch/,$p' "$L/compare.log" | grep -v "^$" | head -n 40
echo "elapsed $((SECONDS-t0))s"
