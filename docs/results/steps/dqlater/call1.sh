#!/usr/bin/env bash
# Call 1: the d = 128 Hopper backward issuing step n - 1's dQ piece in step n, behind its dV and
# dK products, the consumer warpgroups pairing on mbarriers per dS^T buffer instead of meeting at
# a named barrier each step (b = this step's tree) against main (h = 008e89c), alternating h, b, h, b, both backward
# versions, each pass after a 1 s pause; each bench row records the SM clock before and after its
# timed runs. Then both SASS listings, b's d = 128 backward tests, compute-sanitizer on b.
set -uo pipefail
mkdir -p bins/h bins/b "$OUT/logs"
for b in h b; do tar xzf build/carry/$b.tgz -C bins/$b; done
L="$OUT/logs"; t0=$SECONDS
for b in h b; do
  for k in Lb0ELb0E Lb1ELb0E; do
    cuobjdump -sass bins/$b/flashlab 2>/dev/null | awk "/Function : .*bwd_kernel.*13__nv_bfloat16Li128E$k/{f=1;print;next} /Function :/{f=0} f" > "$L/sass_${b}_$k.txt"
    echo "sass $b $k: $(wc -l < $L/sass_${b}_$k.txt) lines; $(grep -oE 'BAR\.[A-Z.]+|HGMMA|HMMA|LDL|STL' $L/sass_${b}_$k.txt | sort | uniq -c | tr '\n' ' ')"
  done
done
bench() {  # bin tag args...
  local b=$1 tag=$2; shift 2
  timeout 100 bins/$b/flashlab bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -d 128 --repeats 10 --warmup 3 --pause 1000 --json "$OUT/${tag}_$b$r.json" "$@" > "$L/${tag}_$b$r.log" 2>&1
}
for r in 1 2; do
  for b in h b; do
    bench $b dense --dtype bf16 -N 4096,16384 --causal no
    bench $b dcausal --dtype bf16 -N 16384 --causal yes
    bench $b gqa --dtype bf16 -N 4096,16384 --causal no,yes --hidden 4096 --heads-kv 8
    bench $b packed --dtype bf16 --hidden 2048 --causal yes --varlen 24,128,4096
    echo "$b$r $((SECONDS-t0))s"
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/compare.txt"
import json, sys, glob, os
out = sys.argv[1]
R = {}
for f in sorted(glob.glob(f"{out}/*_[hb][12].json")):
    tag, br = os.path.basename(f)[:-5].rsplit("_", 1)
    for x in json.load(open(f))["tables"][0]["rows"]:
        if x.get("tflops") is None: continue
        R.setdefault((x["version"], tag, x["N"], "c" if x["causal"] else "nc", x["ok"]), {})[br] = (x["tflops"], x.get("mhz_before"), x.get("mhz_after"))
names = ["h1", "b1", "h2", "b2"]
print("bwd TFLOP/s (clock before/after, MHz): version tag N mask ok |", *names, "| b/h (means)")
for k in sorted(R, key=str):
    v = R[k]; h = [v[n][0] for n in ("h1", "h2") if n in v]; bb = [v[n][0] for n in ("b1", "b2") if n in v]
    ratio = f"{(sum(bb)/len(bb))/(sum(h)/len(h)):.3f}" if h and bb else "-"
    print(*k, "|", *[f"{v[n][0]:.1f} ({v[n][1]}/{v[n][2]})" if n in v else "-" for n in names], "|", ratio)
PY
echo "bench $((SECONDS-t0))s"
timeout 170 bins/b/flashlab_gpu_tests --gtest_color=no --gtest_filter='Matrix/BwdKernels.*d128*:Axes/*d128*:Packed/*d128*:*Determinis*' > "$L/tests_b.log" 2>&1
echo "tests b rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_b.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$L/tests_b.log" | head
for tool in racecheck synccheck memcheck; do
  [ $((SECONDS-t0)) -gt 480 ] && { echo "$tool skipped: time"; continue; }
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 bins/b/flashlab run --backend cuda --versions hopper,hopper-deterministic -B 2 -H 4 --heads-kv 2 --Nq 300 --Nk 700 -d 128 --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_$tool.log" 2>&1
  a=$?
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 bins/b/flashlab run --backend cuda --versions hopper,hopper-deterministic -H 4 --heads-kv 2 --seqlens 1,130,300,77 -d 128 --window 100,-1 --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/san_packed_$tool.log" 2>&1
  echo "$tool rc=$a,$? $(grep -h 'ERROR SUMMARY' $L/san_$tool.log $L/san_packed_$tool.log | tr '\n' ' ')"
done
echo "san $((SECONDS-t0))s"
gzip -f "$L"/*.log "$L"/sass_*.txt
cd "$OUT" && tar czf call1.tgz logs *.json compare.txt && rm -rf logs *_h?.json *_b?.json && ls
