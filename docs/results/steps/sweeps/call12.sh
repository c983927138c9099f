#!/usr/bin/env bash
# Main e006e3a (e: the no-left-side schedule landed), the binary of the README's forward table, the
# grouped heads and the packed batch: the 40-shape forward sweep beside PyTorch as call3.sh (tiled,
# hopper; each pass after a 0.5 s pause on both sides), the grouped heads beside PyTorch (both
# passes, 1 s pauses; the second time on this code, after call 11), the 24-sequence packed batch
# twice. Needs build/carry/e.tgz (the stripped flashlab alone).
set -uo pipefail
mkdir -p bins/e "$OUT/logs"
tar xzf build/carry/e.tgz -C bins/e
L="$OUT/logs"; t0=$SECONDS
timeout 300 python3 scripts/compare_torch.py --flashlab bins/e/flashlab --versions tiled,hopper --passes fwd -N 1024,2048,4096,8192,16384 --pause 500 --out "$OUT/compare_torch_fwd_hopper.json" > "$L/compare_fwd.log" 2>&1
echo "compare fwd rc=$? $((SECONDS-t0))s"; tail -4 "$L/compare_fwd.log"
timeout 150 python3 scripts/compare_torch.py --flashlab bins/e/flashlab --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8 --pause 1000 --out "$OUT/compare_torch_gqa_hopper.json" > "$L/compare_gqa.log" 2>&1
echo "compare gqa rc=$? $((SECONDS-t0))s"; tail -12 "$L/compare_gqa.log"
for r in 1 2; do
  timeout 60 bins/e/flashlab bench --backend cuda --versions hopper,hopper-deterministic -d 128 --dtype bf16 --hidden 2048 --causal yes --varlen 24,128,4096 --repeats 10 --warmup 3 --pause 1000 --json "$OUT/packed_e$r.json" > "$L/packed_e$r.log" 2>&1
  echo "packed e$r rc=$? $((SECONDS-t0))s"; grep -E "^hopper" "$L/packed_e$r.log" | cut -c1-150
done
gzip -f "$L"/*.log
cd "$OUT" && tar czf call12.tgz logs *.json && rm -rf logs && ls
