#!/usr/bin/env bash
# call 22 (binary 8264eaf): after the shared-memory opt-in moved into FP8 and split-kv -- their GPU
# tests, and the FP8 forward's speed beside hopper bf16 as JSON.
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
$B/flashlab --version
timeout 120 $B/flashlab_gpu_tests --gtest_filter='HopperFp8/*:CudaHopperFp8Quantization.*:SplitKv/*:GpuSplitKvEntry.*' > "$L/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS-t0))s"; grep -E "^\[  (PASSED|FAILED)  \]" "$L/gpu_tests.log" | head -n 4
timeout 90 $B/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8,hopper-fp8-no-hadamard,hopper-fp8-per-tensor -B 1 -H 16 -N 16384 -d 128 --check sample --repeats 10 --warmup 2 --bitwise-repeats 0 --json "$OUT/run_fp8_d128_n16k.json" > "$L/run_fp8.log" 2>&1
echo "fp8 run rc=$?"; grep -E "^hopper.* fwd |within" "$L/run_fp8.log"
timeout 90 $B/flashlab bench --backend cuda --versions hopper --passes fwd -N 16384 -d 128 --dtype bf16 --causal no --json "$OUT/bench_hopper_bf16_d128_n16k.json" > "$L/bench.log" 2>&1
echo "bench rc=$?"; grep -E "^hopper" "$L/bench.log"
echo "elapsed $((SECONDS-t0))s"
