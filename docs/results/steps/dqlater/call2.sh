#!/usr/bin/env bash
# Call 2 (not run yet): why dQ a step later lost 10 %. Nsight Compute on one timed launch of the
# d = 128 backward kernel of main (h) and of main with dq_later.patch (b), bf16, non-causal,
# N = 4096 (B = 4, H = 16), the same sections as scripts/profile_bwd.sh plus the source-level stall
# samples. Needs build/carry/h.tgz and b.tgz (scripts/device_build.sh of each tree,
# build/device-bin packed).
set -uo pipefail
mkdir -p bins/h bins/b "$OUT/logs"
for b in h b; do tar xzf build/carry/$b.tgz -C bins/$b; done
export PATH="$PATH:/usr/local/cuda/bin"
t0=$SECONDS
for b in h b; do
  timeout 240 ncu --clock-control none --kernel-name bwd_kernel --launch-skip 3 --launch-count 1 \
    --set full --import-source no --print-details all \
    bins/$b/flashlab bench --backend cuda -N 4096 -d 128 --dtype bf16 --causal no --versions hopper \
    --passes bwd --repeats 2 --warmup 2 > "$OUT/logs/ncu_$b.txt" 2>&1
  echo "ncu $b rc=$? $((SECONDS-t0))s"
  grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|Stall" "$OUT/logs/ncu_$b.txt" | head -30
done
gzip -f "$OUT"/logs/*.txt
