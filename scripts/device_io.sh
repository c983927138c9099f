#!/usr/bin/env bash
# The io lab's GPU half in one run: the lab with hardware counters (JSON, markdown and the roofline
# SVG), the same lab with the counters switched off (the path of a user without permission), the
# counter and ceiling GPU tests, the SASS of the micro-benchmarks, and an Nsight Compute cross-check
# of one kernel's DRAM bytes against the lab's own. Files go to $OUT (at most five), a summary is
# printed last. Every stage has a time limit, and a stage that would run past the whole budget
# (BUDGET seconds, default 450) is skipped and says so.
#
# Build first, where nvcc is (no GPU needed):  scripts/device_build.sh   (-> build/device-bin)
# Then, on a machine with the GPU, from the repository root:
#   scripts/device_io.sh
#   STAGES="info io plot" scripts/device_io.sh          # some of them
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${FLASHLAB_BIN_DIR:-build/device-bin}
OUT=${OUT:-out/io}
LOGS="$OUT/logs"
BUDGET=${BUDGET:-450}
STAGES=${STAGES:-"info io plot ncu nocounters tests sass"}
mkdir -p "$LOGS"
source scripts/cupti_env.sh

source scripts/device_stages.sh

if has info; then
  run_stage info 20 bash -c "nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,memory.used --format=csv; echo LD_LIBRARY_PATH=\$LD_LIBRARY_PATH; ls -l \${LD_LIBRARY_PATH%%:*}/libcupti* \${LD_LIBRARY_PATH%%:*}/libnvperf* 2>&1; ncu --version | tail -1"
  note info "$(sed -n 2p "$LOGS/info.log") | $(grep -o 'libcupti.so[^ ]*' "$LOGS/info.log" | head -1 || echo 'no libcupti found')"
fi

if has io; then
  run_stage io 330 env FLASHLAB_IO_LOG=1 "$BIN/flashlab" lab io --backend cuda --format markdown \
    --json "$OUT/lab_io_cuda.json"
  grep -v '^lab io: ' "$LOGS/io.log" >"$OUT/lab_io_cuda.md"
  note io "rc=$STAGE_RC ${STAGE_S}s -> lab_io_cuda.json, lab_io_cuda.md"
fi

if has plot && [ -f "$OUT/lab_io_cuda.json" ]; then
  run_stage plot 20 "$BIN/flashlab" plot "$OUT/lab_io_cuda.json" -o "$OUT/io_roofline_h200.svg"
  note plot "rc=$STAGE_RC -> io_roofline_h200.svg"
fi

if has ncu; then
  # One kernel, two measurements: the tiled forward at B*N = 16k tokens, d = 128, N = 4096 (the
  # lab's shape), profiled by Nsight Compute inside `flashlab bench` (which uses no counters of
  # its own), against what the lab's CUPTI counters recorded for the same kernel and shape.
  # Nsight Compute runs twice: with its default cache control (L2 flushed and invalidated before
  # the kernel) and with `--cache-control none` (L2 as the program left it, which is what the
  # lab's range profiler sees). Reads do not depend on it; writes do, and no way of emptying L2
  # from the program moves the range profiler's figure towards the flushed one (seven sweeps
  # against none, an experiment since retired; its outputs are in docs/results/steps/l2_clean).
  for cc in all none; do
    run_stage "ncu_$cc" 150 ncu --clock-control none --cache-control "$cc" --csv --page raw \
      --print-units base --metrics dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size \
      -k regex:fwd_kernel "$BIN/flashlab" bench --backend cuda --versions tiled -N 4096 -d 128 \
      --dtype bf16 --causal no --repeats 1 --warmup 0
    if [ -f "$OUT/lab_io_cuda.json" ]; then
      python3 scripts/ncu_crosscheck.py "$LOGS/ncu_$cc.log" "$OUT/lab_io_cuda.json" --version tiled \
        --kernel fwd_kernel --d 128 --N 4096 >"$LOGS/crosscheck_$cc.log" 2>&1
      check_rc=$?
      note "ncu_$cc" "rc=$STAGE_RC ${STAGE_S}s, ncu --cache-control $cc, cross-check rc=$check_rc (0: within 5%)"
      while read -r l; do SUMMARY+=("            $l"); done <"$LOGS/crosscheck_$cc.log"
    else
      note "ncu_$cc" "rc=$STAGE_RC ${STAGE_S}s, no lab report to compare with"
    fi
  done
