#!/usr/bin/env bash
# tiled's causal forward at ec149c0 (o) against r = main with the causal mask's own kernel (the
# band's right side alone, right_side.patch) whose first K/V tile is the constant 0 (no runtime
# kv0 in the loads: ptxas 255 registers and no spill at d = 128, where the kernel testing both
# sides spills 8 bytes), alternating o, r twice over the 20 causal shapes of the 40-shape sweep,
# no pause (ec149c0's bench has none); then r's GPU tests of every version on every causal problem of the matrices (dense, grouped
# heads, windows, d = 256). Needs build/carry/o1.tgz (stripped flashlab alone) and r.tgz.
set -uo pipefail
mkdir -p "$OUT/logs" bins/o bins/r
tar xzf build/carry/o1.tgz -C bins/o; tar xzf build/carry/r.tgz -C bins/r
L="$OUT/logs"; t0=$SECONDS
for r in 1 2; do
  for b in o r; do
    timeout 100 bins/$b/flashlab bench --backend cuda --versions tiled --N 1024 2048 4096 8192 16384 -d 64 128 --dtype fp16 bf16 --causal yes --repeats 10 --warmup 3 --json "$OUT/causal_$b$r.json" > "$L/causal_$b$r.log" 2>&1
    echo "$b$r rc=$? $((SECONDS-t0))s"
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/compare.txt"
import json, sys, glob, os, math
R = {}
for f in sorted(glob.glob(f"{sys.argv[1]}/causal_[or][12].json")):
    br = os.path.basename(f)[7:-5]
    for t in json.load(open(f))["tables"]:
        for x in t.get("rows", []):
            if x.get("tflops") is None or x.get("version") != "tiled": continue
            R.setdefault((x["dtype"], x["d"], x["N"]), {})[br] = x["tflops"]
names = ("o1", "r1", "o2", "r2")
print("tiled fwd causal TFLOP/s: dtype d N |", *names, "| r/o (means of the two rounds)")
q = []
for k in sorted(R, key=str):
    v = R[k]
    if all(n in v for n in names):
        a = (v["r1"] + v["r2"]) / (v["o1"] + v["o2"]); q.append(a)
        print(*k, "|", *(f"{v[n]:.1f}" for n in names), f"| {a:.3f}")
if q: print(f"geometric mean r/o over {len(q)} shapes: {math.exp(sum(map(math.log, q)) / len(q)):.3f}, lowest {min(q):.3f}")
PY
timeout 200 bins/r/flashlab_gpu_tests --gtest_color=no --gtest_filter='*CudaVersions*causal*' > "$L/tests_r.log" 2>&1
echo "tests r rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_r.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$L/tests_r.log" | head -5
gzip -f "$L"/*.log
cd "$OUT" && tar czf call4.tgz logs *.json compare.txt && rm -rf logs *.json && ls
