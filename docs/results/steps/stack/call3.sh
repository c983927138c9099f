#!/usr/bin/env bash
# Not run: the GPU time there was went to calls 1, 2, 4, 5 and 6 (README).
# Call 3 (outputs: call3/), once call 1 has passed: l (main with the six patches) beside PyTorch's
# SDPA in one call, each pass after a 1 s pause on both sides (scripts/compare_torch.py):
#   - the forward at d = 256, N = 1024 ... 16384, fp16 and bf16, causal and not (issue 24 line 2:
#     >= 1.0x cuDNN at N >= 4096, >= 760 TFLOP/s at bf16 non-causal N = 16384);
#   - the backward at bf16 d = 128 and 256, N = 1024 ... 16384, causal and not, `hopper` and
#     `hopper-deterministic` (>= 620 and >= 580 TFLOP/s at d = 128 non-causal N = 16384; d = 256
#     >= 1.0x cuDNN in geometric mean, the deterministic twin within 1.15x of `hopper`);
#   - the grouped heads (32 query heads over 8 K/V heads, d = 128, N = 4096 and 16384; issue 22
#     line 3: the backward >= 1.0x cuDNN);
#   - `hopper-fp8` and `hopper` bf16 at d = 128, non-causal, N = 16384 (issue 25 line 3).
# Needs build/carry/l.txz.
set -uo pipefail
BUDGET=${BUDGET:-545}
source docs/results/steps/stack/lib.sh || { echo "run this from the repository root" >&2; exit 1; }
unpack l l
bins/l/flashlab --version
export PYTHONUNBUFFERED=1
ct() {  # name, limit, compare_torch options...
  local name=$1 n=$2; shift 2
  run_for "$n" python3 scripts/compare_torch.py --flashlab bins/l/flashlab --pause 1000 --out "$OUT/compare_torch_$name.json" "$@" > "$L/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS-t0))s"; grep -E "vs cuDNN" "$L/$name.log"
}
ct fwd_d256 150 --versions hopper --passes fwd -d 256 --dtype fp16,bf16 -N 1024,2048,4096,8192,16384
ct bwd_d128_d256 200 --versions hopper,hopper-deterministic --passes bwd -d 128,256 --dtype bf16 -N 1024,2048,4096,8192,16384
ct gqa 100 --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8
for r in 1 2; do
  run_for 40 bins/l/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8 -B 1 -H 16 -N 16384 -d 128 --check sample --repeats 10 --warmup 2 --bitwise-repeats 0 --json "$OUT/fp8_$r.json" > "$L/fp8_$r.log" 2>&1
  echo "fp8 $r rc=$? $((SECONDS-t0))s: $(grep -E '^hopper-fp8.* fwd |within' "$L/fp8_$r.log" | tr '\n' ' ')"
  run_for 40 bins/l/flashlab bench --backend cuda --versions hopper --passes fwd -N 16384 -d 128 --dtype bf16 --causal no --repeats 10 --warmup 3 --pause 1000 --json "$OUT/bf16_$r.json" > "$L/bf16_$r.log" 2>&1
  echo "bf16 $r rc=$? $((SECONDS-t0))s: $(grep -E '^hopper' "$L/bf16_$r.log" | tail -1)"
done
gzip -f "$L"/*.log
cd "$OUT" && tar czf call3.tgz logs $(ls *.json 2>/dev/null) && rm -rf logs *.json && ls
echo "elapsed $((SECONDS-t0))s"
