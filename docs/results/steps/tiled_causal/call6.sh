#!/usr/bin/env bash
# Prepared, not run: old_count.patch (p = main with kv0 the constant 0 at d = 128 too and
# ec149c0's count of the K/V tiles in the right-side kernel; its K/V loop compiles to ec149c0's
# but for the mask block and where the band test sits among the Q.K^T MMAs: ptxas 255 registers
# and the same 8-byte spill) against ec149c0 (o) and main (m): alternating o, m, p twice over
# the 10 causal d = 128 shapes of the 40-shape sweep, no pause (ec149c0's bench has none); then
# p's GPU tests of every version on every causal problem of the matrices. Needs
# build/carry/o1.tgz (ec149c0's stripped flashlab), m1.tgz (main's stripped flashlab) and p.tgz
# (scripts/device_build.sh of main with the patch, build/device-bin packed).
set -uo pipefail
mkdir -p "$OUT/logs" bins/o bins/m bins/p
tar xzf build/carry/o1.tgz -C bins/o; tar xzf build/carry/m1.tgz -C bins/m; tar xzf build/carry/p.tgz -C bins/p
L="$OUT/logs"; t0=$SECONDS
for r in 1 2; do
  for b in o m p; do
    timeout 60 bins/$b/flashlab bench --backend cuda --versions tiled --N 1024 2048 4096 8192 16384 -d 128 --dtype fp16 bf16 --causal yes --repeats 10 --warmup 3 --json "$OUT/causal_$b$r.json" > "$L/causal_$b$r.log" 2>&1
    echo "$b$r rc=$? $((SECONDS-t0))s"
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/compare.txt"
import json, sys, glob, os, math
R = {}
for f in sorted(glob.glob(f"{sys.argv[1]}/causal_[omp][12].json")):
    br = os.path.basename(f)[7:-5]
    for t in json.load(open(f))["tables"]:
        for x in t.get("rows", []):
            if x.get("tflops") is None or x.get("version") != "tiled": continue
            R.setdefault((x["dtype"], x["d"], x["N"]), {})[br] = x["tflops"]
names = ("o1", "m1", "p1", "o2", "m2", "p2")
print("tiled fwd causal TFLOP/s: dtype d N |", *names, "| m/o p/o (means of the two rounds)")
qm, qp = [], []
for k in sorted(R, key=str):
    v = R[k]
    if all(n in v for n in names):
        o = v["o1"] + v["o2"]; a = (v["m1"] + v["m2"]) / o; b = (v["p1"] + v["p2"]) / o
        qm.append(a); qp.append(b)
        print(*k, "|", *(f"{v[n]:.1f}" for n in names), f"| {a:.3f} {b:.3f}")
g = lambda q: math.exp(sum(map(math.log, q)) / len(q))
if qm: print(f"geometric mean over {len(qm)} shapes: m/o {g(qm):.3f}, p/o {g(qp):.3f}; lowest p/o {min(qp):.3f}")
PY
cd "$OUT" && tar czf call6_results.tgz compare.txt *.json && cd - > /dev/null
timeout 200 bins/p/flashlab_gpu_tests --gtest_color=no --gtest_filter='*CudaVersions*causal*' > "$L/tests_p.log" 2>&1
echo "tests p rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_p.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$L/tests_p.log" | head -5
gzip -f "$L"/*.log
cd "$OUT" && tar czf call6.tgz logs *.json compare.txt && rm -rf logs *.json call6_results.tgz && ls
