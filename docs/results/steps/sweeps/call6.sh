#!/usr/bin/env bash
# Main 62aeebd (h, as call3.sh): the points that compare_sweeps.py put below cuDNN's between-call
# spread in call3.sh and call4.sh, measured again in a call of their own, beside PyTorch, by the
# same protocol: the backward at fp16 d = 64 (N = 8192 and 16384, causal and not; hopper and
# hopper-deterministic), the backward at bf16 d = 128 non-causal N = 16384, and the forward at
# d = 64 causal N = 1024. Needs build/carry/h.tgz.
set -uo pipefail
mkdir -p bins/h "$OUT/logs"
tar xzf build/carry/h.tgz -C bins/h
L="$OUT/logs"; t0=$SECONDS
C="python3 scripts/compare_torch.py --flashlab bins/h/flashlab"
timeout 150 $C --versions hopper,hopper-deterministic --passes bwd --dtype fp16 -d 64 -N 8192,16384 --pause 1000 --out "$OUT/recheck_bwd_d64.json" > "$L/recheck_bwd_d64.log" 2>&1
echo "bwd d64 rc=$? $((SECONDS-t0))s"; tail -4 "$L/recheck_bwd_d64.log"
timeout 100 $C --versions hopper,hopper-deterministic --passes bwd --dtype bf16 -d 128 -N 16384 --causal no --pause 1000 --out "$OUT/recheck_bwd_d128.json" > "$L/recheck_bwd_d128.log" 2>&1
echo "bwd d128 rc=$? $((SECONDS-t0))s"; tail -4 "$L/recheck_bwd_d128.log"
timeout 80 $C --versions tiled,hopper --passes fwd -d 64 -N 1024 --causal yes --pause 500 --out "$OUT/recheck_fwd_d64.json" > "$L/recheck_fwd_d64.log" 2>&1
echo "fwd d64 rc=$? $((SECONDS-t0))s"; tail -4 "$L/recheck_fwd_d64.log"
gzip -f "$L"/*.log
cd "$OUT" && tar czf call6.tgz logs *.json && rm -rf logs *.json && ls
