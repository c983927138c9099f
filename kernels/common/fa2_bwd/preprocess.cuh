// Backward preprocess (FA2 step 0), before any matmul:
//
//   D[i]    = rowsum(O[i,:] * dO[i,:])    the chapter's identity: rowsum(P * dP) = rowsum(O * dO)
//   LSE2[i] = LSE[i] * log2(e)             so the main kernels recompute P with one exp2
//             (+inf where LSE = -inf)      a row that sees no key then gets P = exp2(-inf) = 0
//
// One group of kD/8 threads per query row, each reading 16 bytes of O and dO; the group sums with
// shuffles. Rows past Nq (padding up to Nq_pad) get D = 0 and LSE2 = +inf, so the main kernels can
// load whole blocks of rows without bounds checks and still get P = 0 there.
//
// A packed batch (params.h): one thread group per (token, head) of the token-major O and dO, the
// heads fastest, so that a group's loads of O, dO and LSE depend on nothing but its index and go
// out at once; only then does it find its token's sequence (a binary search of the offsets), for
// the row of LSE2 and D it writes. The padding rows after each sequence's last row (up to the next
// sequence's first: kRowPad + 1 to kRowPad + 7 of them, params.h) are written by blocks of their
// own after the main ones, one thread per row.
#pragma once

#include <cstdint>

#include "common/fa2_bwd/params.h"
#include "common/packed.h"
#include "common/sm80/mma.cuh"

namespace flashlab::cuda::bwd {

// A preprocess block: kPrepThreads threads, kD / 8 lanes (16 bytes each) per row of O and dO.
inline constexpr int kPrepThreads = 256;
template <int kD>
inline constexpr int kPrepLanesPerRow = kD / 8;
template <int kD>
inline constexpr int kPrepRowsPerBlock = kPrepThreads / kPrepLanesPerRow<kD>;

// O . dO over a row: kD / 8 consecutive lanes of one warp, 16 bytes each, summed by a butterfly.
template <class T, int kD>
__device__ __forceinline__ float row_dot(const T* O, const T* dO, int64_t at, bool valid) {
  constexpr int kLanesPerRow = kPrepLanesPerRow<kD>;
  float dot = 0.f;
  if (valid) {
    const uint4 o = *reinterpret_cast<const uint4*>(O + at);
    const uint4 g = *reinterpret_cast<const uint4*>(dO + at);
    const uint32_t ow[4] = {o.x, o.y, o.z, o.w};
    const uint32_t gw[4] = {g.x, g.y, g.z, g.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float2 a = ElemTraits<T>::unpack(ow[w]);
      const float2 b = ElemTraits<T>::unpack(gw[w]);
      dot += a.x * b.x + a.y * b.y;
    }
  }
#pragma unroll
  for (int off = kLanesPerRow / 2; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
  return dot;
}

__device__ __forceinline__ float lse2_of(float lse) {
  return lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;
}

template <class T, int kD>
__device__ __forceinline__ void preprocess_dense_body(const BwdParams& p) {
  constexpr int kLanesPerRow = kPrepLanesPerRow<kD>, kRowsPerBlock = kPrepRowsPerBlock<kD>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanesPerRow;
  const int piece = threadIdx.x % kLanesPerRow;
  const int64_t n_rows = static_cast<int64_t>(p.BH) * p.Nq_pad;
  const int64_t bh = row / p.Nq_pad;
  const int q = static_cast<int>(row % p.Nq_pad);
  const bool valid = row < n_rows && q < p.Nq;
  const int64_t at = (bh * p.Nq + q) * kD + piece * 8;
  const float dot =
      row_dot<T, kD>(static_cast<const T*>(p.O), static_cast<const T*>(p.dO), at, valid);
  if (row < n_rows && piece == 0) {
    p.D[row] = valid ? dot : 0.f;
    p.LSE2[row] = valid ? lse2_of(p.LSE[bh * p.Nq + q]) : INFINITY;
  }
}

// The packed grid: the main blocks, (token, head) groups of kD / 8 threads, then the padding
// blocks, one thread per padding row of each (sequence, head).
template <int kD>
__host__ __device__ inline int64_t preprocess_packed_main_blocks(int64_t total_q, int H) {
  return (total_q * H + kPrepRowsPerBlock<kD> - 1) / kPrepRowsPerBlock<kD>;
}
template <int kD>
inline int64_t preprocess_packed_blocks(int64_t total_q, int H, int B) {
  const int64_t pad_rows = static_cast<int64_t>(B) * H * kPackedPadRows;
  return preprocess_packed_main_blocks<kD>(total_q, H) +
         (pad_rows + kPrepThreads - 1) / kPrepThreads;
}

template <class T, int kD>
__device__ __forceinline__ void preprocess_packed_body(const BwdParams& p) {
  constexpr int kLanesPerRow = kPrepLanesPerRow<kD>, kRowsPerBlock = kPrepRowsPerBlock<kD>;
  const int64_t main_blocks = preprocess_packed_main_blocks<kD>(p.total_q, p.H);
  if (blockIdx.x >= main_blocks) {  // padding: row k after sequence b's last, in head h
    const int64_t i = (blockIdx.x - main_blocks) * kPrepThreads + threadIdx.x;
    if (i >= static_cast<int64_t>(p.B) * p.H * kPackedPadRows) return;
    const int k = static_cast<int>(i % kPackedPadRows);
    const int64_t bh = i / kPackedPadRows;
    const int b = static_cast<int>(bh / p.H), h = static_cast<int>(bh % p.H);
    const int64_t end = bwd_packed_lse_start(p.cu_q[b], b) + (p.cu_q[b + 1] - p.cu_q[b]);
    const int64_t next = b + 1 < p.B ? bwd_packed_lse_start(p.cu_q[b + 1], b + 1) : p.lse_rows;
    if (end + k < next) {
      const int64_t row = static_cast<int64_t>(h) * p.lse_rows + end + k;
      p.D[row] = 0.f;
      p.LSE2[row] = INFINITY;
    }
    return;
  }
  const int64_t pairs = static_cast<int64_t>(p.total_q) * p.H;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanesPerRow;
  const int piece = threadIdx.x % kLanesPerRow;
  const bool valid = g < pairs;
  const int64_t token = g / p.H;
  const int h = static_cast<int>(g - token * p.H);
  // O and dO are [total_q][H][kD]: pair g's row is at g kD. Its LSE goes out with them.
  const bool writer = valid && piece == 0;
  const float lse = writer ? p.LSE[static_cast<int64_t>(h) * p.total_q + token] : 0.f;
  const float dot = row_dot<T, kD>(static_cast<const T*>(p.O), static_cast<const T*>(p.dO),
                                   g * kD + piece * 8, valid);
  if (writer) {
    const int b = seq_of(p.B, token, [&](int s) { return static_cast<int64_t>(p.cu_q[s]); });
    const int64_t q0 = p.cu_q[b];
    const int64_t row = static_cast<int64_t>(h) * p.lse_rows + bwd_packed_lse_start(q0, b) +
                        (token - q0);
    p.D[row] = dot;
    p.LSE2[row] = lse2_of(lse);
  }
}

template <class T, int kD>
__global__ void __launch_bounds__(kPrepThreads) preprocess_kernel(const BwdParams p) {
  preprocess_dense_body<T, kD>(p);
}

template <class T, int kD>
__global__ void __launch_bounds__(kPrepThreads) preprocess_packed_kernel(const BwdParams p) {
  preprocess_packed_body<T, kD>(p);
}

}  // namespace flashlab::cuda::bwd
