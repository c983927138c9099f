#!/usr/bin/env bash
# call 3: which of A's changes slows the packed backward: head (main), a (all), v1 (the writer and
# the roles' block), v2 (the consumers' range each step), v3 (the masked scores against constants)
set -uo pipefail
mkdir -p bins "$OUT/logs"
for b in head a v1 v2 v3; do mkdir -p bins/$b; tar xzf build/carry/$b.tgz -C bins/$b flashlab; done
L="$OUT/logs"; t0=$SECONDS
for r in 1 2; do
  for b in head a v1 v2 v3; do
    F=bins/$b/flashlab
    for d in 64 128; do
      timeout 25 $F bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -d $d --hidden $((16*d)) --dtype bf16 --causal yes --varlen 24,128,4096 --repeats 7 --warmup 2 --json "$OUT/pb${d}_$b$r.json" > "$L/pb${d}_$b$r.log" 2>&1
    done
    if [ $b = head ] || [ $b = a ]; then
      timeout 40 $F bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -N 16384 -d 128 --dtype bf16 --causal no --repeats 7 --warmup 2 --json "$OUT/dn_$b$r.json" > "$L/dn_$b$r.log" 2>&1
    fi
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
        R.setdefault((x["version"], x["d"], x["N"]), {})[b] = x["tflops"]
names = [f"{b}{r}" for r in "12" for b in ["head", "a", "v1", "v2", "v3"]]
print("version d N |", *names)
for k in sorted(R, key=str):
    print(*k, "|", *[f"{R[k][n]:.1f}" if n in R[k] else "-" for n in names])
PY
cd "$OUT" && tar czf call3.tgz logs *.json && rm -rf logs *.json
