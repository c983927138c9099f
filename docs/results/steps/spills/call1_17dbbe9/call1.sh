#!/usr/bin/env bash
# call 1: GPU tests and sanitizers of binary A (the spill-free backward), a determinism check of B
set -uo pipefail
mkdir -p bins "$OUT/logs"
for b in head a b; do [ -f build/carry/$b.tgz ] && { mkdir -p bins/$b; tar xzf build/carry/$b.tgz -C bins/$b; }; done
L="$OUT/logs"; t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
A=bins/a
timeout 330 $A/flashlab_gpu_tests --gtest_color=no --gtest_filter='Matrix/BwdKernels.*:Packed/*:Axes/*:Shapes/BwdDeterminism.*:Masks/CudaDeterminism.*:BwdKernels.*:CudaDeterminism.*' > "$L/tests_a.log" 2>&1
echo "tests A rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_a.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]" "$L/tests_a.log" | head -n 10
[ -d bins/b ] && timeout 60 bins/b/flashlab_gpu_tests --gtest_color=no --gtest_filter='Shapes/BwdDeterminism.*:*BwdKernels*d128*' > "$L/tests_b.log" 2>&1
echo "tests B rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_b.log" | tr '\n' ' ')"
for tool in memcheck synccheck racecheck; do
  for d in 64 128; do
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 $A/flashlab run --backend cuda --versions hopper,hopper-deterministic --seqlens 1,130,77,300 -H 4 --heads-kv 2 -d $d --dtype bf16 --causal --window 100,0 --repeats 1 --warmup 0 > "$L/san_${tool}_packed_d$d.log" 2>&1
    echo "$tool packed d=$d rc=$? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$L/san_${tool}_packed_d$d.log" | tail -1)"
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 $A/flashlab run --backend cuda --versions hopper,hopper-deterministic -B 1 -H 4 --heads-kv 2 --Nq 300 --Nk 333 -d $d --dtype fp16 --causal --repeats 1 --warmup 0 > "$L/san_${tool}_dense_d$d.log" 2>&1
    echo "$tool dense d=$d rc=$? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$L/san_${tool}_dense_d$d.log" | tail -1)"
  done
  [ $((SECONDS-t0)) -gt 520 ] && break
done
echo "elapsed $((SECONDS-t0))s"
cd "$OUT" && tar czf call1.tgz logs && rm -rf logs
