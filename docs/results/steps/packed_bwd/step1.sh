#!/bin/bash
# Step 1 on the device: the packed Hopper backward, checked and measured; dense A/B against the base.
set -uo pipefail
OUT=${OUT:-out/device}; mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p /tmp/new /tmp/base
tar -xzf build/carry/new.tgz -C /tmp/new && tar -xzf build/carry/base.tgz -C /tmp/base || exit 1
N=/tmp/new/flashlab; T=/tmp/new/flashlab_gpu_tests; B=/tmp/base/flashlab
P1="-H 4 --heads-kv 2 -d 64 --seqlens 0,1,17,130,300 --seqlens-k 5,0,40,130,290 --causal yes --dtype bf16"
P2="-H 8 --heads-kv 1 -d 128 --seqlens 3,200,0,65 --seqlens-k 3,190,7,0 --window 64,0 --dtype fp16"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
echo "== tests"
timeout 240 $T --gtest_color=no --gtest_filter='Packed/*:Matrix/*bf16_d128*:Matrix/*fp16_d64*:Axes/*bf16_d128*:Masks/*' > $OUT/tests.log 2>&1
echo "rc=$?"; grep -E "^\[  PASSED|^\[  FAILED|tests ran" $OUT/tests.log
echo "== run: packed against the CPU's fp64 reference"
$N run --backend cuda --versions hopper,hopper-deterministic --dtype bf16 -H 4 --heads-kv 2 -d 128 --seqlens 1,17,128,1000,4097 --causal yes 2>&1 | grep -E "^hopper|^- |FAIL"
$N run --backend cuda --versions hopper,hopper-deterministic $P2 2>&1 | grep -E "^hopper|^- |FAIL"
echo "== sanitizers"
for tool in memcheck synccheck; do for P in "$P1" "$P2"; do
  compute-sanitizer --tool $tool --error-exitcode 99 $N run --backend cuda --versions hopper,hopper-deterministic $P 2>&1 | grep -E "ERROR SUMMARY|^- All|FAIL" ; done; done
echo "== determinism"
$N run --backend cuda --versions hopper-deterministic --bitwise-repeats 50 -H 8 --heads-kv 2 -d 128 --seqlens 300,1,4097,0,777 --causal yes --dtype bf16 --json $OUT/det50.json 2>&1 | grep -iE "bitwise|^- All|FAIL"
echo "== bench varlen (new, base, new)"
for bin in $N $B $N; do $bin bench --backend cuda --versions hopper,hopper-deterministic --passes bwd --dtype bf16 -d 128 --hidden 2048 --causal yes --varlen 24,128,4096 --format csv 2>&1 | grep -E "^hopper"; done
echo "== dense A/B (base, new, base, new)"
for bin in $B $N $B $N; do echo "-- $bin"; $bin bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -N 4096,16384 -d 64,128 --dtype bf16 --causal no,yes --format csv 2>&1 | grep -E "^hopper"; done
echo "== SASS (instructions, HGMMA, local) dense bwd: base, new"
bash scripts/sass_counts.sh $B bwd_kernel; bash build/carry/sass_counts.sh $N bwd_kernel
