#!/usr/bin/env bash
# tiled's causal forward at ec149c0 (o, before grouped heads, packed batches and windows), at main
# (h) and at main with right_side.patch (t), alternating o, h, t twice over the 20 causal shapes of
# the 40-shape sweep, with no pause (ec149c0's bench has none), so the three are timed alike.
# Needs build/carry/o1.tgz, h1.tgz, t1.tgz (each the stripped flashlab alone).
set -uo pipefail
mkdir -p "$OUT/logs"
for b in o h t; do mkdir -p bins/$b; tar xzf build/carry/${b}1.tgz -C bins/$b; done
L="$OUT/logs"; t0=$SECONDS
for r in 1 2; do
  for b in o h t; do
    timeout 100 bins/$b/flashlab bench --backend cuda --versions tiled --N 1024 2048 4096 8192 16384 -d 64 128 --dtype fp16 bf16 --causal yes --repeats 10 --warmup 3 --json "$OUT/causal_$b$r.json" > "$L/causal_$b$r.log" 2>&1
    echo "$b$r rc=$? $((SECONDS-t0))s"
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/compare.txt"
import json, sys, glob, os, math
R = {}
for f in sorted(glob.glob(f"{sys.argv[1]}/causal_[oht][12].json")):
    br = os.path.basename(f)[7:-5]
    for t in json.load(open(f))["tables"]:
        for x in t.get("rows", []):
            if x.get("tflops") is None or x.get("version", "tiled") != "tiled": continue
            R.setdefault((x["dtype"], x["d"], x["N"]), {})[br] = x["tflops"]
names = ("o1", "h1", "t1", "o2", "h2", "t2")
print("tiled fwd causal TFLOP/s: dtype d N |", *names, "| h/o t/o (means of the two rounds)")
qh, qt = [], []
for k in sorted(R, key=str):
    v = R[k]
    if all(n in v for n in names):
        o = v["o1"] + v["o2"]; a = (v["h1"] + v["h2"]) / o; b = (v["t1"] + v["t2"]) / o
        qh.append(a); qt.append(b)
        print(*k, "|", *(f"{v[n]:.1f}" for n in names), f"| {a:.3f} {b:.3f}")
g = lambda q: math.exp(sum(map(math.log, q)) / len(q))
if qh: print(f"geometric mean over {len(qh)} shapes: h/o {g(qh):.3f}, t/o {g(qt):.3f}")
PY
gzip -f "$L"/*.log
cd "$OUT" && tar czf call2.tgz logs *.json compare.txt && rm -rf logs *.json && ls
