#!/usr/bin/env bash
# call 15 (binary 65eea93): hopper's backward at d = 256 with dQ by bulk reduce-adds through shared
# memory: the d = 256 GPU tests and the backward kernels' matrices, sanitizers dense and packed,
# the red.global.add form (5836269) timed beside it, and every rung at d = 256 beside PyTorch.
set -uo pipefail
mkdir -p build/device-bin build/var "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
tar xzf build/carry/var.tgz -C build/var
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
$B/flashlab --version | head -1
timeout 250 $B/flashlab_gpu_tests --gtest_filter='HeadDim256/*:BwdKernels.*:Shapes/BwdDeterminism.*:Matrix/BwdKernels*' > "$L/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS-t0))s"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran|^\[  FAILED|ms total" "$L/gpu_tests.log" | head -n 30
grep -B3 -A12 "Failure" "$L/gpu_tests.log" | head -40
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 $B/flashlab run --backend cuda --versions hopper,hopper-deterministic -B 1 -H 4 --heads-kv 2 --Nq 300 --Nk 200 -d 256 --causal --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_$tool.log" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|within their' "$L/san_$tool.log" | tr '\n' ' ')"
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 $B/flashlab run --backend cuda --versions hopper,hopper-deterministic -H 4 --heads-kv 2 --seqlens 1,130,77 -d 256 --causal --window 100,0 --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_packed_$tool.log" 2>&1
  echo "$tool packed rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|within their' "$L/san_packed_$tool.log" | tr '\n' ' ')"
done
echo "elapsed $((SECONDS-t0))s"
for v in red:build/var/flashlab_red bulk:$B/flashlab; do
  timeout 60 ${v#*:} bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -N 4096,16384 -d 256 --dtype bf16 --causal no,yes --json "$OUT/var_${v%%:*}.json" > "$L/var_${v%%:*}.log" 2>&1
  echo "variant ${v%%:*} rc=$? $((SECONDS-t0))s"; grep -E "^hopper" "$L/var_${v%%:*}.log"
done
timeout 290 python3 scripts/compare_torch.py --flashlab $B/flashlab --versions hopper,hopper-deterministic,atomic-dq -N 1024,2048,4096,8192,16384 -d 256 --dtype bf16,fp16 --causal no,yes --out "$OUT/compare_d256.json" > "$L/compare.log" 2>&1
echo "compare rc=$?"; sed -n '/vs torch/,$p' "$L/compare.log" | grep -v "^$" | grep -E "hopper|geometric|vs flash|version" | head -n 60
echo "elapsed $((SECONDS-t0))s"
