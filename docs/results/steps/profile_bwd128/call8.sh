#!/usr/bin/env bash
# Call 8: why hopper-deterministic can outrun hopper on the d = 128 backward at bf16 non-causal
# N = 16384 (main, 69da667): both timed, alternating, three rounds; then Nsight Compute on one
# launch of each backward kernel (speed of light, memory, warp states, L2 reductions).
set -uo pipefail
mkdir -p bins/h "$OUT/logs"; tar xzf build/carry/h.tgz -C bins/h
B=bins/h/flashlab; L="$OUT/logs"; t0=$SECONDS
for r in 1 2 3; do
  for v in hopper hopper-deterministic; do
    timeout 40 $B bench --backend cuda --versions $v --passes bwd -N 16384 -d 128 --dtype bf16 --causal no --repeats 10 --warmup 3 --json "$OUT/b_${v}_$r.json" > "$L/b_${v}_$r.log" 2>&1
  done
done
python3 - "$OUT" <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(f"{sys.argv[1]}/b_*.json")):
    x = json.load(open(f))["tables"][0]["rows"][0]
    print(os.path.basename(f)[2:-5], f'{x["tflops"]:.1f} TFLOP/s, median {x["median_ms"]:.3f} ms (min {x["min_ms"]:.3f}, max {x["max_ms"]:.3f})')
PY
echo "bench $((SECONDS-t0))s"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_red.sum,lts__t_sectors_op_read.sum,lts__t_sector_hit_rate.pct,sm__cycles_active.avg,smsp__cycles_active.avg
for v in hopper hopper-deterministic; do
  timeout 120 ncu --clock-control none --kernel-name regex:'bwd_kernel' --launch-skip 1 --launch-count 1 --metrics $M --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats $B bench --backend cuda --versions $v --passes bwd -N 16384 -d 128 --dtype bf16 --causal no --repeats 1 --warmup 1 > "$L/ncu_$v.log" 2>&1
  echo "ncu $v rc=$? $((SECONDS-t0))s"
  grep -E "Duration|Throughput|Hit Rate|Busy|Stall|Issued|Eligible|Active Warps|No Eligible|lts__|dram__|gpu__time" "$L/ncu_$v.log" | head -60
done
cd "$OUT" && tar czf call8.tgz logs *.json && rm -rf logs *.json
