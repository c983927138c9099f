#!/usr/bin/env bash
# Prepared, not run: where in the K/V loop tiled's causal kernel at d = 128 gained its stalls since
# ec149c0 (call 3: math-pipe throttle 0.72 -> 0.81, short scoreboard 0.31 -> 0.38 cycles per issued
# instruction). Nsight Compute with the source page (per-SASS-instruction warp-state samples and
# executed instructions) on one full-size launch of ec149c0's kernel (o) and main's (m), bf16,
# d = 128, causal, N = 16384 (B = 1, H = 16), clocks not locked; the reports kept and their SASS
# pages printed as CSV. Needs build/carry/o1.tgz and m1.tgz (each the stripped flashlab alone).
set -uo pipefail
mkdir -p "$OUT/logs"
for b in o m; do mkdir -p bins/$b; tar xzf build/carry/${b}1.tgz -C bins/$b; done
source scripts/cupti_env.sh
L="$OUT/logs"; t0=$SECONDS
for b in o m; do
  timeout 150 ncu --clock-control none --kernel-name regex:fwd_kernel --launch-skip 3 --launch-count 1 \
    --set full --import-source yes -o "$OUT/ncu_$b" \
    bins/$b/flashlab bench --backend cuda --N 16384 -d 128 --dtype bf16 --causal yes --versions tiled \
    --repeats 2 --warmup 2 > "$L/ncu_$b.txt" 2>&1
  echo "ncu $b rc=$? $((SECONDS-t0))s"
  timeout 60 ncu --import "$OUT/ncu_$b.ncu-rep" --page source --print-source sass --csv > "$L/sass_$b.csv" 2> "$L/sass_$b.err"
  echo "source page $b rc=$? lines $(wc -l < "$L/sass_$b.csv")"
done
gzip -f "$L"/*
cd "$OUT" && tar czf call5.tgz logs ncu_*.ncu-rep && rm -rf logs ncu_*.ncu-rep && ls
