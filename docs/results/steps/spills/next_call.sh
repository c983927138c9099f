#!/usr/bin/env bash
# Not run yet (the device time ran out): the committed binary (z: F with the dQ writer counting its
# steps on where it has 32 registers:
# hopper-deterministic at d = 128): its determinism tests, and hopper-deterministic d = 128 timed
# beside main's binary (head), alternating, two rounds
set -uo pipefail
mkdir -p bins/head bins/z "$OUT/logs"
tar xzf build/carry/head.tgz -C bins/head; tar xzf build/carry/z.tgz -C bins/z
L="$OUT/logs"; t0=$SECONDS
for r in 1 2; do
  for b in head z; do
    B=bins/$b/flashlab
    timeout 20 $B bench --backend cuda --versions hopper-deterministic --passes bwd -N 16384 -d 128 --dtype bf16 --causal no --repeats 7 --warmup 2 --json "$OUT/dn_$b$r.json" > "$L/dn_$b$r.log" 2>&1
    timeout 20 $B bench --backend cuda --versions hopper-deterministic --passes bwd -d 128 --hidden 2048 --dtype bf16 --causal yes --varlen 24,128,4096 --repeats 7 --warmup 2 --json "$OUT/pb128_$b$r.json" > "$L/pb128_$b$r.log" 2>&1
    echo "$b$r $((SECONDS-t0))s"
  done
done
python3 - "$OUT" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
R = {}
for f in glob.glob(f"{out}/*.json"):
    b = os.path.basename(f)[:-5].split("_")[1]
    for x in json.load(open(f))["tables"][0]["rows"]:
        R.setdefault((x["version"], x["d"], x["N"], "c" if x["causal"] else "nc", x["ok"] if "ok" in x else ""), {})[b] = x["tflops"]
names = ["head1", "z1", "head2", "z2"]
print("version d N mask ok |", *names)
for k in sorted(R, key=str):
    print(*k, "|", *[f"{R[k][n]:.1f}" if n in R[k] else "-" for n in names])
PY
timeout 45 bins/z/flashlab_gpu_tests --gtest_color=no --gtest_filter='Shapes/BwdDeterminism.*' > "$L/tests_z.log" 2>&1
echo "tests Z rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_z.log" | tr '\n' ' ')"
cd "$OUT" && tar czf call5.tgz logs *.json && rm -rf logs *.json
