// What cuda.cu needs to launch the tiled forward: its parameters, and one launcher per
// (dtype, head dim, causal), each (dtype, head dim) compiled in an object of its own that the build
// writes from version.cmake, so the build parallelises. The names live under FLASHLAB_FOLDER (set by the build for this folder, see
// src/core/version.h), so a copy of the folder made by `flashlab new --from tiled` has its own.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/band.h"

namespace flashlab::cuda::FLASHLAB_FOLDER::tiled_fwd {

// One problem: Q, O [B, H, Nq, d], K, V [B, Hkv, Nk, d], each head contiguous; query head h reads
// K/V head h / group (the grid's y and z: the query head in its group, the K/V head). A packed
// batch (cu_q set; common/packed.h): Q, O [total_q, H, d], K, V [total_k, Hkv, d], LSE
// [H, total_q], and the grid's z is (sequence, K/V head); Nq and Nk are the longest lengths.
struct FwdParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  int Nq, Nk;
  int group;          // query heads per K/V head
  Band band;          // the keys each row sees (common/band.h)
  float scale_log2;   // softmax scale * log2(e): scores go straight into exp2
  // A packed batch only (null for a dense one): B + 1 offsets each, on the device.
  const int32_t* cu_q = nullptr;
  const int32_t* cu_k = nullptr;
  int H = 0, Hkv = 0;  // query heads and K/V heads of one token
  int total_q = 0;     // query tokens of the batch (LSE is [H, total_q])
};

// kMask: the sides of the problem's band the kernel tests (common/band.h: none, the right side
// alone, or both); the ragged last K/V tile is always masked. A packed batch (p.cu_q set) runs the packed
// kernel, which is built with kMask = both only (cuda.cu asks for it).
template <class T, int D, MaskKind kMask>
void launch_fwd(const FwdParams& p, int heads, cudaStream_t stream);

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::tiled_fwd
