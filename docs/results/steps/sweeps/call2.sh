#!/usr/bin/env bash
# The 40-shape backward sweep beside PyTorch (hopper and hopper-deterministic; N = 1024 ... 16384, d 64 and 128,
# fp16 and bf16, causal and not; B*N = 16k tokens, hidden 2048), main's binary h = 008e89c, each
# pass after a 1 s pause on both sides.
set -uo pipefail
mkdir -p bins/h "$OUT/logs"
tar xzf build/carry/h.tgz -C bins/h
t0=$SECONDS
timeout 560 python3 scripts/compare_torch.py --flashlab bins/h/flashlab --versions hopper,hopper-deterministic --passes bwd -N 1024,2048,4096,8192,16384 --pause 1000 --out "$OUT/compare_torch_bwd_hopper.json" > "$OUT/logs/compare_bwd.log" 2>&1
echo "compare bwd rc=$? $((SECONDS-t0))s"; tail -8 "$OUT/logs/compare_bwd.log"
gzip -f "$OUT"/logs/*.log
