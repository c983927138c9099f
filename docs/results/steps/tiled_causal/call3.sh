#!/usr/bin/env bash
# Why tiled's causal forward lost 2-4 % since ec149c0 when its per-tile instructions did not change
# (the SASS of the K/V loop: same HMMA, LDSM, LDGSTS, MUFU counts, the unmasked path 1028 -> 1033
# instructions at d = 128): Nsight Compute (--set full, clocks not locked) on one full-size launch
# of ec149c0's kernel (o) and main's (h), bf16, d = 128 and 64, causal, N = 16384 (B = 1, H = 16);
# then each binary's passes on the GPU timeline, to see whether the pass holds more than the kernel.
# Needs build/carry/o1.tgz and h1.tgz (the stripped flashlab alone) and timeline.so.
set -uo pipefail
mkdir -p "$OUT/logs"
for b in o h; do mkdir -p bins/$b; tar xzf build/carry/${b}1.tgz -C bins/$b; done
source scripts/cupti_env.sh
L="$OUT/logs"; t0=$SECONDS
for d in 128 64; do
  for b in o h; do
    timeout 120 ncu --clock-control none --kernel-name regex:fwd_kernel --launch-skip 3 --launch-count 1 \
      --set full --import-source no --print-details all \
      bins/$b/flashlab bench --backend cuda --N 16384 -d $d --dtype bf16 --causal yes --versions tiled \
      --repeats 2 --warmup 2 > "$L/ncu_${b}_d$d.txt" 2>&1
    echo "ncu $b d$d rc=$? $((SECONDS-t0))s"
    grep -E "^  fwd_kernel|Duration|SM Frequency|Executed Instructions  |Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|Achieved Occupancy|L2 Hit Rate  |DRAM Throughput|No Instruction|Stall (Long|Short|Wait|Barrier|Math|MIO|Not Selected|Branch|Dispatch|LG|Tex|Sleep|Drain|Membar|Misc)" "$L/ncu_${b}_d$d.txt" | head -40
  done
done
for b in o h; do
  FLASHLAB_TIMELINE=$L/tl_$b.csv CUDA_INJECTION64_PATH=$PWD/build/carry/timeline.so timeout 60 bins/$b/flashlab bench \
    --backend cuda --N 1024 16384 -d 128 --dtype bf16 --causal yes --versions tiled --repeats 10 --warmup 3 > "$L/tl_$b.log" 2>&1
  echo "timeline $b rc=$? $((SECONDS-t0))s"
  python3 scripts/timeline/gaps.py $L/tl_$b.csv --last 1 > $L/tl_$b.gaps 2>&1; grep -E "median|span" $L/tl_$b.gaps | head -12
done
gzip -f "$L"/*.txt "$L"/*.csv "$L"/*.log
cd "$OUT" && tar czf call3.tgz logs && rm -rf logs && ls
