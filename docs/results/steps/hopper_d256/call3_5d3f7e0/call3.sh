#!/usr/bin/env bash
# call 3: hopper's d = 256 forward, key tile width: causal at Bc = 80 (O through Q's buffer; its
# build spills 28-108 bytes) and non-causal at Bc = 64, beside the main binary (5d3f7e0).
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs" build/var
tar xzf build/carry/bin.tgz -C build/device-bin
tar xzf build/carry/var.tgz -C build/var
t0=$SECONDS
for v in main:build/device-bin/flashlab causal_bc80:build/var/flashlab_causal_bc80 full_bc64:build/var/flashlab_full_bc64 main_again:build/device-bin/flashlab; do
  timeout 100 ${v#*:} bench --backend cuda --versions hopper --passes fwd -N 1024,4096,8192,16384 -d 256 --dtype bf16 --causal no,yes --json "$OUT/var_${v%%:*}.json" > "$OUT/var_${v%%:*}.log" 2>&1
  echo "variant ${v%%:*} rc=$?"; grep -E "^hopper" "$OUT/var_${v%%:*}.log"
done
echo "elapsed $((SECONDS-t0))s"
