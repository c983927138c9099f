#!/usr/bin/env bash
# Call 5: hopper-deterministic at d = 128 on three binaries, alternating, two rounds:
#   base = 3c5a014 (before the spill work), f = the first form measured in call 4 (the d = 128
#   dQ writer in its lean form), h = 6c01341 (main: the d = 128 writer counts its steps as on
#   3c5a014); then main's determinism and backward tests, and grouped-query forwards of main
#   (causal N = 16384 beside the shapes that differ from it in one thing each).
set -uo pipefail
mkdir -p bins/base bins/f bins/h "$OUT/logs"
for b in base f h; do tar xzf build/carry/$b.tgz -C bins/$b; done
L="$OUT/logs"; t0=$SECONDS
for r in 1 2; do
  for b in base f h; do
    B=bins/$b/flashlab
    timeout 30 $B bench --backend cuda --versions hopper-deterministic --passes bwd -N 16384 -d 128 --dtype bf16 --causal no --repeats 7 --warmup 2 --json "$OUT/dn_$b$r.json" > "$L/dn_$b$r.log" 2>&1
    timeout 30 $B bench --backend cuda --versions hopper-deterministic --passes bwd -d 128 --hidden 2048 --dtype bf16 --causal yes --varlen 24,128,4096 --repeats 7 --warmup 2 --json "$OUT/pb128_$b$r.json" > "$L/pb128_$b$r.log" 2>&1
    echo "$b$r $((SECONDS-t0))s"
  done
done
B=bins/h/flashlab
for c in "16384 4096 8 yes" "16384 4096 32 yes" "16384 2048 16 yes" "16384 4096 8 no" "4096 4096 8 yes" "4096 4096 32 yes" "8192 4096 8 yes"; do
  set -- $c
  timeout 30 $B bench --backend cuda --versions hopper --passes fwd -N $1 -d 128 --hidden $2 --heads-kv $3 --dtype bf16 --causal $4 --repeats 10 --warmup 3 --json "$OUT/gqa_N$1_h$2_kv$3_c$4.json" > "$L/gqa_N$1_h$2_kv$3_c$4.log" 2>&1
done
echo "gqa $((SECONDS-t0))s"
python3 - "$OUT" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
R = {}
for f in sorted(glob.glob(f"{out}/*.json")):
    name = os.path.basename(f)[:-5]
    j = json.load(open(f))
    for x in j["tables"][0]["rows"]:
        print(name, j["tool"]["git_commit"], x["version"], x["pass"] if "pass" in x else "", x["d"], x["N"], x.get("H", ""), x.get("heads_kv", ""), x["causal"], x.get("ok", ""), f'{x["tflops"]:.1f}')
PY
timeout 240 bins/h/flashlab_gpu_tests --gtest_color=no --gtest_filter='Shapes/BwdDeterminism.*:Matrix/BwdKernels.*' > "$L/tests_h.log" 2>&1
echo "tests h rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_h.log" | tr '\n' ' ')"
cd "$OUT" && tar czf call5.tgz logs *.json && rm -rf logs *.json
