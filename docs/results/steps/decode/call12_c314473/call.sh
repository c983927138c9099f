#!/usr/bin/env bash
# call 5 (binary c314473): split-kv at d = 256 (GPU tests, sanitizers), lab hopper with its d = 256 table.
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
B=build/device-bin
t0=$SECONDS
$B/flashlab --version | head -1
OUT=$OUT/decode BUDGET=330 STAGES="info tests sanitize" scripts/device_decode.sh > "$OUT/logs/decode.log" 2>&1
echo "decode rc=$? $((SECONDS-t0))s"; sed -n '/== summary/,/^---- /p' "$OUT/logs/decode.log"
grep -E "^\[  (PASSED|FAILED)  \]|FAILED  \]" "$OUT/decode/logs/tests.log" | head -20
timeout 200 $B/flashlab lab hopper --backend cuda --json "$OUT/lab_hopper_cuda.json" > "$OUT/logs/lab_hopper.log" 2>&1
echo "lab hopper rc=$? $((SECONDS-t0))s"; grep -n -A14 "256" "$OUT/logs/lab_hopper.log" | head -40
echo "elapsed $((SECONDS-t0))s"
