#!/usr/bin/env bash
# Call 3 (outputs: call3/), once calls 1 and 2 have passed: the 40-shape backward sweep beside
# PyTorch (hopper and hopper-deterministic; N = 1024 ... 16384, d 64 and 128, fp16 and bf16, causal
# and not; B*N = 16k tokens, hidden 2048) on w (main with wide.patch and the inert
# probe_causal.patch), each pass after a 1 s pause on both sides, as sweeps/call2.sh: the README's
# backward table, and against 62aeebd's sweep (scripts/compare_sweeps.py) the non-causal d = 128
# shapes up by call 2's gain, the others within the between-call spread. Needs build/carry/w.tgz.
set -uo pipefail
mkdir -p bins/w "$OUT/logs"
tar xzf build/carry/w.tgz -C bins/w
t0=$SECONDS
timeout 570 python3 scripts/compare_torch.py --flashlab bins/w/flashlab --versions hopper,hopper-deterministic --passes bwd -N 1024,2048,4096,8192,16384 --pause 1000 --out "$OUT/compare_torch_bwd_hopper.json" > "$OUT/logs/compare_bwd.log" 2>&1
echo "compare bwd rc=$? $((SECONDS-t0))s"; tail -8 "$OUT/logs/compare_bwd.log"
gzip -f "$OUT"/logs/*.log
