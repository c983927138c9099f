#!/usr/bin/env bash
# call 5 (binary HEAD): the kernels whose machine code differs from main's (9a57e0d), timed beside
# main's binary, alternating, two rounds; then their GPU tests (packed batches) and runs against
# fp64 with a window's left side.
set -uo pipefail
mkdir -p build/device-bin build/old "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
tar xzf build/carry/old.tgz -C build/old
B=build/device-bin
L="$OUT/logs"
t0=$SECONDS
$B/flashlab --version | head -1; build/old/flashlab --version | head -1
for v in old:build/old/flashlab new:$B/flashlab old2:build/old/flashlab new2:$B/flashlab; do
  F=${v#*:}; n=${v%%:*}
  timeout 25 $F bench --backend cuda --versions hopper --passes fwd -N 4096,16384 -d 64 --dtype bf16 --causal no,yes --repeats 7 --warmup 2 --json "$OUT/dense_$n.json" > "$L/dense_$n.log" 2>&1
  r1=$?
  timeout 25 $F bench --backend cuda --versions hopper --passes fwd -N 4096,16384 -d 128,256 --dtype bf16 --causal yes --repeats 7 --warmup 2 --json "$OUT/densec_$n.json" > "$L/densec_$n.log" 2>&1
  for d in 64 128; do
    timeout 20 $F bench --backend cuda --versions hopper --passes fwd -d $d --hidden $((16*d)) --dtype bf16 --causal yes --varlen 24,128,4096 --repeats 7 --warmup 2 --json "$OUT/pf${d}_$n.json" > "$L/pf${d}_$n.log" 2>&1
  done
  for d in 64 128; do
    timeout 25 $F bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -d $d --hidden $((16*d)) --dtype bf16 --causal yes --varlen 24,128,4096 --repeats 7 --warmup 2 --json "$OUT/pb${d}_$n.json" > "$L/pb${d}_$n.log" 2>&1
  done
  echo "$n dense rc=$r1, $((SECONDS-t0))s"
done
python3 - "$OUT" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
def rows(n):
    r = {}
    for f in sorted(glob.glob(f"{out}/*_{n}.json")):
        for x in json.load(open(f))["tables"][0]["rows"]:
            kind = "dense" if os.path.basename(f).startswith("dense") else "packed"
            key = (x["version"], x["pass"], x["d"], "causal" if x["causal"] else "nc", x["N"], kind)
            r[key] = x["tflops"]
    return r
R = {n: rows(n) for n in ["old", "new", "old2", "new2"]}
print("version pass d mask N kind | old new old2 new2 | new/old, new2/old2")
for k in sorted(R["old"], key=str):
    v = [R[n].get(k) for n in ["old", "new", "old2", "new2"]]
    if None in v: continue
    print(*k, "|", *[f"{x:.1f}" for x in v], "|", f"{v[1]/v[0]:.3f} {v[3]/v[2]:.3f}")
PY
timeout 80 $B/flashlab_gpu_tests --gtest_filter='Packed/*' > "$L/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/gpu_tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]" "$L/gpu_tests.log" | head -n 10
for d in 64 128 256; do  # dense with a window's left side, grouped heads, fp16 and bf16
  for dt in fp16 bf16; do
    timeout 20 $B/flashlab run --backend cuda --versions hopper,hopper-deterministic -B 2 -H 8 --heads-kv 2 --Nq 1000 --Nk 1100 -d $d --dtype $dt --causal --window 200,0 --repeats 1 --warmup 0 --bitwise-repeats 2 > "$L/run_$d$dt.log" 2>&1
    echo "run d=$d $dt window rc=$? $(grep -E 'within their|FAIL|not bitwise' "$L/run_$d$dt.log" | tr '\n' ' ')"
  done
done
echo "elapsed $((SECONDS-t0))s"
cd "$OUT" && tar czf call5.tgz logs *.json && rm -rf logs *.json
