#!/usr/bin/env bash
# Why the range profiler and Nsight Compute disagree on one kernel's DRAM writes, in one device
# call (about a minute; at most 75 + 2 x 20 s). The tiled forward at the cross-check's shape
# (B*N = 16k tokens, d = 128, N = 4096, bf16) is measured
#   - by flashlab's counters (CUPTI range profiler) after each way of emptying L2 that
#     FLASHLAB_L2_CLEAN offers (src/cuda/counters.cu), with atomic-dq's preprocess kernel beside it
#     (it writes 1 MB, so what it is charged beyond that was left dirty before it);
#   - by Nsight Compute with --cache-control all (flush + invalidate L2 before the kernel) and none.
# Files in $OUT: cupti_modes.log, ncu_all.csv, ncu_none.csv, summary.txt.
#
# Build first, where nvcc is:  scripts/device_build.sh   (-> build/device-bin)
# Then, on the GPU machine, from the repository root:  scripts/l2_clean_experiment.sh
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${FLASHLAB_BIN_DIR:-build/device-bin}
OUT=${OUT:-out/l2_clean}
mkdir -p "$OUT"
source scripts/cupti_env.sh

timeout 75 "$BIN/flashlab_gpu_tests" --gtest_color=no --gtest_also_run_disabled_tests \
  --gtest_filter='CountersExperiment.*' >"$OUT/cupti_modes.log" 2>&1
echo "cupti modes: rc=$?" >&2

for cc in all none; do
  timeout 20 ncu --cache-control "$cc" --clock-control none --csv --page raw --print-units base \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size -k regex:fwd_kernel \
    "$BIN/flashlab" bench --backend cuda --versions tiled -N 4096 -d 128 --dtype bf16 \
    --causal no --repeats 1 --warmup 0 >"$OUT/ncu_$cc.csv" 2>&1
  echo "ncu --cache-control $cc: rc=$?" >&2
done

python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import os, re, sys
sys.path.insert(0, "scripts")
from ncu_crosscheck import ncu_launches
out = sys.argv[1]
ncu = {}
for cc in ("all", "none"):
    path = os.path.join(out, f"ncu_{cc}.csv")
    launches = ncu_launches(open(path, errors="replace").read())
    largest = max((k.get("grid") or 0 for k in launches), default=0)
    big = [k for k in launches if (k.get("grid") or 0) == largest and k.get("write") is not None]
    ncu[cc] = big
    for k in big:
        print(f"ncu --cache-control {cc:<4} launch {k['id']}: read {k['read'] / 1e6:8.3f} MB "
              f"written {k['write'] / 1e6:8.3f} MB")
ref = ncu["all"][0]["write"] if ncu["all"] else None
for line in open(os.path.join(out, "cupti_modes.log"), errors="replace"):
    if line.startswith("l2clean"):
        m = re.search(r"written +([0-9.]+) MB", line)
        extra = ""
        if ref and m and "fwd_kernel" in line:
            extra = f"  CUPTI/ncu(all) = {float(m.group(1)) * 1e6 / ref:.3f}"
        print(line.rstrip() + extra)
    elif "FAILED" in line or "SKIPPED" in line or "Failure" in line:
        print(line.rstrip())
PY
