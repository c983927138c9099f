#!/usr/bin/env bash
# call 2: the d = 256 GPU tests of every rung (the FA2 backward rungs' first run on a GPU, hopper's
# forward with O through slots under the causal mask), sanitizers, and the d = 256 sweep beside
# PyTorch; then three variants of hopper's d = 256 forward timed in the same call.
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs" build/var
tar xzf build/carry/bin.tgz -C build/device-bin
tar xzf build/carry/var.tgz -C build/var
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
$B/flashlab --version | head -1
timeout 420 $B/flashlab_gpu_tests --gtest_filter='HeadDim256/*:BwdKernels.*:Shapes/BwdDeterminism.*:Matrix/*bf16_d128_causal*' > "$L/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS-t0))s"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran|^\[  FAILED" "$L/gpu_tests.log" | head -n 30
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool $B/flashlab run --backend cuda --versions recompute,atomic-dq,deterministic-dq,hopper -B 1 -H 2 --heads-kv 1 --Nq 300 --Nk 200 -d 256 --causal --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_$tool.log" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/san_$tool.log" | head -1)"
done
grep -E "within|FAIL|did not run" "$L/san_memcheck.log" | head -4
echo "elapsed $((SECONDS-t0))s"
timeout 420 python3 scripts/compare_torch.py --flashlab $B/flashlab --versions hopper,recompute,atomic-dq,deterministic-dq -N 1024,2048,4096,8192,16384 -d 256 --dtype bf16,fp16 --causal no,yes --out "$OUT/compare_d256.json" > "$L/compare.log" 2>&1
echo "compare rc=$?"; sed -n '/^flashlab .* vs torch/,$p' "$L/compare.log" | grep -v "^$" | head -n 100
echo "elapsed $((SECONDS-t0))s"
for v in main:$B/flashlab call1_in_q:build/var/flashlab_279233b causal_nopp:build/var/flashlab_causal_nopp nopp:build/var/flashlab_nopp; do
  timeout 100 ${v#*:} bench --backend cuda --versions hopper --passes fwd -N 1024,4096,16384 -d 256 --dtype bf16 --causal no,yes --json "$OUT/var_${v%%:*}.json" > "$L/var_${v%%:*}.log" 2>&1
  echo "variant ${v%%:*} rc=$?"; grep -E "^hopper" "$L/var_${v%%:*}.log"
done
echo "elapsed $((SECONDS-t0))s"
