#!/usr/bin/env bash
# call 1 (binary 2a...): the Hopper forward at d = 256 -- its GPU tests, sanitizers, SASS, and speed
# beside PyTorch's cuDNN and FA2 backends.
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
$B/flashlab --version | head -2
timeout 300 $B/flashlab_gpu_tests --gtest_filter='HeadDim256/*:PackedHeadDim256/*:BwdKernels.Reject*:Matrix/*bf16_d128*' > "$L/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS-t0))s"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran" "$L/gpu_tests.log" | head -n 12
grep -E "^\[hopper\].*d256" -A3 "$L/gpu_tests.log" | head -12
for tool in memcheck racecheck synccheck; do
  timeout 120 compute-sanitizer --tool $tool $B/flashlab run --backend cuda --versions hopper -B 1 -H 2 --heads-kv 1 -N 300 -d 256 --causal --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_$tool.log" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/san_$tool.log" | head -1)"
done
grep -E "did not run|within|FAIL" "$L/san_memcheck.log" | head -3
cuobjdump -sass $B/flashlab > "$L/sass.txt" 2>/dev/null
bash scripts/sass_counts.sh $B/flashlab 'hopper_fwd.*fwd_kernel' > "$L/sass_counts.txt" 2>&1
grep "256" "$L/sass_counts.txt" | cut -c1-160
echo "HMMA in hopper fwd kernels: $(awk '/Function :/{f=($3 ~ /hopper_fwd/)} f && /HMMA/' "$L/sass.txt" | wc -l)"
echo "elapsed $((SECONDS-t0))s"
timeout 400 python3 scripts/compare_torch.py --flashlab $B/flashlab --versions hopper --passes fwd -N 1024,2048,4096,8192,16384 -d 256 --dtype bf16,fp16 --causal no,yes --out "$OUT/compare_d256_fwd.json" > "$L/compare.log" 2>&1
echo "compare rc=$?"; tail -n 32 "$L/compare.log"
echo "elapsed $((SECONDS-t0))s"
