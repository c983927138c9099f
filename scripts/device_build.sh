#!/usr/bin/env bash
# Builds what the GPU runs need, on a machine with nvcc and no GPU, and saves the ptxas resource
# report. The binaries land in build/device-bin (small enough to copy to a machine with the GPU).
#
#   scripts/device_build.sh [build-dir]          default build/cuda
#   FLASHLAB_CUDA_GENCODE=... JOBS=4 scripts/device_build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/cuda}
# The H200 (sm_90a) only: half the compile time of the default sm_80 + sm_90a build.
GENCODE=${FLASHLAB_CUDA_GENCODE:--gencode=arch=compute_90a,code=sm_90a}
cmake -S . -B "$BUILD" -G Ninja -DFLASHLAB_CUDA=ON -DFLASHLAB_CUDA_GENCODE="$GENCODE" \
  -DFLASHLAB_CUDA_EXTRA_FLAGS=-Xptxas=-v >/dev/null
# The ptxas report needs every kernel's `-Xptxas -v` lines, so every CUDA object is rebuilt (with
# ccache a replay of a few seconds); after a partial rebuild the report would list only what changed.
find "$BUILD" -name "*.cu.o" -delete
if ! cmake --build "$BUILD" -j"${JOBS:-2}" --target flashlab flashlab_gpu_tests 2>&1 |
  tee "$BUILD/build.log" | { grep -v "^ptxas info\|bytes stack frame" || true; }; then
  echo "device_build: the build failed; build/device-bin and the ptxas report are left as they were" >&2
  exit 1
fi
python3 scripts/ptxas_report.py "$BUILD/build.log" > docs/ptxas_report.md
echo "ptxas report: docs/ptxas_report.md"
mkdir -p build/device-bin
cp "$BUILD/flashlab" "$BUILD/tests/flashlab_gpu_tests" build/device-bin/
strip build/device-bin/flashlab build/device-bin/flashlab_gpu_tests
du -sh build/device-bin
