#!/usr/bin/env bash
# Main 62aeebd (h: tiled's d = 128 causal kernel with kv0 the constant 0 and ec149c0's tile count),
# the binary of the figures that close the grouped-heads, packed-batches and windows work: the
# grouped heads beside PyTorch (32 query heads over 8 K/V heads, both passes, 1 s pauses, as
# prep/call7.sh), the packed batch of 24 sequences twice, then the 40-shape forward sweep beside
# PyTorch (tiled, hopper; each pass after a 0.5 s pause on both sides, as call1.sh). Needs
# build/carry/h.tgz.
set -uo pipefail
mkdir -p bins/h "$OUT/logs"
tar xzf build/carry/h.tgz -C bins/h
L="$OUT/logs"; t0=$SECONDS
timeout 150 python3 scripts/compare_torch.py --flashlab bins/h/flashlab --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8 --pause 1000 --out "$OUT/compare_torch_gqa_hopper.json" > "$L/compare_gqa.log" 2>&1
echo "compare gqa rc=$? $((SECONDS-t0))s"; tail -12 "$L/compare_gqa.log"
for r in 1 2; do
  timeout 60 bins/h/flashlab bench --backend cuda --versions hopper,hopper-deterministic -d 128 --dtype bf16 --hidden 2048 --causal yes --varlen 24,128,4096 --repeats 10 --warmup 3 --pause 1000 --json "$OUT/packed_h$r.json" > "$L/packed_h$r.log" 2>&1
  echo "packed h$r rc=$? $((SECONDS-t0))s"; grep -E "^hopper" "$L/packed_h$r.log" | cut -c1-150
done
timeout 300 python3 scripts/compare_torch.py --flashlab bins/h/flashlab --versions tiled,hopper --passes fwd -N 1024,2048,4096,8192,16384 --pause 500 --out "$OUT/compare_torch_fwd_hopper.json" > "$L/compare_fwd.log" 2>&1
echo "compare fwd rc=$? $((SECONDS-t0))s"; tail -4 "$L/compare_fwd.log"
gzip -f "$L"/*.log
cd "$OUT" && tar czf call3.tgz logs *.json && rm -rf logs *.json && ls
