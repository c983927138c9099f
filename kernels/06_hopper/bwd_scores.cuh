// What both consumers of the backward (bwd_consumer.cuh at d = 64 and 128,
// bwd_consumer_split_d.cuh at d = 256) do alike with a score tile S^T (keys down, queries across):
// where a thread's accumulator elements sit, and P^T = exp2(S^T scale log2e - LSE2).
#pragma once

#include <cmath>

#include "common/band.h"
#include "common/sm80/mma.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

// Accumulator element e of thread t of a warpgroup (sm90/wgmma.cuh): row 16 (t/32) + g +
// 8 ((e>>1)&1), column 8 (e>>2) + 2 q + (e&1), where lane = 4 g + q.
__device__ __forceinline__ int frag_row(int t, int e) {
  return 16 * (t / 32) + (t % 32) / 4 + 8 * ((e >> 1) & 1);
}
__device__ __forceinline__ int frag_col(int t, int e) {
  return 8 * (e >> 2) + 2 * (t % 4) + (e & 1);
}

// P^T = exp2(S^T scale log2e - LSE2) in place for the tile of query block i (Br columns) whose row
// 0 is key `key0`, 0 where a key is masked; the masked copy runs only on tiles that a band crosses
// (the diagonal, a window's sides) or the end of the keys. Padding queries (past Nq) have LSE2 =
// +inf and give 0 without a test, as do rows that see no key. scale_log2 is taken by reference, so
// that each product reads it from the kernel's parameters where it is used, as the kernels did
// before this function was shared (the same machine code).
//
// kByConstants: the mask's two forms, the same test. Key k (a row here) is seen by the queries
// k - offset - right <= q <= k - offset + left (common/band.h), i.e. by the tile's columns
// first_col <= c <= last_col; a key past Nk by none. Per row of the thread: the first and the last
// column. With kByConstants both are taken less the thread's own part of every column index
// (2 (t mod 4)), so that each element is tested against a constant; without, against its column,
// which ptxas keeps in registers. Which form fits the 240 registers of a d = 64 consumer differs
// by kernel (ptxas spilled 8 bytes in one and 4 in another): bwd_consumer.cuh picks per kernel.
template <bool kMasked, int Br, bool kByConstants = true, int NS>
__device__ void probabilities(float (&s)[NS], const float* lse2, const Band& band,
                              const float& scale_log2, int key0, int i, int t) {
  int first_col[2], last_col[2];
  const int own = kByConstants ? frag_col(t, 0) : 0;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = key0 + frag_row(t, 2 * r);
    const int c = key - band.offset - i * Br;
    first_col[r] = (key >= band.Nk ? Br : c - band.right) - own;
    last_col[r] = c + band.left - own;
  }
#pragma unroll
  for (int e = 0; e < NS; e += 2) {
    const float2 l2 = *reinterpret_cast<const float2*>(lse2 + frag_col(t, e));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float& x = s[e + h];
      x = fast_exp2(fmaf(x, scale_log2, -(h ? l2.y : l2.x)));
      if constexpr (kMasked) {
        const int c = frag_col(t, e + h) - own;  // kByConstants: a constant
        if (c < first_col[(e >> 1) & 1] || c > last_col[(e >> 1) & 1]) x = 0.f;
      }
    }
  }
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
