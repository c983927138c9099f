#!/usr/bin/env bash
# Why hopper's forward at d = 64, causal, N = 1024 (B = 16, H = 32; the pass takes 0.227 ms) runs
# 0.9-2.7 % below ec149c0's since the axes came in (call 6): Nsight Compute (--set full, clocks not
# locked) on one launch of ec149c0's kernel (o) and main 62aeebd's (h), bf16; then each binary's
# passes on the GPU timeline, to see whether the pass holds more than the kernel. Needs
# build/carry/o1.tgz and h1.tgz (the stripped flashlab alone) and timeline.so.
set -uo pipefail
mkdir -p "$OUT/logs"
for b in o h; do mkdir -p bins/$b; tar xzf build/carry/${b}1.tgz -C bins/$b; done
source scripts/cupti_env.sh
L="$OUT/logs"; t0=$SECONDS
for b in o h; do
  timeout 120 ncu --clock-control none --kernel-name-base demangled --kernel-name regex:hopper_fwd --launch-skip 3 --launch-count 1 \
    --set full --import-source no --print-details all \
    bins/$b/flashlab bench --backend cuda --N 1024 -d 64 --dtype bf16 --causal yes --versions hopper \
    --repeats 2 --warmup 2 > "$L/ncu_$b.txt" 2>&1
  echo "ncu $b rc=$? $((SECONDS-t0))s"
  grep -E "Duration|SM Frequency|Executed Instructions  |Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|Achieved Occupancy|L2 Hit Rate  |DRAM Throughput|Registers Per|Grid Size|Stall (Long|Short|Wait|Barrier|Math|MIO|Not Selected|Branch|Dispatch|LG|Sleep|Membar|Misc)" "$L/ncu_$b.txt" | head -30
done
for b in o h; do
  FLASHLAB_TIMELINE=$L/tl_$b.csv CUDA_INJECTION64_PATH=$PWD/build/carry/timeline.so timeout 60 bins/$b/flashlab bench \
    --backend cuda --N 1024 -d 64 --dtype bf16 --causal yes --versions hopper --repeats 10 --warmup 3 > "$L/tl_$b.log" 2>&1
  echo "timeline $b rc=$? $((SECONDS-t0))s"
  python3 scripts/timeline/gaps.py $L/tl_$b.csv --last 1 > $L/tl_$b.gaps 2>&1; head -20 $L/tl_$b.gaps
done
gzip -f "$L"/*.txt "$L"/*.csv "$L"/*.log
cd "$OUT" && tar czf call7.tgz logs && rm -rf logs && ls
