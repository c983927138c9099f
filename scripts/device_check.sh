#!/usr/bin/env bash
# Everything the GPU is needed for, in one run: the GPU tests, compute-sanitizer (memcheck,
# racecheck and synccheck) on small ragged shapes for every kernel, the SASS (HMMA and HGMMA counts
# and resource usage per kernel) and the benchmark beside PyTorch. Logs and JSON go under $OUT; a
# summary table is printed last.
#
# Build first, where nvcc is (no GPU needed):  scripts/device_build.sh   (-> build/device-bin)
# Then, on a machine with the GPU, from the repository root:
#   scripts/device_check.sh                                   # all stages
#   STAGES="tests sass" scripts/device_check.sh               # some of them
#   BENCH_ARGS="-N 1024,4096 -d 128 --dtype bf16" scripts/device_check.sh
#   STAGES="fwdsweep ablation" scripts/device_check.sh          # the forward rungs beside PyTorch,
#                                                               # and the hopper rung's ablation
#   STAGES="bwdsweep longdet" scripts/device_check.sh           # the Hopper backward beside PyTorch,
#                                                               # its deterministic twin at long N
#   STAGES="gqasweep" scripts/device_check.sh                   # grouped heads beside cuDNN's GQA
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${FLASHLAB_BIN_DIR:-build/device-bin}
OUT=${OUT:-out/device}
LOGS="$OUT/logs"
STAGES=${STAGES:-"info tests memcheck racecheck synccheck sass quickbench bench ablation"}
BENCH_ARGS=${BENCH_ARGS:-}
mkdir -p "$LOGS"
export PATH="$PATH:/usr/local/cuda/bin"
export PYTHONUNBUFFERED=1

# Small ragged shapes, causal and not, that run every version's kernels (Nq = 17 rows against
# Nk = 1000 keys, and 1000 rows against 17 keys: tails in both directions, rows with no key).
# The axes: grouped heads (8 query heads over 2 K/V heads, 17 rows) and windows on the same
# ragged shapes, causal and not.
CASES='Matrix/CudaVersions.*/bf16_d*_Nq17_Nk1000'
AXES='Axes/CudaVersionsAxes.*/bf16_d*_B2H8Hkv2_Nq17_Nk17:Axes/CudaVersionsAxes.*/fp16_d*_Nq17_Nk1000_w256_256'
SAN_FILTER="${SAN_FILTER:-$CASES:Matrix/CudaVersions.*/fp16_d*_causal_B1H2_Nq1000_Nk17:$AXES}"
RACE_FILTER="${RACE_FILTER:-$CASES:$AXES}"

SUMMARY=()
note() { SUMMARY+=("$(printf '%-10s %s' "$1" "$2")"); }

# run_stage NAME SECONDS CMD... : runs CMD with a time limit, output to $LOGS/NAME.log.
run_stage() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  echo "== $name: $*" >&2
  timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  STAGE_RC=$rc
  STAGE_S=$((SECONDS - t0))
  [ "$rc" = 124 ] && echo "   (stopped at its ${limit}s limit)" >>"$LOGS/$name.log"
  return 0
}

has() { [[ " $STAGES " == *" $1 "* ]]; }

if has info; then
  run_stage info 30 bash -c "nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,memory.used --format=csv; nproc; python3 -c 'import torch; print(\"torch\", torch.__version__)'"
  note info "$(sed -n 2p "$LOGS/info.log")"
fi

if has tests; then
  run_stage tests "${TESTS_TIMEOUT:-300}" "$BIN/flashlab_gpu_tests" --gtest_color=no
  passed=$(grep -oP '\[  PASSED  \] \K[0-9]+' "$LOGS/tests.log" | tail -1)
  failed=$(grep -c '^\[  FAILED  \] .*(' "$LOGS/tests.log")
  skipped=$(grep -oP '\[  SKIPPED \] \K[0-9]+(?= test)' "$LOGS/tests.log" | tail -1)
  note tests "rc=$STAGE_RC ${STAGE_S}s passed=${passed:-0} failed=$failed skipped=${skipped:-0}"
  grep '^\[  FAILED  \] .*(' "$LOGS/tests.log" | head -20 | while read -r l; do echo "           $l"; done >"$LOGS/failed.txt"
  while read -r l; do SUMMARY+=("$l"); done <"$LOGS/failed.txt"
fi

