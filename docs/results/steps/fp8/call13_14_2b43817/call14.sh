#!/usr/bin/env bash
# call 14 (binary 2b43817): hopper-fp8's forward at d = 128, N = 16384 under Nsight Compute's
# sampling: stall reasons of the whole kernel and per SASS instruction.
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
timeout 300 ncu --kernel-name regex:'fwd_kernel' --launch-count 1 --section WarpStateStats --section SourceCounters --section SchedulerStats -o "$L/fp8_fwd" \
  $B/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8 -B 1 -H 16 -N 16384 -d 128 --check sample --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/ncu_run.txt" 2>&1
echo "ncu rc=$? $((SECONDS-t0))s"
ncu -i "$L/fp8_fwd.ncu-rep" --page details --print-details all > "$L/details.txt" 2>&1
grep -iE "stall|Warp Cycles|Eligible|Issued Warp|No Eligible|Active Warps" "$L/details.txt" | head -n 60
ncu -i "$L/fp8_fwd.ncu-rep" --page source --print-source sass --csv > "$L/source.csv" 2>&1
echo "source rc=$? lines $(wc -l < "$L/source.csv")"; head -c 600 "$L/source.csv"; echo
gzip -9 "$L/source.csv"
echo "elapsed $((SECONDS-t0))s"
