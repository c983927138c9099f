#!/usr/bin/env bash
# call 12 (binary 2b43817): hopper-fp8's pipelined kernel (tests, reference runs, SASS,
# sanitizers, timing beside hopper bf16), the d = 256 GPU matrix after its test fix.
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
source scripts/cupti_env.sh 2>/dev/null
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
$B/flashlab --version
timeout 200 $B/flashlab_gpu_tests --gtest_filter='HopperFp8/*:CudaHopperFp8Quantization.*:GpuHopperFp8Entry.*:HeadDim256/*' > "$L/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS-t0))s"
grep -E "^\[  (PASSED|FAILED)  \]|FAILED TESTS" "$L/gpu_tests.log" | head -n 30
grep -B2 -A10 -m2 "Failure" "$L/gpu_tests.log" | head -n 40
f8() { timeout 60 $B/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8,hopper-fp8-no-hadamard,hopper-fp8-per-tensor --repeats 3 --warmup 1 --bitwise-repeats 1 "$@" 2>&1; }
{
echo "== d128 causal outliers"; f8 -B 2 -H 8 --heads-kv 2 -N 1000 -d 128 --causal yes --inputs outliers
echo "== d64 causal"; f8 -B 2 -H 8 --heads-kv 2 -N 1000 -d 64 --causal yes
echo "== d128 Nq!=Nk"; f8 -B 1 -H 4 --Nq 300 --Nk 1000 -d 128
echo "== d64 ragged outliers"; f8 -B 1 -H 2 -N 777 -d 64 --inputs outliers
echo "== d128 causal Nq>Nk"; f8 -B 1 -H 4 --Nq 1000 --Nk 300 -d 128 --causal yes
} > "$L/fp8_runs.log" 2>&1
grep -E "^== |^hopper-fp8|within|FAIL|rror" "$L/fp8_runs.log" | head -n 60
cuobjdump --dump-sass $B/flashlab > "$L/sass.txt" 2>&1
awk '/Function : .*hopper_fp8.*fwd_kernel/{f=1;print;next} /Function : /{f=0} f' "$L/sass.txt" > "$L/sass_fp8_fwd.txt"
echo "fp8 fwd SASS: $(wc -l < "$L/sass_fp8_fwd.txt") lines; GMMA forms:"
grep -oE '[A-Z]*GMMA\.[A-Z0-9.]*' "$L/sass_fp8_fwd.txt" | sort | uniq -c
echo "HMMA in fp8 fwd: $(grep -c 'HMMA' "$L/sass_fp8_fwd.txt")  local mem (LDL/STL): $(grep -cE 'LDL|STL' "$L/sass_fp8_fwd.txt")"
gzip -9 "$L/sass_fp8_fwd.txt"; rm -f "$L/sass.txt"
for tool in memcheck racecheck synccheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 $B/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8,hopper-fp8-per-tensor -B 1 -H 4 --heads-kv 2 -N 300 -d 128 --causal yes --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_fp8_$tool.log" 2>&1
  echo "fp8 $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|within their' "$L/san_fp8_$tool.log" | tr '\n' ' ')"
done
{
for c in no yes; do
timeout 90 $B/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8,hopper-fp8-no-hadamard,hopper-fp8-per-tensor -B 1 -H 16 -N 16384 -d 128 --causal $c --check sample --repeats 10 --warmup 2 --bitwise-repeats 0
done
timeout 120 $B/flashlab bench --backend cuda --versions hopper --passes fwd -N 16384 -d 64,128 --dtype bf16 --causal no,yes
timeout 90 $B/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8 -B 1 -H 32 -N 16384 -d 64 --check sample --repeats 10 --warmup 2 --bitwise-repeats 0
} > "$L/fp8_time.log" 2>&1
echo "timing rc=$?"; grep -E "TFLOP|ms|within|FAIL|rror" "$L/fp8_time.log" | head -n 40
echo "elapsed $((SECONDS-t0))s"
