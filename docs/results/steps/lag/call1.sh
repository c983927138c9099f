#!/usr/bin/env bash
# Call 1 (outputs: call1/), once desc's calls have passed. l is s with lag.patch: the Hopper
# forward's reference max lags at d = 128 and 256 (40 forward kernels differ from s's, the d = 64
# ones and every other kernel are s's). First l's GPU tests of every version at d = 128 and 256
# (Matrix, HeadDim256 with its packed batches, the axes and packed batches at d = 128) and
# compute-sanitizer memcheck on one small shape at both head dims; then the `hopper` forward,
# bf16, N = 4096 and 16384, d = 128 and 256, causal and not, hidden 2048, s and l in turn, two
# rounds, each pass after a 1 s pause; last `lab hopper`, whose variants (the ablation's kernels,
# the plain main loop among them) are held to the rung's answer. Prediction (docs/perf.md):
# d = 256 +3 to +8 %, d = 128 +1 to +4 %, causal and not.
# Needs build/carry/sf.tgz and l.tgz (stripped flashlab and flashlab_gpu_tests; version bdf5451).
set -uo pipefail
mkdir -p "$OUT/logs" bins/s bins/l
tar xzf build/carry/sf.tgz -C bins/s; tar xzf build/carry/l.tgz -C bins/l
export PATH="$PATH:/usr/local/cuda/bin"
L="$OUT/logs"; t0=$SECONDS
# Each command's time limit is cut to what is left of 530 s, and a command that would get less than
# 5 s is skipped (exit 125), so that the archive at the end is always made (a call has 600 s, and
# only 8 files come back).
run_for() {
  local left=$((530 - SECONDS + t0)) n=$1
  shift
  [ "$left" -lt "$n" ] && n=$left
  if [ "$n" -lt 5 ]; then echo "skipped (no time left): $*"; return 125; fi
  timeout -k 10 "$n" "$@"
}
# A first GPU command that runs out of its time has most likely hung on the GPU: the rest would
# only wait out their own limits, so the call stops here and says so.
stop_if_hung() { if [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; then echo "$2 ran out of its time: stopping the call here"; gzip -f "$L"/*.log; cd "$OUT" && tar czf call1.tgz logs && rm -rf logs; exit 1; fi; }
bins/s/flashlab --version; bins/l/flashlab --version
run_for 30 bins/l/flashlab run --backend cuda --versions hopper -d 256 --Nq 177 --Nk 300 -H 4 --heads-kv 2 --dtype bf16 --causal --repeats 1 --warmup 0 > "$L/smoke.log" 2>&1
rc=$?; echo "smoke rc=$rc $((SECONDS-t0))s: $(grep -E 'within their|FAIL' "$L/smoke.log" | head -2 | tr '\n' ' ')"
stop_if_hung $rc "the smoke run"
run_for 280 bins/l/flashlab_gpu_tests --gtest_color=no --gtest_filter='Matrix/CudaVersions.*_d128_*:HeadDim256/CudaVersionsD256.*:HeadDim256/CudaPackedD256.*:Axes/CudaVersionsAxes.*_d128_*:Packed/CudaPacked.*_d128_*' > "$L/tests_l.log" 2>&1
echo "tests l rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_l.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$L/tests_l.log" | head -5
for d in 128 256; do
  run_for 30 compute-sanitizer --tool memcheck --error-exitcode 3 bins/l/flashlab run --backend cuda --versions hopper -d $d --Nq 177 --Nk 300 -H 4 --heads-kv 2 --dtype bf16 --causal --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/memcheck_d$d.log" 2>&1
  echo "memcheck d=$d rc=$? $((SECONDS-t0))s: $(grep -E 'ERROR SUMMARY|within their' "$L/memcheck_d$d.log" | tr '\n' ' ')"
done
for r in 1 2; do
  for b in s l; do
    run_for 60 bins/$b/flashlab bench --backend cuda --versions hopper --passes fwd -N 4096,16384 -d 128,256 --dtype bf16 --causal no,yes --hidden 2048 --repeats 10 --warmup 3 --pause 1000 --json "$OUT/fwd_$b$r.json" > "$L/fwd_$b$r.log" 2>&1
    echo "fwd $b$r rc=$? $((SECONDS-t0))s"
  done
done
python3 scripts/compare_rounds.py "$OUT" --prefix fwd_ --base s --new l --version hopper | tee "$OUT/compare_fwd_l_s.txt"
run_for 90 bins/l/flashlab lab hopper --backend cuda > "$L/lab_hopper_l.log" 2>&1
echo "lab hopper l rc=$? $((SECONDS-t0))s: $(grep -ciE 'FAIL' "$L/lab_hopper_l.log") FAIL lines"
gzip -f "$L"/*.log
cd "$OUT" && tar czf call1.tgz logs $(ls *.json 2>/dev/null) compare_*.txt && rm -rf logs *.json && ls  # at most 8 files come back
echo "elapsed $((SECONDS-t0))s"
