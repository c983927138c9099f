#!/bin/bash
# Step 3 on the device: the sweeps of main (d6867f7) beside PyTorch (bf16), and the persistent
# backward's second form (late claims) A/B against main.
set -uo pipefail
OUT=${OUT:-out/device}; mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin PYTHONUNBUFFERED=1
mkdir -p /tmp/main /tmp/v2
tar -xzf build/carry/main.tgz -C /tmp/main && tar -xzf build/carry/v2.tgz -C /tmp/v2 || exit 1
M=/tmp/main/flashlab; V=/tmp/v2/flashlab
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__)'
echo "== bwdsweep (main, bf16)"
timeout 200 python3 scripts/compare_torch.py --flashlab $M --versions hopper,hopper-deterministic --passes bwd -N 1024,2048,4096,8192,16384 --dtype bf16 --out $OUT/compare_bwd_bf16.json > $OUT/bwdsweep.log 2>&1; echo "rc=$?"
sed -n '/vs torch/,$p' $OUT/bwdsweep.log | head -60
echo "== gqasweep (main)"
timeout 120 python3 scripts/compare_torch.py --flashlab $M --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8 --out $OUT/compare_gqa.json > $OUT/gqasweep.log 2>&1; echo "rc=$?"
sed -n '/vs torch/,$p' $OUT/gqasweep.log | head -30
echo "== persistent v2: packed tests"
timeout 60 /tmp/v2/flashlab_gpu_tests --gtest_color=no --gtest_filter='Packed/*:Masks/*' 2>&1 | grep -E "^\[  PASSED|^\[  FAILED"
echo "== bench varlen (main, v2, main, v2)"
for bin in $M $V $M $V; do timeout 60 $bin bench --backend cuda --versions hopper,hopper-deterministic --passes bwd --dtype bf16 -d 128 --hidden 2048 --causal yes --varlen 24,128,4096 --format csv 2>&1 | grep -E "^hopper"; done
echo "== dense A/B (main, v2, main, v2)"
for bin in $M $V $M $V; do echo "-- $bin"; timeout 90 $bin bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -N 2048,4096,16384 -d 64,128 --dtype bf16 --causal no,yes --format csv 2>&1 | grep -E "^hopper"; done
echo "== fwdsweep (main, bf16)"
timeout 200 python3 scripts/compare_torch.py --flashlab $M --versions tiled,hopper --passes fwd -N 1024,2048,4096,8192,16384 --dtype bf16 --out $OUT/compare_fwd_bf16.json > $OUT/fwdsweep.log 2>&1; echo "rc=$?"
sed -n '/vs torch/,$p' $OUT/fwdsweep.log | head -40
