#!/usr/bin/env bash
# call 15 (binary 0f8927a): hopper-fp8 with the softmax kept ahead of the P V wait -- tests, timing
# beside hopper bf16, and where the waits sit in the SASS of both forwards.
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
$B/flashlab --version
timeout 100 $B/flashlab_gpu_tests --gtest_filter='HopperFp8/*:CudaHopperFp8Quantization.*' > "$L/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS-t0))s"; grep -E "^\[  (PASSED|FAILED)  \]" "$L/gpu_tests.log" | head -n 6
{
for c in no yes; do
timeout 90 $B/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8,hopper-fp8-per-tensor -B 1 -H 16 -N 16384 -d 128 --causal $c --check sample --repeats 10 --warmup 2 --bitwise-repeats 0
done
timeout 90 $B/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8 -B 1 -H 32 -N 16384 -d 64 --check sample --repeats 10 --warmup 2 --bitwise-repeats 0
timeout 120 $B/flashlab bench --backend cuda --versions hopper --passes fwd -N 16384 -d 64,128 --dtype bf16 --causal no,yes
} > "$L/time.log" 2>&1
grep -E "^hopper.* fwd " "$L/time.log"
cuobjdump --dump-sass $B/flashlab > "$L/sass.txt" 2>&1
for k in 'fp8_fwd10fwd_kernelILi128ELb0' 'hopper_fwd.*fwd_kernelI13__nv_bfloat16Li128ELb0ELj255'; do
  awk -v pat="$k" '$0 ~ "Function : .*"pat {f=1; print; next} /Function : /{f=0} f' "$L/sass.txt" | grep -nE "Function|DEPBAR|MUFU.EX2|QGMMA|HGMMA|BAR.SYNC|BAR.ARV" | awk '{print $1, $2, $3, $4}' | uniq -c -f2 | head -n 60
done
grep -oE "Function : \S*hopper_fwd\S*" "$L/sass.txt" | head -n 8
rm -f "$L/sass.txt"
echo "elapsed $((SECONDS-t0))s"
