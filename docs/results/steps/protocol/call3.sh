#!/usr/bin/env bash
# Call 3: every pass after a pause of 1 s with the GPU idle, on both sides (d = this step's tree:
# bench --pause, compare_torch.py --pause, default 1000), its warm-ups, then its repeats. Where
# the grouped-heads and dense d = 128 points stand beside PyTorch, and the packed batch.
set -uo pipefail
mkdir -p bins/d "$OUT/logs"
tar xzf build/carry/d.tgz -C bins/d
L="$OUT/logs"; t0=$SECONDS
timeout 60 bins/d/flashlab_gpu_tests --gtest_color=no --gtest_filter='*Runner*:*Bench*' > "$L/tests_d.log" 2>&1
echo "tests d rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_d.log" | tr '\n' ' ')"
for r in 1 2; do
  timeout 90 bins/d/flashlab bench --backend cuda --versions hopper,hopper-deterministic -d 128 --dtype bf16 --hidden 2048 --causal yes --varlen 24,128,4096 --repeats 10 --warmup 3 --pause 1000 --json "$OUT/packed_d$r.json" > "$L/packed_d$r.log" 2>&1
  echo "packed d$r rc=$? $((SECONDS-t0))s"; grep -E "^hopper" "$L/packed_d$r.log" | cut -c1-160
done
timeout 230 python3 scripts/compare_torch.py --flashlab bins/d/flashlab --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8 --pause 1000 --out "$OUT/compare_gqa_d.json" > "$L/compare_gqa.log" 2>&1
echo "compare gqa rc=$? $((SECONDS-t0))s"; tail -14 "$L/compare_gqa.log"
timeout 230 python3 scripts/compare_torch.py --flashlab bins/d/flashlab --versions hopper,hopper-deterministic --dtype bf16 -d 128 -N 4096,16384 --pause 1000 --out "$OUT/compare_dense_d.json" > "$L/compare_dense.log" 2>&1
echo "compare dense rc=$? $((SECONDS-t0))s"; tail -18 "$L/compare_dense.log"
python3 - "$OUT" <<'PY'
import json, sys
for f in ("compare_gqa_d.json", "compare_dense_d.json"):
    try: d = json.load(open(f"{sys.argv[1]}/{f}"))
    except Exception as e: print(f, e); continue
    for r in d["comparison"]:
        if r.get("cudnn_ms"): print(f[:-5], r["version"], r["pass"], "causal" if r["causal"] else "nc", r["N"], "ours", r.get("flashlab_mhz_after"), "cudnn", r.get("cudnn_mhz_after"), f"{r['vs_cudnn']:.3f}")
PY
gzip -f "$L"/*.log
cd "$OUT" && tar czf call3.tgz logs *.json && rm -rf logs && ls
