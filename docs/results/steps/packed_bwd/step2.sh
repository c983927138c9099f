#!/bin/bash
# Step 2 on the device: the persistent backward (dense and packed), checked and measured against
# step 1's binary and the base (e8b51dc).
set -uo pipefail
OUT=${OUT:-out/device}; mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p /tmp/new /tmp/base /tmp/s1
tar -xzf build/carry/new.tgz -C /tmp/new && tar -xzf build/carry/base.tgz -C /tmp/base && tar -xzf build/carry/step1.tgz -C /tmp/s1 || exit 1
N=/tmp/new/flashlab; T=/tmp/new/flashlab_gpu_tests; B=/tmp/base/flashlab; S1=/tmp/s1/flashlab
P1="-H 4 --heads-kv 2 -d 64 --seqlens 0,1,17,130,300 --seqlens-k 5,0,40,130,290 --causal yes --dtype bf16"
P2="-H 8 --heads-kv 1 -d 128 --seqlens 3,200,0,65 --seqlens-k 3,190,7,0 --window 64,0 --dtype fp16"
P3="-B 2 -H 4 --heads-kv 2 --Nq 190 --Nk 300 -d 64 --causal yes --dtype bf16"
P4="-B 1 -H 2 --Nq 300 --Nk 17 -d 128 --window 40,20 --dtype bf16"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
echo "== tests"
timeout 200 $T --gtest_color=no --gtest_filter='Packed/*:Matrix/*bf16*:Masks/*:Shapes/*:Axes/*fp16_d64*' > $OUT/tests.log 2>&1
echo "rc=$?"; grep -E "^\[  PASSED|^\[  FAILED|tests ran" $OUT/tests.log | head -20
echo "== run: packed against the CPU's fp64 reference"
timeout 60 $N run --backend cuda --versions hopper,hopper-deterministic --dtype bf16 -H 4 --heads-kv 2 -d 128 --seqlens 1,17,128,1000,4097 --causal yes 2>&1 | grep -E "^hopper .*(fwd|bwd)|^hopper-det.*bwd|^- All|FAIL"
echo "== sanitizers"
for tool in memcheck synccheck; do for P in "$P1" "$P2" "$P3" "$P4"; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 $N run --backend cuda --versions hopper,hopper-deterministic $P 2>&1 | grep -E "ERROR SUMMARY|FAIL" ; done; done
echo "== determinism (50 repeats, packed)"
timeout 60 $N run --backend cuda --versions hopper-deterministic --bitwise-repeats 50 -H 8 --heads-kv 2 -d 128 --seqlens 300,1,4097,0,777 --causal yes --dtype bf16 --json $OUT/det50.json 2>&1 | grep -E "^hopper-det.*bwd|^- All|FAIL"
echo "== bench varlen (new, step1, base, new)"
for bin in $N $S1 $B $N; do timeout 60 $bin bench --backend cuda --versions hopper,hopper-deterministic --passes bwd --dtype bf16 -d 128 --hidden 2048 --causal yes --varlen 24,128,4096 --format csv 2>&1 | grep -E "^hopper"; done
echo "== dense A/B (base, new, base, new)"
for bin in $B $N $B $N; do echo "-- $bin"; timeout 90 $bin bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -N 2048,4096,16384 -d 64,128 --dtype bf16 --causal no,yes --format csv 2>&1 | grep -E "^hopper"; done
echo "== SASS (instructions, HGMMA, local) bwd kernels, new"
bash scripts/sass_counts.sh $N bwd_kernel
