#!/usr/bin/env bash
# Call 8 (outputs: call8/), after call 7: issue 24's sweep beside PyTorch, the forward. m (main after
# the four steps; build/carry/m.txz) and PyTorch's SDPA over the 60 shapes: N = 1024 ... 16384,
# d = 64, 128, 256, fp16 and bf16, causal and not, B·N = 16k tokens, hidden 2048, each pass after
# a 1 s pause on both sides (`scripts/compare_torch.py`); then the grouped heads (32 query heads
# over 8 K/V heads, d = 128, N = 4096 and 16384, both passes). The README's forward tables are
# generated from this call's JSON (`scripts/gen_perf_table.py`).
set -uo pipefail
BUDGET=${BUDGET:-550}
source docs/results/steps/stack/lib.sh || { echo "run this from the repository root" >&2; exit 1; }
unpack m m
bins/m/flashlab --version
export PYTHONUNBUFFERED=1
run_for 420 python3 scripts/compare_torch.py --flashlab bins/m/flashlab --versions hopper --passes fwd -d 64,128,256 --dtype fp16,bf16 -N 1024,2048,4096,8192,16384 --pause 1000 --out "$OUT/compare_torch_fwd_hopper.json" > "$L/fwd.log" 2>&1
echo "fwd sweep rc=$? $((SECONDS-t0))s"; grep -E "vs cuDNN" "$L/fwd.log"
run_for 120 python3 scripts/compare_torch.py --flashlab bins/m/flashlab --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8 --pause 1000 --out "$OUT/compare_torch_gqa_hopper.json" > "$L/gqa.log" 2>&1
echo "gqa rc=$? $((SECONDS-t0))s"; grep -E "vs cuDNN" "$L/gqa.log"
gzip -f "$L"/*.log
cd "$OUT" && tar czf call8.tgz logs && rm -rf logs && ls
echo "elapsed $((SECONDS-t0))s"
