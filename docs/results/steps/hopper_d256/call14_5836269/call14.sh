#!/usr/bin/env bash
# call 14: hopper's backward at d = 256, variants timed in one call (bf16, B*N = 16k, H = 8):
#   main  5836269 (scores after the previous step's products and dQ)
#   pipe  the next step's scores issued behind this step's products, dQ in two halves of 64
#         columns (patch pipe.diff)
#   v4    pipe, with dQ added by 16-byte reductions after a lane swap (patch v4.diff)
#   nodq  pipe without any dQ reduction (wrong dQ: what the reductions cost)
set -uo pipefail
mkdir -p build/device-bin build/var "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
tar xzf build/carry/var.tgz -C build/var
L="$OUT/logs"
t0=$SECONDS
for v in pipe v4; do
  timeout 60 build/var/flashlab_$v run --backend cuda --versions hopper,hopper-deterministic -d 256 -B 1 -H 4 --heads-kv 2 --Nq 1000 --Nk 1000 --causal --window 300,0 --bitwise-repeats 3 > "$L/check_$v.log" 2>&1
  echo "check $v rc=$? $(grep -E 'within their error budget|FAIL|repeat' "$L/check_$v.log" | tr '\n' ' ')"
  timeout 60 build/var/flashlab_$v run --backend cuda --versions hopper,hopper-deterministic -d 256 --seqlens 1,300,77,1000 -H 4 --heads-kv 1 --causal --bitwise-repeats 3 > "$L/check_packed_$v.log" 2>&1
  echo "check packed $v rc=$? $(grep -E 'within their error budget|FAIL' "$L/check_packed_$v.log" | tr '\n' ' ')"
done
for v in main:build/device-bin/flashlab pipe:build/var/flashlab_pipe v4:build/var/flashlab_v4 nodq:build/var/flashlab_nodq main2:build/device-bin/flashlab pipe2:build/var/flashlab_pipe v42:build/var/flashlab_v4; do
  timeout 100 ${v#*:} bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -N 4096,16384 -d 256 --dtype bf16 --causal no,yes --json "$OUT/var_${v%%:*}.json" > "$L/var_${v%%:*}.log" 2>&1
  echo "variant ${v%%:*} rc=$? $((SECONDS-t0))s"; grep -E "^hopper" "$L/var_${v%%:*}.log"
done
echo "elapsed $((SECONDS-t0))s"
