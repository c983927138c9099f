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
// A packed batch (params.h): one thread group per row of LSE2's [H][lse_rows] layout; the group
// finds the sequence that holds its row (a binary search of the offsets), and the rows past that
// sequence's end, up to the next one's start, are its padding.
#pragma once

#include <cstdint>

#include "common/fa2_bwd/params.h"
#include "common/packed.h"
#include "common/sm80/mma.cuh"

namespace flashlab::cuda::bwd {

template <class T, int kD, bool kPacked>
__device__ __forceinline__ void preprocess_body(const BwdParams& p) {
  constexpr int kLanesPerRow = kD / 8;  // 16-byte pieces per row
  constexpr int kRowsPerBlock = 256 / kLanesPerRow;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanesPerRow;
  const int piece = threadIdx.x % kLanesPerRow;
  int64_t n_rows, at, lse_at;  // rows of LSE2; this row's element in O, dO and in LSE
  bool valid;
  if constexpr (kPacked) {
    n_rows = static_cast<int64_t>(p.H) * p.lse_rows;
    const int64_t h = row / p.lse_rows, t = row % p.lse_rows;
    const int b =
        seq_of(p.B, t, [&](int s) { return bwd_packed_lse_start(p.cu_q[s], s); });
    const int64_t q0 = p.cu_q[b];
    const int64_t q = t - bwd_packed_lse_start(q0, b);  // row in its sequence
    valid = row < n_rows && q < p.cu_q[b + 1] - q0;
    at = ((q0 + q) * p.H + h) * kD + piece * 8;
    lse_at = h * p.total_q + q0 + q;
  } else {
    n_rows = static_cast<int64_t>(p.BH) * p.Nq_pad;
    const int64_t bh = row / p.Nq_pad;
    const int q = static_cast<int>(row % p.Nq_pad);
    valid = row < n_rows && q < p.Nq;
    at = (bh * p.Nq + q) * kD + piece * 8;
    lse_at = bh * p.Nq + q;
  }

  float dot = 0.f;
  if (valid) {
    const uint4 o = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.O) + at);
    const uint4 g = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.dO) + at);
    const uint32_t ow[4] = {o.x, o.y, o.z, o.w};
    const uint32_t gw[4] = {g.x, g.y, g.z, g.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float2 a = ElemTraits<T>::unpack(ow[w]);
      const float2 b = ElemTraits<T>::unpack(gw[w]);
      dot += a.x * b.x + a.y * b.y;
    }
  }
  // The kLanesPerRow lanes of a row are consecutive and inside one warp: butterfly over them.
#pragma unroll
  for (int off = kLanesPerRow / 2; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);

  if (row < n_rows && piece == 0) {
    float lse2 = INFINITY;
    if (valid) {
      const float lse = p.LSE[lse_at];
      lse2 = lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;
    }
    p.D[row] = valid ? dot : 0.f;
    p.LSE2[row] = lse2;
  }
}

template <class T, int kD>
__global__ void __launch_bounds__(256) preprocess_kernel(const BwdParams p) {
  preprocess_body<T, kD, false>(p);
}

template <class T, int kD>
__global__ void __launch_bounds__(256) preprocess_packed_kernel(const BwdParams p) {
  preprocess_body<T, kD, true>(p);
}

}  // namespace flashlab::cuda::bwd
