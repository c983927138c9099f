#!/usr/bin/env bash
# call 21 (binary 16cf188): the ring's memcheck at R = 1 without NCCL's API probes counted.
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
OUT="$OUT/ring" STAGES="memcheck" scripts/device_ring.sh 2>&1 | sed -n '/== summary/,$p'
for f in "$OUT"/ring/logs/*.log; do sed -i "s|$PWD/|./|g; s|[^ ]*/site-packages/|<site-packages>/|g; s|/root/|\$HOME/|g" "$f"; done
