#!/usr/bin/env bash
# Call 1 (outputs: call1/). Correctness of l: main with the six prepared patches in order
# (bwd80/wide.patch, poly_exp2/poly.patch, fp8/quant_rcp/quant_rcp.patch, fp8/bc192/bc192.patch,
# desc/desc.patch, lag/lag.patch; version string bdf5451). A smoke run of each changed family, the
# sanitizers on small ragged grouped shapes of each, then every GPU test suite whose kernels the
# patches change (the Hopper rung's forward and backward at d = 64, 128 and 256, the FP8 rung), the
# FA2 rungs beside them in the same suites. Needs build/carry/l.txz.
set -uo pipefail
mkdir -p "$OUT/logs"
# Binaries travel as xz-compressed tar files (a third of gzip's size); tar's -J needs xz, Python's
# tarfile is the fallback.
unpack() {  # archive letter
  mkdir -p "bins/$2"
  tar xJf "build/carry/$1.txz" -C "bins/$2" 2>/dev/null || python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "build/carry/$1.txz" "bins/$2"
}
unpack l l
export PATH="$PATH:/usr/local/cuda/bin"
L="$OUT/logs"; t0=$SECONDS
# Each command's time limit is cut to what is left of BUDGET s (default 530), and a command that would get less than
# 5 s is skipped (exit 125), so that the archive at the end is always made.
run_for() {
  local left=$((${BUDGET:-530} - SECONDS + t0)) n=$1
  shift
  [ "$left" -lt "$n" ] && n=$left
  if [ "$n" -lt 5 ]; then echo "skipped (no time left): $*"; return 125; fi
  timeout -k 10 "$n" "$@"
}
archive() { gzip -f "$L"/*.log; cd "$OUT" && tar czf call1.tgz logs && rm -rf logs && ls; }
# A first GPU command that runs out of its time has most likely hung on the GPU.
stop_if_hung() { if [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; then echo "$2 ran out of its time: stopping the call here"; archive; exit 1; fi; }
bins/l/flashlab --version
for d in 64 128 256; do
  run_for 30 bins/l/flashlab run --backend cuda --versions hopper,hopper-deterministic -d $d --Nq 177 --Nk 300 -H 4 --heads-kv 2 --dtype bf16 --causal --repeats 1 --warmup 0 > "$L/smoke_d$d.log" 2>&1
  rc=$?; echo "smoke d=$d rc=$rc $((SECONDS-t0))s: $(grep -E 'within their|FAIL' "$L/smoke_d$d.log" | head -2 | tr '\n' ' ')"
  stop_if_hung $rc "the smoke run at d = $d"
done
run_for 30 bins/l/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8,hopper-fp8-per-tensor -d 128 --Nq 177 --Nk 300 -H 4 --heads-kv 2 --repeats 1 --warmup 0 > "$L/smoke_fp8.log" 2>&1
rc=$?; echo "smoke fp8 rc=$rc $((SECONDS-t0))s: $(grep -E 'within their|FAIL' "$L/smoke_fp8.log" | head -2 | tr '\n' ' ')"
stop_if_hung $rc "the FP8 smoke run"
san() {  # tool, versions, d, shape...
  local tool=$1 versions=$2 d=$3; shift 3
  local log="$L/san_${tool}_d${d}_$(echo "$versions$*" | tr -d ' ,-' | cut -c1-40).log"
  run_for 40 compute-sanitizer --tool $tool --error-exitcode 3 bins/l/flashlab run --backend cuda --versions $versions -d $d "$@" --repeats 1 --warmup 0 --bitwise-repeats 0 > "$log" 2>&1
  echo "$tool $versions d=$d [$*] rc=$? $((SECONDS-t0))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|within their' "$log" | tr '\n' ' ')"
}
for d in 64 128 256; do
  san memcheck hopper,hopper-deterministic $d --Nq 177 --Nk 300 -H 4 --heads-kv 2 --dtype bf16 --causal
done
san memcheck hopper,hopper-deterministic 128 --Nq 1000 --Nk 17 -H 2 --dtype fp16
san racecheck hopper,hopper-deterministic 128 --Nq 177 --Nk 300 -H 4 --heads-kv 2 --dtype bf16
san synccheck hopper,hopper-deterministic 128 --Nq 177 --Nk 300 -H 4 --heads-kv 2 --dtype bf16
san racecheck hopper 256 --Nq 177 --Nk 300 -H 4 --heads-kv 2 --dtype bf16 --causal
for tool in memcheck racecheck synccheck; do
  san $tool hopper-fp8,hopper-fp8-per-tensor 128 --Nq 200 --Nk 1000 -H 4 --heads-kv 2 --dtype fp8 --causal
done
run_tests() {  # name, time limit, filter
  run_for "$2" bins/l/flashlab_gpu_tests --gtest_color=no --gtest_filter="$3" > "$L/tests_$1.log" 2>&1
  echo "tests $1 rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_$1.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$L/tests_$1.log" | head -5
}
run_tests matrix 90 'Matrix/CudaVersions.*'
run_tests bwd_kernels 50 'Matrix/BwdKernels.*:BwdKernels.*'
run_tests fp8 30 'HopperFp8/*:CudaHopperFp8Quantization.*:Fp8Cuda.*:GpuHopperFp8Entry.*'
run_tests determinism 40 'Shapes/BwdDeterminism.*:Masks/CudaDeterminism.*:CudaDeterminism.*'
run_tests d256 180 'HeadDim256/*'
run_tests axes 120 'Axes/CudaVersionsAxes.*'
run_tests packed 70 'Packed/CudaPacked.*'
run_tests labs 60 'GpuLabs.*:CudaRunner.*'
archive
echo "elapsed $((SECONDS-t0))s"
