// Backward convert (FA2's last step): the fp32 dQ accumulator -> dQ in the storage dtype.
//
//   atomic-dq:        dQ = scale * accum                                   (one fp32 buffer)
//   deterministic-dq: dQ = scale * (split[0] + split[1] + ... + split[J])  always in this order
//                     (nsplits splits; split s holds the sum over the K blocks of outer-K CTA s)
//
// Why scale here: the main kernel works with dS = dL/dS where S = scale * Q K^T, so the true
// gradient is dQ = scale * dS K; multiplying once at the end saves a multiply per partial.
// For the splits, only those whose K blocks met this row's Q block are read: split s's blocks
// increase (snake order for deterministic-dq, strided for hopper-deterministic: common/band.h), so
// it met Q block i iff its first block at or past Band::k_blocks(i).begin is below .end (the
// same functions the writers decide by). Splits that were never written are never read, so
// nothing has to be zeroed first.
//
// One thread per 8 consecutive elements of dQ (two 16-byte loads per split, one 16-byte store).
// The accumulator's columns are permuted in groups of 8 (dq_accum_col); a group stays whole.
// A packed batch: dQ is token-major and the accumulator head-major (params.h); each thread finds
// its token's sequence (a binary search of the offsets) for its row inside it and its band. With
// one accumulator (atomic-dq, hopper) the thread loads first and searches after: it reads the 8
// floats at its own column of the accumulator's row, which depends on nothing but its index, and
// only then finds its row in the sequence, which says where in dQ those 8 columns belong (the
// permutation is an XOR, its own inverse). The search's chain of loads hides behind the big one.
#pragma once

#include <cstdint>

#include "common/fa2_bwd/params.h"
#include "common/packed.h"
#include "common/sm80/tiles.cuh"

namespace flashlab::cuda::bwd {

// 8 floats times the scale, stored as 8 elements of T in one 16-byte store.
template <class T>
__device__ __forceinline__ void store_scaled(T* dst, float4 lo, float4 hi, float scale) {
  uint4 out;
  out.x = ElemTraits<T>::pack(lo.x * scale, lo.y * scale);
  out.y = ElemTraits<T>::pack(lo.z * scale, lo.w * scale);
  out.z = ElemTraits<T>::pack(hi.x * scale, hi.y * scale);
  out.w = ElemTraits<T>::pack(hi.z * scale, hi.w * scale);
  *reinterpret_cast<uint4*>(dst) = out;
}

template <class T, int kD, bool kPacked>
__device__ __forceinline__ void convert_dq_body(const BwdParams& p, DqMode mode, int splits,
                                                int outer_k_Br, int outer_k_Bc) {
  const int64_t chunk = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t at = chunk * 8;  // element offset in dQ
  const int col =
      static_cast<int>(at % kD);  // a multiple of 8: one permuted group (sm80/tiles.cuh)
  int q;             // query row inside its sequence's head
  int64_t accum_at;  // the element in a split
  Band band = p.band;
  if constexpr (kPacked) {
    const int64_t n_chunks = static_cast<int64_t>(p.total_q) * p.H * (kD / 8);
    if (chunk >= n_chunks) return;
    const int64_t t = at / (static_cast<int64_t>(p.H) * kD);  // token
    const int64_t h = (at / kD) % p.H;
    if (mode == DqMode::atomic) {  // one accumulator (splits == 1): load, then search (the top)
      const float4* src =
          reinterpret_cast<const float4*>(p.dQ_accum + (h * p.total_q + t) * kD + col);
      const float4 lo = src[0], hi = src[1];
      const int b = seq_of(p.B, t, [&](int s) { return static_cast<int64_t>(p.cu_q[s]); });
      q = static_cast<int>(t - p.cu_q[b]);
      store_scaled<T>(static_cast<T*>(p.dQ) + at - col + dq_accum_col(q, col), lo, hi, p.scale);
      return;
    }
    const int b = seq_of(p.B, t, [&](int s) { return static_cast<int64_t>(p.cu_q[s]); });
    const SeqRows sr = seq_rows(p.cu_q, p.cu_k, b);
    q = static_cast<int>(t - sr.q0);
    band = seq_band(band, sr.nq, sr.nk);
    accum_at = (h * p.total_q + t) * kD + dq_accum_col(q, col);
  } else {
    const int64_t n_chunks = static_cast<int64_t>(p.BH) * p.Nq * (kD / 8);
    if (chunk >= n_chunks) return;
    q = static_cast<int>((at / kD) % p.Nq);
    accum_at = at - col + dq_accum_col(q, col);
  }
  const int q_block = q / outer_k_Br;

  float acc[8] = {};
  const BlockRange kr = band.k_blocks(q_block, outer_k_Br, outer_k_Bc);
  for (int j = 0; j < splits; ++j) {
    // atomic-dq's single buffer was zeroed; a split is read only where it was written.
    if (mode == DqMode::split) {
      const int first = p.dq_strided ? strided_first_at_or_past(j, kr.begin, splits)
                                     : snake_first_at_or_past(j, kr.begin, splits);
      if (first >= kr.end) continue;
    }
    const float4* src = reinterpret_cast<const float4*>(p.dQ_accum + j * p.split_stride + accum_at);
    const float4 lo = src[0], hi = src[1];
    acc[0] += lo.x, acc[1] += lo.y, acc[2] += lo.z, acc[3] += lo.w;
    acc[4] += hi.x, acc[5] += hi.y, acc[6] += hi.z, acc[7] += hi.w;
  }
  store_scaled<T>(static_cast<T*>(p.dQ) + at, make_float4(acc[0], acc[1], acc[2], acc[3]),
                  make_float4(acc[4], acc[5], acc[6], acc[7]), p.scale);
}

template <class T, int kD>
__global__ void __launch_bounds__(256)
    convert_dq_kernel(const BwdParams p, DqMode mode, int splits, int outer_k_Br, int outer_k_Bc) {
  convert_dq_body<T, kD, false>(p, mode, splits, outer_k_Br, outer_k_Bc);
}

template <class T, int kD>
__global__ void __launch_bounds__(256) convert_dq_packed_kernel(const BwdParams p, DqMode mode,
                                                                int splits, int outer_k_Br,
                                                                int outer_k_Bc) {
  convert_dq_body<T, kD, true>(p, mode, splits, outer_k_Br, outer_k_Bc);
}

}  // namespace flashlab::cuda::bwd
