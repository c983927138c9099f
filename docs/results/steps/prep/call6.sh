#!/usr/bin/env bash
# Call 6: the packed convert with one accumulator loading first and searching after (c = main with
# loads_first.patch and the convert's change) against main with loads_first.patch alone (f): GPU
# tests of packed batches and memcheck on c, a dense check of every backward version on c, then
# both binaries' hopper backward timed alternately with --pause 1000, three rounds, each with its
# GPU timeline. Needs build/carry/c.tgz, f.tgz and timeline.so (scripts/timeline/).
set -u
for b in f c; do mkdir -p bins/$b; tar xzf build/carry/$b.tgz -C bins/$b; done
source scripts/cupti_env.sh
TL=$PWD/build/carry/timeline.so
R=$OUT/r; mkdir -p $R; t0=$SECONDS
timeout 150 bins/c/flashlab_gpu_tests --gtest_color=no --gtest_filter='Packed/*:HeadDim256/CudaPackedD256.*' > $R/tests.log 2>&1
echo "tests rc=$? $((SECONDS-t0))s $(grep -E '^\[  (PASSED|FAILED)  \]' $R/tests.log | head -5 | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests.log | head -5
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 99 bins/c/flashlab run --backend cuda --versions hopper,atomic-dq,hopper-deterministic -H 4 --heads-kv 2 --seqlens 1,0,130,300,77 -d 128 --repeats 1 --warmup 0 --bitwise-repeats 0 > $R/memcheck.log 2>&1
echo "memcheck rc=$? $((SECONDS-t0))s $(grep -h 'ERROR SUMMARY' $R/memcheck.log | tail -1)"
timeout 60 bins/c/flashlab run --backend cuda --versions atomic-dq,deterministic-dq,hopper,hopper-deterministic -B 2 -H 4 -N 1000 -d 128 --causal > $R/dense.log 2>&1
echo "dense rc=$? $((SECONDS-t0))s $(grep -cE 'FAIL' $R/dense.log) FAIL lines"
for round in 1 2 3; do
  for b in f c; do
    tag=hopper_${b}_$round
    FLASHLAB_TIMELINE=$R/$tag.csv CUDA_INJECTION64_PATH=$TL timeout 120 bins/$b/flashlab bench \
      --backend cuda --dtype bf16 -d 128 --versions hopper --passes bwd --causal yes --varlen 24,128,4096 \
      --repeats 10 --warmup 3 --pause 1000 --json $R/$tag.json > $R/$tag.log 2>&1
    python3 scripts/timeline/gaps.py $R/$tag.csv --last 1 > $R/$tag.gaps 2>&1
    echo "$tag $((SECONDS-t0))s $(grep -E "^hopper " $R/$tag.log | tr -s ' ' | cut -d' ' -f9-16)"
    grep -E "preprocess|convert|bwd_kernel" $R/$tag.gaps | grep median | cut -c1-110
  done
done
gzip -f $R/*.csv $R/*.log
cd $OUT && tar czf call6.tgz -C $R . && rm -rf $R && ls
