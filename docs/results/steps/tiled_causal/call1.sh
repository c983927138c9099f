#!/usr/bin/env bash
# tiled's causal forward with the band's right side alone tested (t = main with right_side.patch)
# against main (h), alternating h, t, h, t over the 20 causal shapes of the 40-shape sweep, each
# pass after a 0.5 s pause; then t's tiled GPU tests. Needs build/carry/h.tgz and t.tgz
# (scripts/device_build.sh of each tree, build/device-bin packed).
set -uo pipefail
mkdir -p bins/h bins/t "$OUT/logs"
for b in h t; do tar xzf build/carry/$b.tgz -C bins/$b; done
L="$OUT/logs"; t0=$SECONDS
for r in 1 2; do
  for b in h t; do
    timeout 120 bins/$b/flashlab bench --backend cuda --versions tiled --passes fwd -N 1024,2048,4096,8192,16384 -d 64,128 --dtype fp16,bf16 --causal yes --repeats 10 --warmup 3 --pause 500 --json "$OUT/causal_$b$r.json" > "$L/causal_$b$r.log" 2>&1
    echo "$b$r rc=$? $((SECONDS-t0))s"
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/compare.txt"
import json, sys, glob, os, math
R = {}
for f in sorted(glob.glob(f"{sys.argv[1]}/causal_[ht][12].json")):
    br = os.path.basename(f)[7:-5]
    for x in json.load(open(f))["tables"][0]["rows"]:
        if x.get("tflops") is None: continue
        R.setdefault((x["dtype"], x["d"], x["N"], x["ok"]), {})[br] = x["tflops"]
rs = []
print("tiled fwd causal TFLOP/s: dtype d N ok | h1 t1 h2 t2 | t/h (means)")
for k in sorted(R, key=str):
    v = R[k]
    if all(n in v for n in ("h1", "h2", "t1", "t2")):
        q = (v["t1"] + v["t2"]) / (v["h1"] + v["h2"]); rs.append(q)
        print(*k, "|", *(f"{v[n]:.1f}" for n in ("h1", "t1", "h2", "t2")), f"| {q:.3f}")
if rs: print(f"geometric mean t/h {math.exp(sum(map(math.log, rs)) / len(rs)):.3f} over {len(rs)} shapes")
PY
timeout 200 bins/t/flashlab_gpu_tests --gtest_color=no --gtest_filter='*tiled*:*Tiled*' > "$L/tests_t.log" 2>&1
echo "tests t rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_t.log" | tr '\n' ' ')"
gzip -f "$L"/*.log
cd "$OUT" && tar czf call1.tgz logs *.json compare.txt && rm -rf logs *.json && ls
