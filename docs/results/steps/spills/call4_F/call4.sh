#!/usr/bin/env bash
# call 4: binary F (the backward without spills, final form): its GPU tests and sanitizers, then
# its changed backward kernels timed beside main's binary (head), alternating, two rounds
set -uo pipefail
mkdir -p bins/head bins/f "$OUT/logs"
tar xzf build/carry/head.tgz -C bins/head; tar xzf build/carry/f.tgz -C bins/f
L="$OUT/logs"; t0=$SECONDS; F=bins/f
timeout 270 $F/flashlab_gpu_tests --gtest_color=no --gtest_filter='Matrix/BwdKernels.*:Packed/*:Axes/*:Shapes/BwdDeterminism.*:Masks/CudaDeterminism.*:BwdKernels.*:CudaDeterminism.*:HeadDim256/BwdKernelsD256.*' > "$L/tests_f.log" 2>&1
echo "tests F rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_f.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]" "$L/tests_f.log" | head -n 10
for tool in memcheck synccheck racecheck; do
  for d in 64 128; do
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $F/flashlab run --backend cuda --versions hopper,hopper-deterministic --seqlens 1,130,77,300 -H 4 --heads-kv 2 -d $d --dtype bf16 --causal --window 100,0 --repeats 1 --warmup 0 > "$L/san_${tool}_packed_d$d.log" 2>&1
    echo "$tool packed d=$d rc=$? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$L/san_${tool}_packed_d$d.log" | tail -1)"
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $F/flashlab run --backend cuda --versions hopper,hopper-deterministic -B 1 -H 4 --heads-kv 2 --Nq 300 --Nk 333 -d $d --dtype fp16 --causal --repeats 1 --warmup 0 > "$L/san_${tool}_dense_d$d.log" 2>&1
    echo "$tool dense d=$d rc=$? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$L/san_${tool}_dense_d$d.log" | tail -1)"
  done
done
echo "checks done $((SECONDS-t0))s"
for r in 1 2; do
  for b in head f; do
    B=bins/$b/flashlab
    for d in 64 128; do
      timeout 25 $B bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -d $d --hidden $((16*d)) --dtype bf16 --causal yes --varlen 24,128,4096 --repeats 7 --warmup 2 --json "$OUT/pb${d}_$b$r.json" > "$L/pb${d}_$b$r.log" 2>&1
    done
    timeout 40 $B bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -N 16384 -d 64,128 --dtype bf16 --causal no --repeats 7 --warmup 2 --json "$OUT/dn_$b$r.json" > "$L/dn_$b$r.log" 2>&1
    echo "$b$r $((SECONDS-t0))s"
  done
  [ $((SECONDS-t0)) -gt 560 ] && break
done
python3 - "$OUT" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
R = {}
for f in glob.glob(f"{out}/*.json"):
    b = os.path.basename(f)[:-5].split("_")[1]
    for x in json.load(open(f))["tables"][0]["rows"]:
        R.setdefault((x["version"], x["d"], x["N"], "c" if x["causal"] else "nc"), {})[b] = x["tflops"]
names = ["head1", "f1", "head2", "f2"]
print("version d N mask |", *names, "| f1/head1 f2/head2")
for k in sorted(R, key=str):
    v = R[k]
    rat = [f"{v[f'f{r}'] / v[f'head{r}']:.3f}" for r in "12" if f"f{r}" in v and f"head{r}" in v]
    print(*k, "|", *[f"{v[n]:.1f}" if n in v else "-" for n in names], "|", *rat)
PY
cd "$OUT" && tar czf call4.tgz logs *.json && rm -rf logs *.json
