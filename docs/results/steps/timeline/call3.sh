#!/usr/bin/env bash
# Call 3: the packed batch's preprocess and convert in token-major and accumulator order (n.tgz)
# against main's (m.tgz): GPU tests of packed batches and memcheck on the new binary, then both
# binaries' backward passes timed alternately, two rounds, each with its GPU timeline.
set -u
for b in m n; do mkdir -p bins/$b; tar xzf build/carry/$b.tgz -C bins/$b; done
source scripts/cupti_env.sh
TL=$PWD/bins/timeline.so
g++ -std=c++17 -O2 -shared -fPIC scripts/timeline/timeline.cpp -o $TL -I/usr/local/cuda/include \
  -I/usr/local/cuda/extras/CUPTI/include -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 \
  -lcupti || cp build/carry/timeline.so $TL
R=$OUT/r; mkdir -p $R
timeout 300 bins/n/flashlab_gpu_tests --gtest_color=no --gtest_filter='Packed/*:HeadDim256/CudaPackedD256.*' > $R/tests.log 2>&1
echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $R/tests.log | head -5 | tr '\n' ' ')"
timeout 240 compute-sanitizer --tool memcheck --error-exitcode 99 bins/n/flashlab_gpu_tests --gtest_color=no \
  --gtest_filter='Packed/CudaPacked.*bf16_d64_causal_H8Hkv2*:Packed/CudaPacked.*bf16_d128_full_H4Hkv1*' > $R/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -h 'ERROR SUMMARY' $R/memcheck.log | tail -1) $(grep -E '^\[  PASSED  \]' $R/memcheck.log)"
for round in 1 2; do
  for b in m n; do
    for v in hopper hopper-deterministic; do
      tag=${v}_${b}_$round
      FLASHLAB_TIMELINE=$R/$tag.csv CUDA_INJECTION64_PATH=$TL timeout 120 bins/$b/flashlab bench \
        --backend cuda --dtype bf16 -d 128 --versions $v --passes bwd --causal yes --varlen 24,128,4096 \
        --repeats 10 --warmup 2 > $R/$tag.log 2>&1
      python3 scripts/timeline/gaps.py $R/$tag.csv --last 1 > $R/$tag.gaps 2>&1
      echo "$tag $(grep -E "^$v " $R/$tag.log | tr -s ' ' | cut -d' ' -f9-13)"
      grep -E "preprocess|convert|bwd_kernel" $R/$tag.gaps | grep median | cut -c1-110
    done
  done
done
tar czf $OUT/call3.tgz -C $R .
