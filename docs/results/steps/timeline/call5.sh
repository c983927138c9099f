#!/usr/bin/env bash
# Call 5: bench's clock columns (SM clock through NVML before and after each point's timed runs)
# and compare_torch's, on the binary that adds them (p.tgz); a few GPU tests on it.
set -u
mkdir -p bins/p; tar xzf build/carry/p.tgz -C bins/p
R=$OUT/r; mkdir -p $R
timeout 200 bins/p/flashlab_gpu_tests --gtest_color=no --gtest_filter='Packed/*bf16_d128*:Matrix/BwdKernels.*bf16*d128*' > $R/tests.log 2>&1
echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $R/tests.log | head -5 | tr '\n' ' ')"
bins/p/flashlab bench --backend cuda --dtype bf16 -d 128 --versions hopper --passes bwd -N 16384 --causal no --repeats 30 --warmup 3 --json $R/bench_bwd16k.json > $R/bench_bwd16k.log 2>&1
echo "bench rc=$?"; grep -E "^hopper|clock|^- " $R/bench_bwd16k.log | cut -c1-250
sleep 3
bins/p/flashlab bench --backend cuda --dtype bf16 -d 128 --versions hopper --passes fwd -N 1024,16384 --causal no --json $R/bench_fwd.json > $R/bench_fwd.log 2>&1
echo "bench fwd rc=$?"; grep -E "^hopper|^- " $R/bench_fwd.log | cut -c1-250
sleep 3
timeout 200 python3 scripts/compare_torch.py --flashlab bins/p/flashlab --versions hopper --dtype bf16 -d 128 -N 4096,16384 --causal no --passes bwd --out $R/compare.json > $R/compare.log 2>&1
echo "compare rc=$?"
python3 - $R/compare.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d.get("comparison", []):
    print({k: r.get(k) for k in ("N", "flashlab_ms", "flashlab_mhz_after", "cudnn_ms", "cudnn_mhz_after", "vs_cudnn")})
print([(r["impl"], r["N"], r.get("mhz_before"), r.get("mhz_after")) for r in d.get("torch", [])][:6])
PY
tar czf $OUT/call5.tgz -C $R .
