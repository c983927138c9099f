#!/usr/bin/env bash
# Call 1 (outputs: call1/). Correctness of s, main with the five prepared patches in order
# (bwd80/wide.patch, poly_exp2/poly.patch, fp8/quant_rcp/quant_rcp.patch, fp8/bc192/bc192.patch,
# desc/desc.patch): 91 of main's 243 kernels change and wide adds 4 (the Hopper rung's forward and
# backward for desc, the d = 128 backward's 80-row steps for wide, the d = 64 forward for poly, the
# FP8 rung), so first a smoke run of each family, then the GPU test matrices that hold every
# version to its budget at d = 64, 128 (Matrix: dense, causal and not, ragged) and 256
# (HeadDim256), the FA2 and Hopper backward kernels (Matrix/BwdKernels, HeadDim256/BwdKernelsD256)
# and the FP8 rung.
# Needs build/carry/s.tgz (stripped flashlab and flashlab_gpu_tests; version string 5d1f070).
set -uo pipefail
mkdir -p "$OUT/logs" bins/s
tar xzf build/carry/s.tgz -C bins/s
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
stop_if_hung() { if [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; then echo "$2 ran out of its time: stopping the call here"; gzip -f "$L"/*.log; exit 1; fi; }
bins/s/flashlab --version
for d in 64 128 256; do
  run_for 30 bins/s/flashlab run --backend cuda --versions hopper,hopper-deterministic -d $d --Nq 177 --Nk 300 -H 4 --heads-kv 2 --dtype bf16 --repeats 1 --warmup 0 > "$L/smoke_d$d.log" 2>&1
  rc=$?; echo "smoke d=$d rc=$rc $((SECONDS-t0))s: $(grep -E 'within their|FAIL' "$L/smoke_d$d.log" | head -2 | tr '\n' ' ')"
  stop_if_hung $rc "the smoke run at d = $d"
done
run_for 30 bins/s/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8,hopper-fp8-per-tensor -d 128 --Nq 177 --Nk 300 -H 4 --heads-kv 2 --repeats 1 --warmup 0 > "$L/smoke_fp8.log" 2>&1
rc=$?; echo "smoke fp8 rc=$rc $((SECONDS-t0))s: $(grep -E 'within their|FAIL' "$L/smoke_fp8.log" | head -2 | tr '\n' ' ')"
stop_if_hung $rc "the FP8 smoke run"
run_tests() {  # name, time limit, filter
  run_for "$2" bins/s/flashlab_gpu_tests --gtest_color=no --gtest_filter="$3" > "$L/tests_$1.log" 2>&1
  echo "tests $1 rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_$1.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$L/tests_$1.log" | head -5
}
run_tests matrix 200 'Matrix/CudaVersions.*'
run_tests d256 150 'HeadDim256/CudaVersionsD256.*:HeadDim256/BwdKernelsD256.*'
run_tests bwd_kernels 120 'Matrix/BwdKernels.*'
run_tests fp8 60 'HopperFp8/*:CudaHopperFp8Quantization.*:Fp8Cuda.*:GpuHopperFp8Entry.*'
gzip -f "$L"/*.log
cd "$OUT" && tar czf call1.tgz logs && rm -rf logs && ls  # at most 8 files come back: one archive
