#!/usr/bin/env bash
# Call 9 (outputs: call9/), after call 8: issue 24's sweep beside PyTorch, the backward. m (main after
# the four steps; build/carry/m.txz), `hopper` and `hopper-deterministic`, and PyTorch's SDPA over
# the 60 shapes: N = 1024 ... 16384, d = 64, 128, 256, fp16 and bf16, causal and not, B·N = 16k
# tokens, hidden 2048, each pass after a 1 s pause on both sides (`scripts/compare_torch.py`), one
# head dim at a time, each with its own JSON (a sweep writes its JSON only at its end; the 40 shapes
# of d = 64 and 128 took 275-331 s of bench alone before). This call: d = 64 and 128 (DIMS); the
# next, `DIMS=256 bash call9.sh`, d = 256. The README's backward tables are generated from the JSON
# (`scripts/gen_perf_table.py` takes several).
set -uo pipefail
BUDGET=${BUDGET:-560}
source docs/results/steps/stack/lib.sh || { echo "run this from the repository root" >&2; exit 1; }
unpack m m
bins/m/flashlab --version
export PYTHONUNBUFFERED=1
for d in ${DIMS:-64 128}; do
  run_for 290 python3 scripts/compare_torch.py --flashlab bins/m/flashlab --versions hopper,hopper-deterministic --passes bwd -d $d --dtype fp16,bf16 -N 1024,2048,4096,8192,16384 --pause 1000 --out "$OUT/compare_torch_bwd_hopper_d$d.json" > "$L/bwd_d$d.log" 2>&1
  echo "bwd sweep d=$d rc=$? $((SECONDS-t0))s"; grep -E "vs cuDNN" "$L/bwd_d$d.log"
done
gzip -f "$L"/*.log
cd "$OUT" && tar czf call9.tgz logs && rm -rf logs && ls
echo "elapsed $((SECONDS-t0))s"
