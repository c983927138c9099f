#!/usr/bin/env bash
# Calls 9 and 10 (main's binary, 69da667, as in call 8), as they were run.
# Call 9: Nsight Compute on the first four launches of each backward kernel (two of the bench's
# check at B = 1, H = 2, then the warm-up and the timed run of N = 16384).
mkdir -p bins/h; tar xzf build/carry/h.tgz -C bins/h
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_op_red.sum,lts__t_sectors_op_read.sum,lts__t_sector_hit_rate.pct
for v in hopper hopper-deterministic; do
  timeout 100 ncu --clock-control none --kernel-name regex:'bwd_kernel' --launch-count 4 --metrics $M --section SpeedOfLight --section WarpStateStats bins/h/flashlab bench --backend cuda --versions $v --passes bwd -N 16384 -d 128 --dtype bf16 --causal no --repeats 1 --warmup 1 > $OUT/ncu_$v.log 2>&1
done
# Call 10: the SM clock and the power every 100 ms while the backward and the forward are timed.
(nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 100 > $OUT/smi.csv &)
sleep 1
bins/h/flashlab bench --backend cuda --versions hopper --passes bwd -N 16384 -d 128 --dtype bf16 --causal no --repeats 30 --warmup 3 > $OUT/bench.log 2>&1
sleep 1
bins/h/flashlab bench --backend cuda --versions hopper --passes fwd -N 16384 -d 128 --dtype bf16 --causal no --repeats 30 --warmup 3 > $OUT/bench_fwd.log 2>&1
pkill nvidia-smi
