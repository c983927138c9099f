#!/usr/bin/env bash
# Where the 1.7 % more executed instructions of main's hopper forward at d = 64, causal, N = 1024
# sit (call 7: 103.7 -> 105.5 M, duration 224.2 -> 226.9 us): Nsight Compute's per-instruction
# counts (SourceCounters, the SASS source page as CSV) of one launch of ec149c0's kernel (o) and
# main 62aeebd's (h), bf16. Needs build/carry/o1.tgz and h1.tgz.
set -uo pipefail
mkdir -p "$OUT/logs"
for b in o h; do mkdir -p bins/$b; tar xzf build/carry/${b}1.tgz -C bins/$b; done
L="$OUT/logs"; t0=$SECONDS
for b in o h; do
  timeout 120 ncu --clock-control none --kernel-name-base demangled --kernel-name regex:hopper_fwd --launch-skip 3 --launch-count 1 \
    --section SourceCounters --section InstructionStats --import-source no -f -o "$L/src_$b" \
    bins/$b/flashlab bench --backend cuda --N 1024 -d 64 --dtype bf16 --causal yes --versions hopper \
    --repeats 2 --warmup 2 > "$L/ncu_src_$b.log" 2>&1
  echo "ncu $b rc=$? $((SECONDS-t0))s"
  ncu -i "$L/src_$b.ncu-rep" --page source --csv --print-source sass > "$L/sass_counts_$b.csv" 2> "$L/export_$b.err"
  echo "export $b rc=$? lines $(wc -l < "$L/sass_counts_$b.csv")"; head -3 "$L/sass_counts_$b.csv" | cut -c1-300
done
gzip -f "$L"/*.csv "$L"/*.log
cd "$OUT" && tar czf call8.tgz logs && rm -rf logs && ls