fi

if has nocounters; then
  # What a user without permission to read the counters gets: exit 0, the modeled half, the
  # ceilings, one line saying why.
  run_stage nocounters 60 env FLASHLAB_COUNTERS=off "$BIN/flashlab" lab io --backend cuda
  note nocounters "rc=$STAGE_RC ${STAGE_S}s: $(grep -m1 -o 'Not measured: [^.]*' "$LOGS/nocounters.log")"
fi

if has tests; then
  run_stage tests 120 "$BIN/flashlab_gpu_tests" --gtest_color=no --gtest_filter='Counters*:Ceilings*'
  passed=$(grep -oP '\[  PASSED  \] \K[0-9]+' "$LOGS/tests.log" | tail -1)
  skipped=$(grep -oP '\[  SKIPPED \] \K[0-9]+(?= test)' "$LOGS/tests.log" | tail -1)
  failed=$(grep -c '^\[  FAILED  \] .*(' "$LOGS/tests.log")
  note tests "rc=$STAGE_RC ${STAGE_S}s passed=${passed:-0} failed=$failed skipped=${skipped:-0}"
  grep -E '^(libcupti|fwd_kernel|hbm_copy|mma_sync|wgmma|ffma)|metrics in|FAILED  \].*\(' "$LOGS/tests.log" |
    head -12 | while read -r l; do echo "            $l"; done >"$LOGS/tests_summary.txt"
  while read -r l; do SUMMARY+=("$l"); done <"$LOGS/tests_summary.txt"
fi

if has sass; then
  # The micro-benchmarks must issue the instructions they are named after.
  run_stage sass 60 bash -c "cuobjdump --dump-sass '$BIN/flashlab' | awk '/Function :/ {f=\$3} /HGMMA/ {g[f]++} /HMMA/ {h[f]++} END {for (k in g) print g[k], \"HGMMA\", k; for (k in h) print h[k], \"HMMA\", k}' | grep -E 'wgmma_chains|wgmma_once|mma_chains' | cu++filt"
  note sass "rc=$STAGE_RC $(tr '\n' ';' <"$LOGS/sass.log" | sed 's/flashlab::cuda:://g' | cut -c1-160)"
fi

# What the run leaves in $OUT: the report, its markdown, the figure, the logs, the summary.
{
  echo "flashlab io device run ($(date -u +%FT%TZ), ${SECONDS}s)"
  printf '%s\n' "${SUMMARY[@]}"
  if [ -f "$OUT/lab_io_cuda.json" ]; then
    python3 - "$OUT/lab_io_cuda.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
c = doc["config"].get("counters", {})
print(f"counters    available={c.get('available')} chip={c.get('chip')} "
      f"replays={c.get('replay_passes')} missing={c.get('missing')} {c.get('why_not', '')}")
for t in doc["tables"]:
    if t["id"] == "ratio":
        print("ratio       d      N  modeled  DRAM    L2")
        for r in t["rows"]:
            f = lambda x: "-" if x is None else f"{x:.2f}"
            print(f"            {r['d']:>3} {r['N']:>6}  {f(r['ratio_model']):>7}  "
                  f"{f(r['ratio_dram']):>6} {f(r['ratio_l2']):>5}")
    if t["id"] == "ceilings":
        for r in t["rows"]:
            print(f"ceiling     {r['name']:<10} {r['value'] if r['value'] is not None else '-'} "
                  f"{r['unit']} check={r['check_ok']}")
for o in doc["observations"]:
    print("obs         " + o)
PY
  fi
} >"$OUT/summary.txt" 2>&1
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$LOGS"
echo
cat "$OUT/summary.txt"
