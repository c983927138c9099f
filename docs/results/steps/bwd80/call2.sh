#!/usr/bin/env bash
# Call 2 (outputs: call2/), once call 1 has passed: speed of w (main with wide.patch and the inert
# probe_causal.patch) against main (h: e.tgz, e006e3a's binary, whose 243 kernels have the same
# SASS as main's and as w's others). The backward of the sweep's non-causal d = 128 shapes
# (hopper, hopper-deterministic) alternating h, w, two rounds, each pass after a 1 s pause; then
# the grouped heads beside PyTorch's cuDNN on w. Prediction (docs/perf.md): 4 to 11 % at every
# non-causal d = 128 point, both versions. Needs build/carry/e.tgz and w.tgz.
set -uo pipefail
mkdir -p "$OUT/logs" bins/h bins/w
tar xzf build/carry/e.tgz -C bins/h; tar xzf build/carry/w.tgz -C bins/w
L="$OUT/logs"; t0=$SECONDS
for r in 1 2; do
  for b in h w; do
    timeout 100 bins/$b/flashlab bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -N 1024,2048,4096,8192,16384 -d 128 --dtype fp16,bf16 --causal no --hidden 2048 --repeats 10 --warmup 3 --pause 1000 --json "$OUT/bwd_$b$r.json" > "$L/bwd_$b$r.log" 2>&1
    echo "$b$r rc=$? $((SECONDS-t0))s"
  done
done
for v in hopper hopper-deterministic; do
  python3 scripts/compare_rounds.py "$OUT" --prefix bwd_ --base h --new w --version $v | tee "$OUT/compare_$v.txt"
done
timeout 150 python3 scripts/compare_torch.py --flashlab bins/w/flashlab --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8 --pause 1000 --out "$OUT/compare_torch_gqa_hopper.json" > "$L/compare_gqa.log" 2>&1
echo "compare gqa rc=$? $((SECONDS-t0))s"; tail -12 "$L/compare_gqa.log"
gzip -f "$L"/*.log
cd "$OUT" && tar czf call2.tgz logs $(ls *.json 2>/dev/null) compare_*.txt && rm -rf logs *.json && ls
