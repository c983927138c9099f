#!/usr/bin/env bash
# Call 1 (outputs: call1/). The FP8 quantization pass with one reciprocal per block and a product
# per code instead of a division per code, scales clamped to 2^-126 (q: main with quant_rcp.patch;
# the twin and the GPU test's twin round the same two steps) against main (h: build/carry/e.tgz,
# e006e3a's binary: the same SASS as main). First q's GPU tests of the FP8 rung (the test matrix,
# the codes and scales against the twin's, the converter, the entry) and compute-sanitizer memcheck
# on a small ragged grouped shape; then hopper-fp8 and hopper-fp8-per-tensor at B = 1, N = 16384,
# hidden 2048 (d = 128: 16 heads; d = 64: 32), non-causal, 10 timed runs each with the sampled
# check, alternating h, q, two rounds. Prediction (docs/perf.md): 2 to 3 % faster at d = 128 (the
# pass was about 6 % of the run at base clock), about 2 % at d = 64. Needs build/carry/e.tgz and
# q8.tgz (stripped flashlab and flashlab_gpu_tests of main with quant_rcp.patch).
set -uo pipefail
mkdir -p "$OUT/logs" bins/h bins/q
tar xzf build/carry/e.tgz -C bins/h; tar xzf build/carry/q8.tgz -C bins/q
export PATH="$PATH:/usr/local/cuda/bin"
L="$OUT/logs"; t0=$SECONDS
# Each command's time limit is cut to what is left of 530 s, and a command that would get less than
# 5 s is skipped (exit 125), so that the archive at the end is always made (a call has 600 s, and
# only 8 files come back).
run_for() {
  local left=$((530 - SECONDS + t0)) n=$1
  shift
  [ "$left" -lt "$n" ] && n=$left
  if [ "$n" -lt 5 ]; then echo "skipped (no time left): $*"; return 125; fi
  timeout -k 10 "$n" "$@"
}
# A first GPU command that runs out of its time has most likely hung on the GPU: the rest would
# only wait out their own limits, so the call stops here and says so.
stop_if_hung() { if [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; then echo "$2 ran out of its time: stopping the call here"; gzip -f "$L"/*.log; exit 1; fi; }
run_for 120 bins/q/flashlab_gpu_tests --gtest_color=no --gtest_filter='HopperFp8/*:CudaHopperFp8Quantization.*:Fp8Cuda.*:GpuHopperFp8Entry.*' > "$L/tests_q.log" 2>&1
rc=$?; echo "tests q rc=$rc $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_q.log" | tr '\n' ' ')"
stop_if_hung $rc "the GPU tests"
run_for 60 compute-sanitizer --tool memcheck --error-exitcode 3 bins/q/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8,hopper-fp8-per-tensor -d 128 --Nq 177 --Nk 300 -H 4 --heads-kv 2 --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/memcheck_q.log" 2>&1
echo "memcheck q rc=$? $((SECONDS-t0))s: $(grep -E 'ERROR SUMMARY' "$L/memcheck_q.log")"
for r in 1 2; do
  for b in h q; do
    for d in 128 64; do
      run_for 50 bins/$b/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8,hopper-fp8-per-tensor -B 1 -H $((2048 / d)) -N 16384 -d $d --check sample --repeats 10 --warmup 2 --bitwise-repeats 0 --json "$OUT/run_$b${r}_d$d.json" > "$L/run_$b${r}_d$d.log" 2>&1
      echo "$b$r d=$d rc=$? $((SECONDS-t0))s"
    done
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/compare.txt"
import json, sys, statistics
out = sys.argv[1]
def rates(name):
    try:
        d = json.load(open(f"{out}/{name}.json"))
    except (OSError, ValueError):
        return {}
    t = next((t for t in d.get("tables", []) if t.get("id") == "timing"), None)
    return {r["version"]: (r["median_ms"], r["tflops"]) for r in t["rows"]} if t else {}
for d in (128, 64):
    for v in ("hopper-fp8", "hopper-fp8-per-tensor"):
        h = [rates(f"run_h{r}_d{d}").get(v) for r in (1, 2)]
        q = [rates(f"run_q{r}_d{d}").get(v) for r in (1, 2)]
        if None in h or None in q:
            print(f"d={d} {v}: missing"); continue
        hm = statistics.mean(x[1] for x in h); qm = statistics.mean(x[1] for x in q)
        print(f"d={d} {v}: h {h[0][1]:.1f} {h[1][1]:.1f}  q {q[0][1]:.1f} {q[1][1]:.1f} TFLOP/s"
              f"  q/h {qm / hm:.3f}")
PY
gzip -f "$L"/*.log
cd "$OUT" && tar czf call1.tgz logs $(ls *.json 2>/dev/null) compare.txt && rm -rf logs *.json && ls
