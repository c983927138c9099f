#!/usr/bin/env bash
# call 13 (binary 2b43817): where hopper-fp8's time goes -- Nsight Compute on the quantization
# pass and the forward at d = 128, N = 16384, non-causal.
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
M=gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__cycles_active.avg,sm__cycles_elapsed.avg
timeout 300 ncu --kernel-name regex:'quant_kernel|fwd_kernel' --launch-count 2 --metrics $M --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats \
  $B/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8 -B 1 -H 16 -N 16384 -d 128 --check sample --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/ncu_fp8.txt" 2>&1
echo "ncu rc=$? $((SECONDS-t0))s"
grep -vE "^==PROF==|^\s*$" "$L/ncu_fp8.txt" | grep -E "quant_kernel|fwd_kernel|duration|pct|Stall|stall|Pipe|Issue|Warp Cycles|Active|Executed Ipc|Throughput|inst_executed|cycles" | head -n 120
echo "elapsed $((SECONDS-t0))s"