if has memcheck; then
  run_stage memcheck "${SAN_TIMEOUT:-240}" compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$BIN/flashlab_gpu_tests" --gtest_color=no --gtest_filter="$SAN_FILTER"
  note memcheck "rc=$STAGE_RC ${STAGE_S}s $(grep -h 'ERROR SUMMARY' "$LOGS/memcheck.log" | tail -1) tests: $(grep -oP '\[  PASSED  \] \K[0-9]+' "$LOGS/memcheck.log" | tail -1) passed"
fi

if has racecheck; then
  run_stage racecheck "${SAN_TIMEOUT:-240}" compute-sanitizer --tool racecheck --error-exitcode 99 \
    "$BIN/flashlab_gpu_tests" --gtest_color=no --gtest_filter="$RACE_FILTER"
  note racecheck "rc=$STAGE_RC ${STAGE_S}s $(grep -h 'RACECHECK SUMMARY' "$LOGS/racecheck.log" | tail -1) tests: $(grep -oP '\[  PASSED  \] \K[0-9]+' "$LOGS/racecheck.log" | tail -1) passed"
fi

if has synccheck; then
  run_stage synccheck "${SAN_TIMEOUT:-240}" compute-sanitizer --tool synccheck --error-exitcode 99 \
    "$BIN/flashlab_gpu_tests" --gtest_color=no --gtest_filter="$RACE_FILTER"
  note synccheck "rc=$STAGE_RC ${STAGE_S}s $(grep -h 'ERROR SUMMARY' "$LOGS/synccheck.log" | tail -1) tests: $(grep -oP '\[  PASSED  \] \K[0-9]+' "$LOGS/synccheck.log" | tail -1) passed"
fi

if has sass; then
  run_stage sass 120 bash -c "cuobjdump --dump-sass '$BIN/flashlab_gpu_tests' > '$LOGS/sass.txt' && \
    cuobjdump --dump-resource-usage '$BIN/flashlab_gpu_tests' | cu++filt > '$LOGS/resource_usage.txt'; \
    awk '/Function :/ {f=\$3} /HMMA/ {c[f]++} /HGMMA/ {g[f]++} END {for (k in c) print c[k], \"HMMA\", k; for (k in g) print g[k], \"HGMMA\", k}' '$LOGS/sass.txt' | cu++filt | sort -k3"
  rm -f "$LOGS/sass.txt"  # large; the counts and resource usage are kept
  note sass "rc=$STAGE_RC kernels with HMMA: $(grep -c ' HMMA ' "$LOGS/sass.log"), with HGMMA: $(grep -c ' HGMMA ' "$LOGS/sass.log"), spills: $(grep -c 'spill' "$LOGS/resource_usage.txt" 2>/dev/null || echo 0)"
  while read -r n kind name; do
    SUMMARY+=("$(printf '           %5s %-5s %s' "$n" "$kind" "$(echo "$name" | sed 's/flashlab::cuda:://g' | cut -c1-90)")")
  done <"$LOGS/sass.log"
fi

if has quickbench; then  # one shape first, so that some numbers are kept even if the sweep is cut
  run_stage quickbench "${QUICK_TIMEOUT:-120}" python3 scripts/compare_torch.py --flashlab "$BIN/flashlab" \
    --out "$OUT/compare_quick.json" -N 4096 -d 128 --dtype bf16
  note quickbench "rc=$STAGE_RC ${STAGE_S}s (bf16 d=128 N=4096; logs/quickbench.log)"
  sed -n '/^flashlab .* vs torch/,/^wrote/p' "$LOGS/quickbench.log" | while read -r l; do echo "           $l"; done >"$LOGS/quick_summary.txt"
  while read -r l; do SUMMARY+=("$l"); done <"$LOGS/quick_summary.txt"
fi

if has bench; then
  # shellcheck disable=SC2086
  run_stage bench "${BENCH_TIMEOUT:-420}" python3 scripts/compare_torch.py --flashlab "$BIN/flashlab" \
    --out "$OUT/compare_torch.json" $BENCH_ARGS
  note bench "rc=$STAGE_RC ${STAGE_S}s (table in logs/bench.log, JSON in compare_torch.json)"
  sed -n '/^geometric mean/,/^wrote/p' "$LOGS/bench.log" | while read -r l; do echo "           $l"; done >"$LOGS/bench_summary.txt"
  while read -r l; do SUMMARY+=("$l"); done <"$LOGS/bench_summary.txt"
fi

