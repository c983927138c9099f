#!/usr/bin/env bash
# Nsight Compute profile of one backward kernel launch: flashlab's outer-K kernel and PyTorch's
# FlashAttention-2 backward kernel on the same shape, so their throughputs, stalls and shared-memory
# traffic can be read side by side. Run on a machine with the GPU, from the repository root:
#
#   scripts/profile_bwd.sh [dtype d N causal]        # defaults: bf16 128 4096 no
#
# B*N = 16k tokens and H = 2048/d as in the sweep. Reports go to $OUT/profile/*.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${FLASHLAB_BIN_DIR:-build/device-bin}
OUT=${OUT:-out/device}
DT=${1:-bf16} D=${2:-128} N=${3:-4096} CAUSAL=${4:-no}
VERSION=${VERSION:-atomic-dq}
export PATH="$PATH:/usr/local/cuda/bin"
mkdir -p "$OUT/profile"
SECTIONS=(--print-details all --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
  --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats
  --section InstructionStats --section LaunchStats --section Occupancy)
tag="${DT}_d${D}_N${N}_causal-${CAUSAL}"
# The bench checks once at a small N, warms up, then times: skip to a timed launch.
ncu --clock-control none --kernel-name regex:"${KERNEL:-outer_k}" --launch-skip 3 --launch-count 1 \
  "${SECTIONS[@]}" "$BIN/flashlab" bench --backend cuda -N "$N" -d "$D" --dtype "$DT" \
  --causal "$CAUSAL" --versions "$VERSION" --repeats 2 --warmup 2 \
  >"$OUT/profile/flashlab_${VERSION}_$tag.txt" 2>&1
echo "flashlab $VERSION $tag: rc=$?"
ncu --clock-control none --kernel-name regex:"flash_bwd_dq_dk_dv|flash_bwd_kernel" --launch-skip 2 \
  --launch-count 1 "${SECTIONS[@]}" python3 scripts/torch_bwd_launches.py "$DT" "$D" "$N" "$CAUSAL" \
  >"$OUT/profile/torch_flash_$tag.txt" 2>&1
echo "torch flash $tag: rc=$?"
