#!/usr/bin/env bash
# The 40-shape forward sweep beside PyTorch (tiled and hopper; N = 1024 ... 16384, d 64 and 128,
# fp16 and bf16, causal and not; B*N = 16k tokens, hidden 2048), main's binary h = 008e89c, each
# pass after a 0.5 s pause on both sides (forward passes are short, and the GPU was idle between them).
set -uo pipefail
mkdir -p bins/h "$OUT/logs"
tar xzf build/carry/h.tgz -C bins/h
t0=$SECONDS
timeout 330 python3 scripts/compare_torch.py --flashlab bins/h/flashlab --versions tiled,hopper --passes fwd -N 1024,2048,4096,8192,16384 --pause 500 --out "$OUT/compare_torch_fwd_hopper.json" > "$OUT/logs/compare_fwd.log" 2>&1
echo "compare fwd rc=$? $((SECONDS-t0))s"; tail -8 "$OUT/logs/compare_fwd.log"
gzip -f "$OUT"/logs/*.log
