#!/usr/bin/env bash
# Call 2: each pass timed in a loop of its own (c = this step's tree: the forward's warm-ups and
# repeats, then the backward's, as PyTorch's are timed) against the forward and backward timed in
# turn in each repeat (b = 39b194c's kernels, the same as c's). The packed batch on both,
# alternating; then c beside PyTorch: grouped heads, and the dense d = 128 bf16 points; c's runner
# and d = 128 backward GPU tests.
set -uo pipefail
mkdir -p bins/b bins/c "$OUT/logs"
for b in b c; do tar xzf build/carry/$b.tgz -C bins/$b; done
L="$OUT/logs"; t0=$SECONDS
timeout 120 bins/c/flashlab_gpu_tests --gtest_color=no --gtest_filter='*Runner*:*Bench*:Matrix/BwdKernels.*bf16*d128*:Packed/*bf16_d128*' > "$L/tests_c.log" 2>&1
echo "tests c rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_c.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$L/tests_c.log" | head
for r in 1 2; do
  for b in b c; do
    timeout 90 bins/$b/flashlab bench --backend cuda --versions hopper,hopper-deterministic -d 128 --dtype bf16 --hidden 2048 --causal yes --varlen 24,128,4096 --repeats 10 --warmup 3 --json "$OUT/packed_$b$r.json" > "$L/packed_$b$r.log" 2>&1
    echo "packed $b$r rc=$? $((SECONDS-t0))s"; grep -E "^hopper" "$L/packed_$b$r.log" | cut -c1-160
  done
done
timeout 200 python3 scripts/compare_torch.py --flashlab bins/c/flashlab --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8 --out "$OUT/compare_gqa_c.json" > "$L/compare_gqa.log" 2>&1
echo "compare gqa rc=$? $((SECONDS-t0))s"; tail -16 "$L/compare_gqa.log"
timeout 200 python3 scripts/compare_torch.py --flashlab bins/c/flashlab --versions hopper,hopper-deterministic --dtype bf16 -d 128 -N 4096,16384 --out "$OUT/compare_dense_c.json" > "$L/compare_dense.log" 2>&1
echo "compare dense rc=$? $((SECONDS-t0))s"; tail -18 "$L/compare_dense.log"
python3 - "$OUT" <<'PY'
import json, sys
for f in ("compare_gqa_c.json", "compare_dense_c.json"):
    try: d = json.load(open(f"{sys.argv[1]}/{f}"))
    except Exception as e: print(f, e); continue
    for r in d["comparison"]:
        if r.get("cudnn_ms"): print(f[:-5], r["version"], r["pass"], "causal" if r["causal"] else "nc", r["N"], "ours", r.get("flashlab_mhz_after"), "cudnn", r.get("cudnn_mhz_after"), f"{r['vs_cudnn']:.3f}")
PY
gzip -f "$L"/*.log
cd "$OUT" && tar czf call2.tgz logs *.json && ls
