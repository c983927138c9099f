#!/usr/bin/env bash
# Call 4 (outputs: call4/): what call 1 left open, and l beside PyTorch where time allows. The d = 64
# causal failures of call 1 (Nq = Nk = 17) on l, p (main with poly.patch) and e (main); the d = 256
# test suites that ran out of their time; then the forward at d = 256, bf16, beside PyTorch.
set -uo pipefail
mkdir -p "$OUT/logs"
unpack() {  # archive letter
  mkdir -p "bins/$2"
  tar xJf "build/carry/$1.txz" -C "bins/$2" 2>/dev/null || python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "build/carry/$1.txz" "bins/$2"
}
unpack e e; unpack p4f p; unpack l l
L="$OUT/logs"; t0=$SECONDS
run_for() {
  local left=$((${BUDGET:-400} - SECONDS + t0)) n=$1
  shift
  [ "$left" -lt "$n" ] && n=$left
  if [ "$n" -lt 5 ]; then echo "skipped (no time left): $*"; return 125; fi
  timeout -k 10 "$n" "$@"
}
for b in e p l; do
  for dt in fp16 bf16; do
    run_for 20 bins/$b/flashlab run --backend cuda --versions hopper -d 64 -B 2 -H 3 --Nq 17 --Nk 17 --causal --dtype $dt --repeats 1 --warmup 0 > "$L/d64_$b$dt.log" 2>&1
    echo "d64 causal 17 $b $dt rc=$?: $(grep -E '^hopper|within|FAIL' "$L/d64_$b$dt.log" | head -3 | tr '\n' ' ')"
  done
  run_for 20 bins/$b/flashlab run --backend cuda --versions hopper -d 64 -B 1 -H 2 --Nq 1000 --Nk 17 --causal --window 64,0 --dtype fp16 --repeats 1 --warmup 0 > "$L/d64w_$b.log" 2>&1
  echo "d64 window $b rc=$?: $(grep -E '^hopper|within|FAIL' "$L/d64w_$b.log" | head -3 | tr '\n' ' ')"
done
run_for 150 bins/l/flashlab_gpu_tests --gtest_color=no --gtest_filter='HeadDim256/CudaVersionsD256.*' > "$L/tests_d256.log" 2>&1
echo "tests d256 rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_d256.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$L/tests_d256.log" | head -5
export PYTHONUNBUFFERED=1
run_for 200 python3 scripts/compare_torch.py --flashlab bins/l/flashlab --versions hopper --passes fwd -d 256 --dtype bf16 -N 4096,8192,16384 --pause 1000 --out "$OUT/compare_torch_fwd_d256.json" > "$L/fwd_d256.log" 2>&1
echo "fwd d256 rc=$? $((SECONDS-t0))s"; grep -E "^hopper|vs cuDNN" "$L/fwd_d256.log"
gzip -f "$L"/*.log
cd "$OUT" && tar czf call4.tgz logs $(ls *.json 2>/dev/null) && rm -rf logs *.json && ls
echo "elapsed $((SECONDS-t0))s"
