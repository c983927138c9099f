#!/usr/bin/env bash
# Main 62aeebd (h, as call3.sh): compute-sanitizer memcheck, racecheck and synccheck
# (scripts/device_check.sh's stages) on the small ragged dense shapes of every CUDA kernel, grouped
# heads and windows among them, and on small packed batches with grouped heads: 4 query heads over
# 2 K/V heads with lengths 5, 130, 0 (causal), 3 over 1 with one sequence of 300 rows, and 4 over 1
# with lengths 1000, 17, 1, 128 against keys 1000, 128, 17, 1 under a (64, 0) window (memcheck
# only; racecheck and synccheck take the others). Every version runs in each case. Needs build/carry/h.tgz.
set -uo pipefail
mkdir -p build/device-bin
tar xzf build/carry/h.tgz -C build/device-bin
CASES='Matrix/CudaVersions.*/bf16_d*_Nq17_Nk1000'
AXES='Axes/CudaVersionsAxes.*/bf16_d*_B2H8Hkv2_Nq17_Nk17:Axes/CudaVersionsAxes.*/fp16_d*_Nq17_Nk1000_w256_256'
PACKED='Packed/CudaPacked.*/bf16_d*_causal_H4Hkv2_q5_130_0:Packed/CudaPacked.*/fp16_d*_full_H3Hkv1_q300'
WINDOW='Packed/CudaPacked.*/bf16_d*_causal_H4Hkv1_q1000_17_1_128_k1000_128_17_1_w64_0'
SAN_FILTER="$CASES:Matrix/CudaVersions.*/fp16_d*_causal_B1H2_Nq1000_Nk17:$AXES:$PACKED:$WINDOW" \
RACE_FILTER="$CASES:$AXES:$PACKED" SAN_TIMEOUT=170 STAGES="memcheck synccheck racecheck" \
  OUT="$OUT" bash scripts/device_check.sh
cd "$OUT" && for f in logs/*.log; do gzip -f "$f"; done; ls logs
