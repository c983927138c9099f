#!/usr/bin/env bash
# Call 7: two dQ accumulators for the d = 128 hopper backward (a = ea31c7d) against main before this session (h = 69da667)
# alternating, two rounds; then a beside PyTorch on the grouped-heads sweep, its
# backward tests (d = 128), and compute-sanitizer on small problems (grouped heads, Nq != Nk, packed,
# a window without a right side).
set -uo pipefail
mkdir -p bins/h bins/a "$OUT/logs"
for b in h a; do tar xzf build/carry/$b.tgz -C bins/$b; done
L="$OUT/logs"; t0=$SECONDS
bench() {  # bin tag args...
  local b=$1 tag=$2; shift 2
  timeout 60 bins/$b/flashlab bench --backend cuda --versions hopper --passes bwd -d 128 --repeats 10 --warmup 3 --json "$OUT/${tag}_$b$r.json" "$@" > "$L/${tag}_$b$r.log" 2>&1
}
for r in 1 2; do
  for b in h a; do
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
names = ["h1", "a1", "h2", "a2"]
print("bwd TFLOP/s: tag dtype N mask ok |", *names, "| a/h (means)")
for k in sorted(R, key=str):
    v = R[k]; h = [v[n] for n in ("h1", "h2") if n in v]; rr = [v[n] for n in ("a1", "a2") if n in v]
    ratio = f"{(sum(rr)/len(rr))/(sum(h)/len(h)):.3f}" if h and rr else "-"
    print(*k, "|", *[f"{v[n]:.1f}" if n in v else "-" for n in names], "|", ratio)
PY
echo "bench $((SECONDS-t0))s"
timeout 200 python3 scripts/compare_torch.py --flashlab bins/a/flashlab --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8 --out "$OUT/compare_gqa_ea31c7d.json" > "$L/compare_gqa.log" 2>&1
echo "compare rc=$? $((SECONDS-t0))s"; tail -25 "$L/compare_gqa.log"
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 bins/a/flashlab run --backend cuda --versions hopper -B 2 -H 4 --heads-kv 2 --Nq 300 --Nk 700 -d 128 --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_$tool.log" 2>&1
  a=$?
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 bins/a/flashlab run --backend cuda --versions hopper -H 4 --heads-kv 2 --seqlens 1,130,300,77 -d 128 --window 100,-1 --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_packed_$tool.log" 2>&1
  echo "$tool rc=$a,$? $(grep -h 'ERROR SUMMARY' $L/san_$tool.log $L/san_packed_$tool.log | tr '\n' ' ')"
done
echo "san $((SECONDS-t0))s"
timeout 170 bins/a/flashlab_gpu_tests --gtest_color=no --gtest_filter='Matrix/BwdKernels.*d128*:Axes/*d128*:Packed/*d128*' > "$L/tests_a.log" 2>&1
echo "tests a rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_a.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$L/tests_a.log" | head
cd "$OUT" && tar czf call7.tgz logs *.json && rm -rf logs *_h?.json *_a?.json && ls
