#!/usr/bin/env bash
# call 17 (binary bc8efe9, and bc8efe9 with the consumers' turns off: var/no_pingpong.patch):
# hopper-fp8 with O's rescale in the turn -- tests, and timing of turns against none, twice.
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
$B/flashlab --version
timeout 100 $B/flashlab_gpu_tests --gtest_filter='HopperFp8/*:CudaHopperFp8Quantization.*' > "$L/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS-t0))s"; grep -E "^\[  (PASSED|FAILED)  \]" "$L/gpu_tests.log" | head -n 3
{
for rep in 1 2; do
for bin in $B/flashlab build/carry/var/flashlab_nopp; do
echo "== $bin"
for c in no yes; do
timeout 90 $bin run --backend cuda --dtype fp8 --versions hopper-fp8 -B 1 -H 16 -N 16384 -d 128 --causal $c --check sample --repeats 10 --warmup 2 --bitwise-repeats 0
done
timeout 90 $bin run --backend cuda --dtype fp8 --versions hopper-fp8 -B 1 -H 32 -N 16384 -d 64 --check sample --repeats 10 --warmup 2 --bitwise-repeats 0
done
done
timeout 120 $B/flashlab bench --backend cuda --versions hopper --passes fwd -N 16384 -d 64,128 --dtype bf16 --causal no,yes
} > "$L/time.log" 2>&1
grep -E "^== |^hopper.* fwd " "$L/time.log"
echo "elapsed $((SECONDS-t0))s"
