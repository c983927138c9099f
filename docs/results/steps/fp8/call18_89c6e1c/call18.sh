#!/usr/bin/env bash
# call 18 (binary 89c6e1c, and 89c6e1c with three consumers: var/three_consumers.patch):
# hopper-fp8 with two consumer warpgroups (overlap) against three (no overlap) -- correctness of
# both on five shapes, timing twice.
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
B=build/device-bin
V=build/carry/var/flashlab_3wg
L="$OUT/logs"
t0=$SECONDS
timeout 100 $B/flashlab_gpu_tests --gtest_filter='HopperFp8/*:CudaHopperFp8Quantization.*' > "$L/gpu_tests.log" 2>&1
echo "gpu tests (two consumers) rc=$? $((SECONDS-t0))s"; grep -E "^\[  (PASSED|FAILED)  \]" "$L/gpu_tests.log" | head -n 3
f8() { timeout 60 $1 run --backend cuda --dtype fp8 --versions hopper-fp8,hopper-fp8-per-tensor --repeats 2 --warmup 1 --bitwise-repeats 1 "${@:2}" 2>&1; }
for bin in $B/flashlab $V; do
{
echo "== $bin"
f8 $bin -B 2 -H 8 --heads-kv 2 -N 1000 -d 128 --causal yes --inputs outliers
f8 $bin -B 2 -H 8 --heads-kv 2 -N 1000 -d 64 --causal yes
f8 $bin -B 1 -H 4 --Nq 300 --Nk 1000 -d 128
f8 $bin -B 1 -H 2 -N 777 -d 64 --inputs outliers
f8 $bin -B 1 -H 4 --Nq 1000 --Nk 300 -d 128 --causal yes
} > "$L/runs_$(basename $bin).log" 2>&1
echo "$bin: $(grep -c 'within their error budget' "$L/runs_$(basename $bin).log") of 5 runs within budget; $(grep -ciE 'FAIL|error:' "$L/runs_$(basename $bin).log") failure lines"
done
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $V run --backend cuda --dtype fp8 --versions hopper-fp8 -B 1 -H 4 --heads-kv 2 -N 300 -d 128 --causal yes --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_3wg.log" 2>&1
echo "3wg memcheck rc=$? $(grep -E 'ERROR SUMMARY|within their' "$L/san_3wg.log" | tr '\n' ' ')"
{
for rep in 1 2; do
for bin in $B/flashlab $V; do
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
