#!/usr/bin/env bash
# call 18 (binary ccfee02, whose kernels are 9502883's): where the two-pass d = 256 backward spends
# its time (Nsight Compute: each kernel's duration, one timed launch of each, bf16, N = 16384), and
# the sweeps beside PyTorch in one call: every rung at d = 256 (the README's head-dim-256 table)
# and hopper at d = 64 and 128 (with the d = 256 rows: the 60 shapes of both passes).
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
B=build/device-bin
L="$OUT/logs"
export PATH="$PATH:/usr/local/cuda/bin"
t0=$SECONDS
$B/flashlab --version | head -1
for c in no yes; do
  timeout 60 ncu --clock-control none --kernel-name regex:"bwd_kernel|dq_kernel|preprocess" --launch-skip 6 --launch-count 3 --metrics gpu__time_duration.sum $B/flashlab bench --backend cuda -N 16384 -d 256 --dtype bf16 --causal $c --versions hopper --passes bwd --repeats 2 --warmup 2 > "$L/ncu_causal_$c.log" 2>&1
  echo "ncu causal=$c rc=$? $((SECONDS-t0))s"; grep -E "^  [a-z_:<> ]*(kernel|preprocess)|gpu__time_duration" "$L/ncu_causal_$c.log" | sed 's/(flashlab::[^)]*)//' | cut -c1-150 | head -n 12
done
timeout 270 python3 scripts/compare_torch.py --flashlab $B/flashlab --versions hopper,hopper-deterministic,atomic-dq -N 1024,2048,4096,8192,16384 -d 256 --dtype bf16,fp16 --causal no,yes --out "$OUT/compare_d256.json" > "$L/compare_d256.log" 2>&1
echo "compare d256 rc=$? $((SECONDS-t0))s"; sed -n '/geometric/,$p' "$L/compare_d256.log" | head -n 12
timeout 250 python3 scripts/compare_torch.py --flashlab $B/flashlab --versions hopper -N 1024,2048,4096,8192,16384 -d 64,128 --dtype bf16,fp16 --causal no,yes --out "$OUT/compare_d64_128.json" > "$L/compare_d64_128.log" 2>&1
echo "compare d64,128 rc=$? $((SECONDS-t0))s"; sed -n '/geometric/,$p' "$L/compare_d64_128.log" | head -n 12
