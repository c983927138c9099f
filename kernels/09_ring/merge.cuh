// The ring's own small kernels, between the block kernels of the rungs below it: the merge of a
// block's partial O and LSE into a rank's running ones (the log-sum-exp rule, the online softmax
// one level up), and the element-wise passes of the backward (sums into fp32 accumulators, the
// casts to the storage dtype). Tensors are flat: `rows` rows of d elements, [B, H, n, d] read as
// B H n rows.
//
//   merge, one warp a row:   LSE' = M + log(exp(LSE - M) + exp(LSE_b - M)),  M = max(LSE, LSE_b)
//                            O'   = exp(LSE - LSE') O + exp(LSE_b - LSE') O_b
//   a row whose block saw no key (LSE_b = -inf) keeps O, LSE; the first block of a row sets them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "common/sm80/mma.cuh"
#include "core/cuda_check.h"

namespace flashlab::cuda::FLASHLAB_FOLDER::ring_kernels {

// o, lse: the running fp32 O and LSE; o_b, lse_b: one block's O (in the storage dtype, as its
// kernel writes it) and LSE. first: the row's first block (o, lse hold anything, poison included).
template <class T>
__global__ void merge_kernel(float* __restrict__ o, float* __restrict__ lse,
                             const T* __restrict__ o_b, const float* __restrict__ lse_b,
                             int64_t rows, int d, bool first) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // the whole warp: one row a warp
  const float lb = lse_b[row];
  const float la = first ? -INFINITY : lse[row];
  if (lb == -INFINITY && !first) return;  // the block saw none of this row's keys
  float a = 0.f, b = 0.f, merged = -INFINITY;
  if (lb == -INFINITY) {  // first, and nothing seen: O = 0, LSE = -inf
  } else if (la == -INFINITY) {
    b = 1.f, merged = lb;
  } else {
    const float m = fmaxf(la, lb);
    merged = m + logf(expf(la - m) + expf(lb - m));
    a = expf(la - merged);
    b = expf(lb - merged);
  }
  for (int k = lane; k < d; k += 32) {
    const int64_t i = row * d + k;
    const float prev = la == -INFINITY ? 0.f : o[i];
    o[i] = a * prev + (b == 0.f ? 0.f : b * ElemTraits<T>::to_float(o_b[i]));
  }
  __syncwarp();  // every lane has read lse[row] before it changes
  if (lane == 0) lse[row] = merged;
}

// The final O in the storage dtype (0 for a row that saw no key), and LSE.
template <class T>
__global__ void finalize_kernel(T* __restrict__ o_out, float* __restrict__ lse_out,
                                const float* __restrict__ o, const float* __restrict__ lse,
                                int64_t rows, int d) {
  const int64_t n = rows * d;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / d;
    const bool none = lse[row] == -INFINITY;
    o_out[i] = ElemTraits<T>::from_float(none ? 0.f : o[i]);
    if (i % d == 0) lse_out[row] = lse[row];
  }
}

// acc += x (x in the storage dtype).
template <class T>
__global__ void add_kernel(float* __restrict__ acc, const T* __restrict__ x, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    acc[i] += ElemTraits<T>::to_float(x[i]);
}

// out = in + part, or out = part when in is null (the shard's first rank).
__global__ void combine_kernel(float* __restrict__ out, const float* __restrict__ in,
                               const float* __restrict__ part, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = in ? in[i] + part[i] : part[i];
}

// out = the storage dtype's rounding of in.
template <class T>
__global__ void convert_kernel(T* __restrict__ out, const float* __restrict__ in, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = ElemTraits<T>::from_float(in[i]);
}

// Launch shapes: element-wise passes in a grid-stride loop of at most 4096 blocks of 256 threads;
// the merge, eight rows (warps) a block.
inline unsigned elementwise_blocks(int64_t n) {
  const int64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

template <class T>
void merge(float* o, float* lse, const T* o_b, const float* lse_b, int64_t rows, int d, bool first,
           cudaStream_t st) {
  if (rows == 0) return;
  merge_kernel<T><<<static_cast<unsigned>((rows + 7) / 8), 256, 0, st>>>(o, lse, o_b, lse_b, rows,
                                                                         d, first);
  FLASHLAB_CHECK_LAUNCH();
}
template <class T>
void finalize(T* o_out, float* lse_out, const float* o, const float* lse, int64_t rows, int d,
              cudaStream_t st) {
  if (rows == 0) return;
  finalize_kernel<T><<<elementwise_blocks(rows * d), 256, 0, st>>>(o_out, lse_out, o, lse, rows, d);
  FLASHLAB_CHECK_LAUNCH();
}
template <class T>
void add(float* acc, const T* x, int64_t n, cudaStream_t st) {
  if (n == 0) return;
  add_kernel<T><<<elementwise_blocks(n), 256, 0, st>>>(acc, x, n);
  FLASHLAB_CHECK_LAUNCH();
}
inline void combine(float* out, const float* in, const float* part, int64_t n, cudaStream_t st) {
  if (n == 0) return;
  combine_kernel<<<elementwise_blocks(n), 256, 0, st>>>(out, in, part, n);
  FLASHLAB_CHECK_LAUNCH();
}
template <class T>
void convert(T* out, const float* in, int64_t n, cudaStream_t st) {
  if (n == 0) return;
  convert_kernel<T><<<elementwise_blocks(n), 256, 0, st>>>(out, in, n);
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::ring_kernels
