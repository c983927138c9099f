#!/usr/bin/env bash
# call 17 (binary 9502883): hopper's d = 256 backward as two passes (the outer-K kernel without
# dQ, then the dQ pass, bwd_dq_pass.cuh): the d = 256 GPU tests and the backward kernels' matrices,
# sanitizers dense and packed, the one-pass form (98eb91d, call 16's binary) timed beside it, and
# the backward at d = 256 beside PyTorch (only when the tests pass).
set -uo pipefail
mkdir -p build/device-bin build/old "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
tar xzf build/carry/old.tgz -C build/old
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
$B/flashlab --version | head -1
timeout 250 $B/flashlab_gpu_tests --gtest_filter='HeadDim256/*:BwdKernels.*:Shapes/BwdDeterminism.*:Matrix/BwdKernels*' > "$L/gpu_tests.log" 2>&1
rc=$?
echo "gpu tests rc=$rc $((SECONDS-t0))s"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran|^\[  FAILED" "$L/gpu_tests.log" | head -n 30
grep -B3 -A12 "Failure" "$L/gpu_tests.log" | head -40
for v in old:build/old/flashlab new:$B/flashlab; do
  timeout 60 ${v#*:} bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -N 4096,16384 -d 256 --dtype bf16 --causal no,yes --json "$OUT/bench_${v%%:*}.json" > "$L/bench_${v%%:*}.log" 2>&1
  echo "bench ${v%%:*} rc=$? $((SECONDS-t0))s"; grep -E "^hopper" "$L/bench_${v%%:*}.log"
done
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 $B/flashlab run --backend cuda --versions hopper,hopper-deterministic -B 1 -H 4 --heads-kv 2 --Nq 300 --Nk 200 -d 256 --causal --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_$tool.log" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|within their' "$L/san_$tool.log" | tr '\n' ' ')"
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 $B/flashlab run --backend cuda --versions hopper,hopper-deterministic -H 4 --heads-kv 2 --seqlens 1,130,77 -d 256 --causal --window 100,0 --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_packed_$tool.log" 2>&1
  echo "$tool packed rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|within their' "$L/san_packed_$tool.log" | tr '\n' ' ')"
done
echo "elapsed $((SECONDS-t0))s"
if [ $rc -eq 0 ]; then
  timeout 200 python3 scripts/compare_torch.py --flashlab $B/flashlab --versions hopper,hopper-deterministic --passes bwd -N 1024,2048,4096,8192,16384 -d 256 --dtype bf16,fp16 --causal no,yes --out "$OUT/compare_bwd_d256.json" > "$L/compare.log" 2>&1
  echo "compare rc=$?"; sed -n '/vs torch/,$p' "$L/compare.log" | grep -v "^$" | grep -E "hopper|geometric|vs flash|version" | head -n 60
fi
echo "elapsed $((SECONDS-t0))s"