if has fwdsweep; then  # the forward rungs over the sweep, beside PyTorch's forward only
  run_stage fwdsweep "${BENCH_TIMEOUT:-420}" python3 scripts/compare_torch.py --flashlab "$BIN/flashlab" \
    --versions tiled,hopper --passes fwd -N 1024,2048,4096,8192,16384 --out "$OUT/compare_fwd.json"
  note fwdsweep "rc=$STAGE_RC ${STAGE_S}s (table in logs/fwdsweep.log, JSON in compare_fwd.json)"
  sed -n '/^geometric mean/,/^wrote/p' "$LOGS/fwdsweep.log" | sed 's/^/           /' >"$LOGS/fwdsweep_summary.txt"
  while read -r l; do SUMMARY+=("$l"); done <"$LOGS/fwdsweep_summary.txt"
fi

if has bwdsweep; then  # the Hopper backward and its deterministic twin over the sweep, beside PyTorch
  run_stage bwdsweep "${BENCH_TIMEOUT:-420}" python3 scripts/compare_torch.py --flashlab "$BIN/flashlab" \
    --versions hopper,hopper-deterministic --passes bwd -N 1024,2048,4096,8192,16384 \
    --out "$OUT/compare_bwd.json"
  note bwdsweep "rc=$STAGE_RC ${STAGE_S}s (table in logs/bwdsweep.log, JSON in compare_bwd.json)"
  sed -n '/^geometric mean/,/^wrote/p' "$LOGS/bwdsweep.log" | sed 's/^/           /' >"$LOGS/bwdsweep_summary.txt"
  while read -r l; do SUMMARY+=("$l"); done <"$LOGS/bwdsweep_summary.txt"
fi

if has gqasweep; then  # grouped heads: 32 query heads over 8 K/V heads, beside cuDNN's enable_gqa
  run_stage gqasweep "${BENCH_TIMEOUT:-420}" python3 scripts/compare_torch.py --flashlab "$BIN/flashlab" \
    --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8 \
    --out "$OUT/compare_gqa.json"
  note gqasweep "rc=$STAGE_RC ${STAGE_S}s (table in logs/gqasweep.log, JSON in compare_gqa.json)"
  sed -n '/^flashlab .* vs torch/,/^wrote/p' "$LOGS/gqasweep.log" | sed 's/^/           /' >"$LOGS/gqasweep_summary.txt"
  while read -r l; do SUMMARY+=("$l"); done <"$LOGS/gqasweep_summary.txt"
fi

if has longdet; then  # the deterministic backward's price at long causal sequences
  run_stage longdet 240 "$BIN/flashlab" bench --backend cuda --versions hopper,hopper-deterministic \
    -N 65536,131072 -d 128 --dtype bf16 --causal yes --repeats 5 --warmup 1 --json "$OUT/bench_long_det.json"
  note longdet "rc=$STAGE_RC ${STAGE_S}s (logs/longdet.log, bench_long_det.json)"
  grep -E '^hopper' "$LOGS/longdet.log" | grep bwd | sed 's/^/           /' >"$LOGS/longdet_summary.txt"
  while read -r l; do SUMMARY+=("$l"); done <"$LOGS/longdet_summary.txt"
fi

if has ablation; then
  run_stage ablation 240 "$BIN/flashlab" lab hopper --backend cuda --json "$OUT/lab_hopper_cuda.json"
  note ablation "rc=$STAGE_RC ${STAGE_S}s (logs/ablation.log, lab_hopper_cuda.json)"
  grep -E '^ *[0-9-]* +(hopper|no-|sync-|tiled) ' "$LOGS/ablation.log" | cut -c1-24,120-250 >"$LOGS/ablation_summary.txt"
  while read -r l; do SUMMARY+=("           $l"); done <"$LOGS/ablation_summary.txt"
fi

# Keep what the run leaves in $OUT to a few files: one archive of the logs, the JSON, the summary.
{
  echo "flashlab device check ($(date -u +%FT%TZ))"
  printf '%s\n' "${SUMMARY[@]}"
} >"$OUT/summary.txt"
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$LOGS"
echo
[ -f "$OUT/logs.tar.gz" ] && tar -xOzf "$OUT/logs.tar.gz" logs/bench.log 2>/dev/null | sed -n '/^flashlab .* vs torch/,/^geometric/p' | head -120
[ -f "$OUT/logs.tar.gz" ] && tar -xOzf "$OUT/logs.tar.gz" logs/fwdsweep.log 2>/dev/null | grep -E '^hopper|^flashlab .* vs' | head -60
echo
cat "$OUT/summary.txt"
