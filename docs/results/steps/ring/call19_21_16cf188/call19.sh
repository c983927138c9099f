#!/usr/bin/env bash
# call 19 (binary 16cf188): the ring through NCCL at R = 1 (tests, memcheck, one run beside
# hopper), the fp8 budget's floor on the GPU matrix, lab fp8's GPU half, and the matrices the
# shared-memory opt-in change touches (tiled, hopper, the FA2 backward, packed, d = 256).
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
$B/flashlab --version
OUT="$OUT/ring" BUDGET=200 STAGES="info tests memcheck run" scripts/device_ring.sh 2>&1 | sed -n '/== summary/,$p'
echo "ring done $((SECONDS-t0))s"
timeout 200 $B/flashlab_gpu_tests --gtest_filter='HopperFp8/*:CudaHopperFp8Quantization.*:GpuHopperFp8Entry.*:GpuLabs.*:Matrix/CudaVersions.*:Matrix/BwdKernels.*:HeadDim256/*:Packed/*:CudaRunner.*' > "$L/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS-t0))s"; grep -E "^\[  (PASSED|FAILED)  \]|tests from .* ran" "$L/gpu_tests.log" | head -n 12
grep -B2 -A8 -m2 "Failure" "$L/gpu_tests.log" | head -n 30
for c in no yes; do
timeout 60 $B/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8,hopper-fp8-no-hadamard,hopper-fp8-per-tensor -B 1 -H 1 --Nq 1 --Nk 129 -d 64 --inputs outliers --seed 5113 --causal $c --repeats 1 --warmup 0 > "$L/fp8_5113_$c.log" 2>&1
echo "5113 causal=$c rc=$? $(grep -E 'within their|FAIL' "$L/fp8_5113_$c.log" | tr '\n' ' ')"
done
timeout 150 $B/flashlab lab fp8 --backend cuda --json "$OUT/lab_fp8_cuda.json" > "$L/lab_fp8.log" 2>&1
echo "lab fp8 rc=$? $((SECONDS-t0))s"; cat "$L/lab_fp8.log" | head -n 60
timeout 60 $B/flashlab lab fp8 --backend cuda --lang zh > "$L/lab_fp8_zh.log" 2>&1; echo "lab fp8 zh rc=$?"
$B/flashlab plot "$OUT/lab_fp8_cuda.json" -o "$OUT/lab_fp8_h200.svg"; echo "plot rc=$?"
echo "elapsed $((SECONDS-t0))s"
