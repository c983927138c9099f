#!/usr/bin/env bash
# Main 62aeebd (h, as call3.sh): the 40-shape backward sweep beside PyTorch (hopper,
# hopper-deterministic), each pass after a 1 s pause on both sides (as call2.sh). Needs
# build/carry/h.tgz.
set -uo pipefail
mkdir -p bins/h "$OUT/logs"
tar xzf build/carry/h.tgz -C bins/h
t0=$SECONDS
timeout 570 python3 scripts/compare_torch.py --flashlab bins/h/flashlab --versions hopper,hopper-deterministic --passes bwd -N 1024,2048,4096,8192,16384 --pause 1000 --out "$OUT/compare_torch_bwd_hopper.json" > "$OUT/logs/compare_bwd.log" 2>&1
echo "compare bwd rc=$? $((SECONDS-t0))s"; tail -6 "$OUT/logs/compare_bwd.log"
gzip -f "$OUT"/logs/*.log
