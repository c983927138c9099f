// What cuda.cu needs to launch the tiled forward: its parameters, and one launcher per
// (dtype, head dim, causal), each (dtype, head dim) compiled in an object of its own that the build
// writes from version.cmake, so the build parallelises. The names live under FLASHLAB_FOLDER (set by the build for this folder, see
// src/core/version.h), so a copy of the folder made by `flashlab new --from tiled` has its own.
#pragma once

#include <cuda_runtime.h>

namespace flashlab::cuda::FLASHLAB_FOLDER::tiled_fwd {

// One [B, H, N, d] problem; blockIdx.y walks the B*H heads, each head contiguous.
struct FwdParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  int Nq, Nk;
  int causal_offset;  // Nk - Nq: query i sees keys j <= i + causal_offset
  float scale_log2;   // softmax scale * log2(e): scores go straight into exp2
};

template <class T, int D, bool kCausal>
void launch_fwd(const FwdParams& p, int heads, cudaStream_t stream);

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::tiled_fwd
