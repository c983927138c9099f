#!/usr/bin/env bash
# Call 8: main 62aeebd (h: b90d502's review changes over 332b0e7 with two more packed GPU shapes,
# and tiled's d = 128 causal kernel of steps/tiled_causal/call6.sh; prepared for b90d502): the
# packed GPU tests (B = 1 over 3 heads; a batch whose last sequence is empty), memcheck of the
# three packed backward kernels on a batch ending in an empty sequence, tiled's causal GPU tests
# of the dense matrix (its dispatch now a switch). Needs build/carry/h.tgz.
set -u
mkdir -p bins/h; tar xzf build/carry/h.tgz -C bins/h
source scripts/cupti_env.sh
R=$OUT/r; mkdir -p $R; t0=$SECONDS
timeout 100 bins/h/flashlab_gpu_tests --gtest_color=no --gtest_filter='Packed/*:HeadDim256/CudaPackedD256.*' > $R/tests_packed.log 2>&1
echo "packed tests rc=$? $((SECONDS-t0))s $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' $R/tests_packed.log | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_packed.log | head -5
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 99 bins/h/flashlab run --backend cuda --versions tiled,hopper,atomic-dq,hopper-deterministic -H 4 --heads-kv 2 --seqlens 5,130,0 -d 128 --causal --repeats 1 --warmup 0 --bitwise-repeats 0 > $R/memcheck.log 2>&1
echo "memcheck rc=$? $((SECONDS-t0))s $(grep -h 'ERROR SUMMARY' $R/memcheck.log | tail -1)"
timeout 40 bins/h/flashlab_gpu_tests --gtest_color=no --gtest_filter='Matrix/CudaVersions.*causal*' > $R/tests_causal.log 2>&1
echo "causal tests rc=$? $((SECONDS-t0))s $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' $R/tests_causal.log | tr '\n' ' ')"
gzip -f $R/*.log
cd $OUT && tar czf call8.tgz -C $R . && rm -rf $R && ls
