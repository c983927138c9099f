#!/usr/bin/env bash
# hopper's forward at d = 64 without the lean bookkeeping in the dense kernels without a left side
# (n = 62aeebd with lean_off.patch: kLean = W == 3 && (kPacked || kLeft) in fwd_consumer.cuh; ptxas: 128 registers,
# no spill) against main 62aeebd (h): the 20 forward shapes at d = 64 of the sweep (N = 1024 ...
# 16384, fp16 and bf16, causal and not; B*N = 16k tokens, hidden 2048), alternating h, n, two
# rounds, each pass after a 0.5 s pause; then n's GPU tests of every version at d = 64. Needs
# build/carry/h1.tgz (main's stripped flashlab) and n.tgz (flashlab and the GPU tests).
set -uo pipefail
mkdir -p "$OUT/logs" bins/h bins/n
tar xzf build/carry/h1.tgz -C bins/h; tar xzf build/carry/n.tgz -C bins/n
L="$OUT/logs"; t0=$SECONDS
for r in 1 2; do
  for b in h n; do
    timeout 60 bins/$b/flashlab bench --backend cuda --versions hopper --passes fwd -N 1024,2048,4096,8192,16384 -d 64 --dtype fp16,bf16 --causal yes,no --hidden 2048 --repeats 10 --warmup 3 --pause 500 --json "$OUT/d64_$b$r.json" > "$L/d64_$b$r.log" 2>&1
    echo "$b$r rc=$? $((SECONDS-t0))s"
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/compare.txt"
import json, sys, glob, os, math
R = {}
for f in sorted(glob.glob(f"{sys.argv[1]}/d64_[hn][12].json")):
    br = os.path.basename(f)[4:-5]
    for t in json.load(open(f))["tables"]:
        for x in t.get("rows", []):
            if x.get("tflops") is None or x.get("version") != "hopper": continue
            R.setdefault((x["dtype"], x["causal"], x["N"]), {})[br] = x["tflops"]
names = ("h1", "n1", "h2", "n2")
print("hopper fwd d = 64 TFLOP/s: dtype causal N |", *names, "| n/h (sums of the two rounds), h2/h1")
q = []
for k in sorted(R, key=str):
    v = R[k]
    if all(n in v for n in names):
        a = (v["n1"] + v["n2"]) / (v["h1"] + v["h2"]); q.append(a)
        print(*k, "|", *(f"{v[n]:.1f}" for n in names), f"| {a:.3f} {v['h2'] / v['h1']:.3f}")
if q: print(f"geometric mean over {len(q)} shapes: n/h {math.exp(sum(map(math.log, q)) / len(q)):.3f}; lowest {min(q):.3f}, highest {max(q):.3f}")
PY
timeout 100 bins/n/flashlab_gpu_tests --gtest_color=no --gtest_filter='*CudaVersions*d64*:Packed/*d64*' > "$L/tests_n.log" 2>&1
echo "tests n rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_n.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$L/tests_n.log" | head -5
gzip -f "$L"/*.log
cd "$OUT" && tar czf call9.tgz logs *.json compare.txt && rm -rf logs *.json && ls
