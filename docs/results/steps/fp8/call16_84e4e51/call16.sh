#!/usr/bin/env bash
# call 16 (binary 84e4e51): hopper-fp8 with the tree max and the staged quantization pass -- tests,
# memcheck, timing beside hopper bf16 (twice, for the spread), the pass's own time.
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
$B/flashlab --version
timeout 100 $B/flashlab_gpu_tests --gtest_filter='HopperFp8/*:CudaHopperFp8Quantization.*:GpuHopperFp8Entry.*' > "$L/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS-t0))s"; grep -E "^\[  (PASSED|FAILED)  \]" "$L/gpu_tests.log" | head -n 6
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $B/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8,hopper-fp8-per-tensor -B 1 -H 4 --heads-kv 2 -N 300 -d 128 --causal yes --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_memcheck.log" 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|within their' "$L/san_memcheck.log" | tr '\n' ' ')"
{
for rep in 1 2; do
for c in no yes; do
timeout 90 $B/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8,hopper-fp8-per-tensor -B 1 -H 16 -N 16384 -d 128 --causal $c --check sample --repeats 10 --warmup 2 --bitwise-repeats 0
done
timeout 120 $B/flashlab bench --backend cuda --versions hopper --passes fwd -N 16384 -d 128 --dtype bf16 --causal no,yes
done
timeout 90 $B/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8 -B 1 -H 32 -N 16384 -d 64 --check sample --repeats 10 --warmup 2 --bitwise-repeats 0
} > "$L/time.log" 2>&1
grep -E "^hopper.* fwd " "$L/time.log"
timeout 120 ncu --kernel-name regex:'quant_kernel|fwd_kernel' --launch-count 2 --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  $B/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8 -B 1 -H 16 -N 16384 -d 128 --check sample --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/ncu.txt" 2>&1
grep -E "quant_kernel|fwd_kernel|duration|dram" "$L/ncu.txt" | grep -v "^==" | head
echo "elapsed $((SECONDS-t0))s"
