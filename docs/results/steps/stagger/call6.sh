#!/usr/bin/env bash
# Call 6: the rotated walk of the d = 128 hopper backward (r = d52d3f1) against main before it
# (h = 69da667), alternating, two rounds; then r beside PyTorch on the grouped-heads sweep, its
# backward tests, and compute-sanitizer on small rotated walks (grouped heads, Nq != Nk, packed,
# a window without a right side).
set -uo pipefail
mkdir -p bins/h bins/r "$OUT/logs"
for b in h r; do tar xzf build/carry/$b.tgz -C bins/$b; done
L="$OUT/logs"; t0=$SECONDS
bench() {  # bin tag args...
  local b=$1 tag=$2; shift 2
  timeout 60 bins/$b/flashlab bench --backend cuda --versions hopper --passes bwd -d 128 --repeats 10 --warmup 3 --json "$OUT/${tag}_$b$r.json" "$@" > "$L/${tag}_$b$r.log" 2>&1
}
for r in 1 2; do
  for b in h r; do
    bench $b dense --dtype bf16 -N 4096,16384 --causal no
    bench $b dcausal --dtype bf16 -N 16384 --causal yes
    bench $b gqa --dtype bf16 -N 4096,16384 --causal no,yes --hidden 4096 --heads-kv 8
    bench $b f16 --dtype fp16 -N 8192 --causal no
    bench $b packed --dtype bf16 --hidden 2048 --causal yes --varlen 24,128,4096
    echo "$b$r $((SECONDS-t0))s"
  done
done
python3 - "$OUT" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
R = {}
for f in sorted(glob.glob(f"{out}/*.json")):
    tag, br = os.path.basename(f)[:-5].rsplit("_", 1)
    for x in json.load(open(f))["tables"][0]["rows"]:
        R.setdefault((tag, x["dtype"], x["N"], "c" if x["causal"] else "nc", x["ok"]), {})[br] = x["tflops"]
names = ["h1", "r1", "h2", "r2"]
print("bwd TFLOP/s: tag dtype N mask ok |", *names, "| r/h (means)")
for k in sorted(R, key=str):
    v = R[k]; h = [v[n] for n in ("h1", "h2") if n in v]; rr = [v[n] for n in ("r1", "r2") if n in v]
    ratio = f"{(sum(rr)/len(rr))/(sum(h)/len(h)):.3f}" if h and rr else "-"
    print(*k, "|", *[f"{v[n]:.1f}" if n in v else "-" for n in names], "|", ratio)
PY
echo "bench $((SECONDS-t0))s"
timeout 200 python3 scripts/compare_torch.py --flashlab bins/r/flashlab --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8 --out "$OUT/compare_gqa_d52d3f1.json" > "$L/compare_gqa.log" 2>&1
echo "compare rc=$? $((SECONDS-t0))s"; tail -25 "$L/compare_gqa.log"
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 bins/r/flashlab run --backend cuda --versions hopper -B 2 -H 4 --heads-kv 2 --Nq 300 --Nk 700 -d 128 --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_$tool.log" 2>&1
  a=$?
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 bins/r/flashlab run --backend cuda --versions hopper -H 4 --heads-kv 2 --seqlens 1,130,300,77 -d 128 --window 100,-1 --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_packed_$tool.log" 2>&1
  echo "$tool rc=$a,$? $(grep -h 'ERROR SUMMARY' $L/san_$tool.log $L/san_packed_$tool.log | tr '\n' ' ')"
done
echo "san $((SECONDS-t0))s"
timeout 150 bins/r/flashlab_gpu_tests --gtest_color=no --gtest_filter='Matrix/BwdKernels.*:Axes/*:Packed/*' > "$L/tests_r.log" 2>&1
echo "tests r rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_r.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$L/tests_r.log" | head
cd "$OUT" && tar czf call6.tgz logs *.json && rm -rf logs *_h?.json *_r?.json && ls
