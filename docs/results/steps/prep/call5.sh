#!/usr/bin/env bash
# Call 5: the packed preprocess by (token, head) groups, the heads fastest, O, dO and LSE loaded
# first and the sequence searched after them, the padding rows by blocks of their own (f = main
# with loads_first.patch) against main (d): GPU tests of packed batches and memcheck on f (with a
# sequence of length 0), then both binaries' hopper backward timed alternately with --pause 1000,
# three rounds, each with its GPU timeline. Needs build/carry/d.tgz, f.tgz (scripts/device_build.sh
# of each tree, build/device-bin packed) and build/carry/timeline.so (scripts/timeline/).
set -u
for b in d f; do mkdir -p bins/$b; tar xzf build/carry/$b.tgz -C bins/$b; done
source scripts/cupti_env.sh
TL=$PWD/build/carry/timeline.so
R=$OUT/r; mkdir -p $R; t0=$SECONDS
timeout 150 bins/f/flashlab_gpu_tests --gtest_color=no --gtest_filter='Packed/*:HeadDim256/CudaPackedD256.*' > $R/tests.log 2>&1
echo "tests rc=$? $((SECONDS-t0))s $(grep -E '^\[  (PASSED|FAILED)  \]' $R/tests.log | head -5 | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests.log | head -5
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 99 bins/f/flashlab run --backend cuda --versions hopper,atomic-dq,hopper-deterministic -H 4 --heads-kv 2 --seqlens 1,0,130,300,77 -d 128 --repeats 1 --warmup 0 --bitwise-repeats 0 > $R/memcheck.log 2>&1
echo "memcheck rc=$? $((SECONDS-t0))s $(grep -h 'ERROR SUMMARY' $R/memcheck.log | tail -1)"
for round in 1 2 3; do
  for b in d f; do
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
cd $OUT && tar czf call5.tgz -C $R . && ls
