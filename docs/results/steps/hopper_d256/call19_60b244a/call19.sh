#!/usr/bin/env bash
# call 19 (binary 60b244a, whose kernels are ecef41e's): hopper's d = 256 outer-K kernel with each
# step's score product issued behind the step before's dV and dK: the d = 256 GPU tests (every
# rung at d = 256, 50 bitwise runs), sanitizers dense and packed, and call 18's binary (ccfee02)
# timed beside it, two rounds each.
set -uo pipefail
mkdir -p build/device-bin build/old "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
tar xzf build/carry/old.tgz -C build/old
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
$B/flashlab --version | head -1
timeout 150 $B/flashlab_gpu_tests --gtest_filter='HeadDim256/*:Shapes/BwdDeterminism.*' > "$L/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS-t0))s"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran|^\[  FAILED" "$L/gpu_tests.log" | head -n 30
for v in old:build/old/flashlab new:$B/flashlab old2:build/old/flashlab new2:$B/flashlab; do
  timeout 30 ${v#*:} bench --backend cuda --versions hopper --passes bwd -N 4096,16384 -d 256 --dtype bf16 --causal no,yes --json "$OUT/bench_${v%%:*}.json" > "$L/bench_${v%%:*}.log" 2>&1
  echo "bench ${v%%:*} rc=$? $((SECONDS-t0))s"; grep -E "^hopper" "$L/bench_${v%%:*}.log"
done
for tool in memcheck racecheck synccheck; do
  timeout 30 compute-sanitizer --tool $tool --error-exitcode 3 $B/flashlab run --backend cuda --versions hopper -B 1 -H 4 --heads-kv 2 --Nq 300 --Nk 200 -d 256 --causal --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_$tool.log" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|within their' "$L/san_$tool.log" | tr '\n' ' ')"
  timeout 30 compute-sanitizer --tool $tool --error-exitcode 3 $B/flashlab run --backend cuda --versions hopper -H 4 --heads-kv 2 --seqlens 1,130,77 -d 256 --causal --window 100,0 --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_packed_$tool.log" 2>&1
  echo "$tool packed rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|within their' "$L/san_packed_$tool.log" | tr '\n' ' ')"
done
echo "elapsed $((SECONDS-t0))s"
